terraform {
  required_version = ">= 1.3.0"
  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = ">= 5.30, < 7.0"
    }
  }
}

provider "aws" {
  region = var.region
  default_tags {
    tags = { app = "sluice", example = "fleet" }
  }
}
