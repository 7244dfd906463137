variable "region" {
  description = "AWS region of the deployment."
  type        = string
}

variable "bucket_name" {
  description = "Name of the S3 bucket to create for the parts (globally unique)."
  type        = string
}

variable "vpc_id" {
  description = "The VPC of the source database."
  type        = string
}

variable "subnet_ids" {
  description = "Private subnets (no NAT needed) the function and the interface endpoints run in."
  type        = list(string)
}

variable "route_table_ids" {
  description = "Route tables of those subnets, for the S3 and DynamoDB gateway endpoints."
  type        = list(string)
}

variable "database_security_group_id" {
  description = "Security group of the source database; the function may reach it on database_port."
  type        = string
}

variable "database_port" {
  description = "Port of the source database."
  type        = number
  default     = 5432
}

variable "postgres_secret_arn" {
  description = "Secrets Manager secret with the PostgreSQL source (host = the database's private address)."
  type        = string
}

variable "package_path" {
  description = "The Lambda package built by `make lambda` (arm64)."
  type        = string
  default     = "../../../target/lambda/sluice/bootstrap.zip"
}
