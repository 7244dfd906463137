variable "region" {
  description = "AWS region of the deployment (the databases should be in or near it)."
  type        = string
}

variable "bucket_name" {
  description = "Name of the S3 bucket to create for the parts (globally unique)."
  type        = string
}

variable "postgres_secret_arn" {
  description = "Secrets Manager secret with the PostgreSQL source: a postgres:// URL (sslmode=require or stricter) or a JSON object with host, port, username, password, dbname."
  type        = string
}

variable "mysql_secret_arn" {
  description = "Secrets Manager secret with the MySQL / MariaDB source: a mysql:// URL or a JSON object with host, port, username, password, dbname."
  type        = string
}

variable "package_path" {
  description = "The Lambda package built by `make lambda` (arm64)."
  type        = string
  default     = "../../../target/lambda/sluice/bootstrap.zip"
}

variable "alarm_actions" {
  description = "Where alarms notify (e.g. an SNS topic ARN); empty: alarms only change state."
  type        = list(string)
  default     = []
}

variable "alarm_emails" {
  description = "E-mail addresses subscribed to the stack's alarm topic."
  type        = list(string)
  default     = []
}
