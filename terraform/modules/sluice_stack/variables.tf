variable "name" {
  description = "Name prefix of the shared resources (state table `<name>-state`, KMS alias `alias/<name>`)."
  type        = string
  default     = "sluice"
  validation {
    condition     = can(regex("^[A-Za-z0-9_-]{1,40}$", var.name))
    error_message = "The name must be 1-40 letters, digits, '_' or '-'."
  }
}

variable "bucket_name" {
  description = "Name of the S3 bucket the parts, manifests and snapshots go to (created by this module)."
  type        = string
  validation {
    condition     = can(regex("^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$", var.bucket_name)) && !can(regex("\\.\\.", var.bucket_name))
    error_message = "The bucket_name must be a valid S3 bucket name (3-63 lower-case letters, digits, '.', '-')."
  }
}

variable "bucket_versioning" {
  description = "Enable S3 versioning. Parts are never overwritten (If-None-Match); versioning additionally keeps overwritten _manifest.json files and deleted objects."
  type        = bool
  default     = true
}

variable "noncurrent_version_expiration_days" {
  description = "With versioning, expire non-current object versions after this many days (null keeps them)."
  type        = number
  default     = 30
  validation {
    condition     = var.noncurrent_version_expiration_days == null ? true : var.noncurrent_version_expiration_days >= 1
    error_message = "The noncurrent_version_expiration_days must be at least 1 (or null)."
  }
}

variable "part_expiration_days" {
  description = "Expire change parts (`cdc-*.parquet` and everything else in the bucket) after this many days; null keeps them forever. Only set this when downstream has merged them."
  type        = number
  default     = null
  validation {
    condition     = var.part_expiration_days == null ? true : var.part_expiration_days >= 1
    error_message = "The part_expiration_days must be at least 1 (or null)."
  }
}

variable "abort_incomplete_multipart_days" {
  description = "Abort multipart uploads left incomplete (a run killed mid-part) after this many days."
  type        = number
  default     = 2
  validation {
    condition     = var.abort_incomplete_multipart_days >= 1
    error_message = "The abort_incomplete_multipart_days must be at least 1."
  }
}

variable "access_log_bucket" {
  description = "Optional bucket receiving S3 server access logs of the data bucket (null: no access logging)."
  type        = string
  default     = null
}

variable "kms_key_arn" {
  description = "Customer managed KMS key for the bucket, state table, log groups and function environments; null creates one (with rotation). A key of your own must let CloudWatch Logs (logs.<region>.amazonaws.com) use it for /aws/lambda/* and /aws/vendedlogs/states/* log groups."
  type        = string
  default     = null
}

variable "force_destroy" {
  description = "Allow `terraform destroy` to delete a non-empty bucket. Keep false in production."
  type        = bool
  default     = false
}

variable "state_table_deletion_protection" {
  description = "Deletion protection of the state table (it holds every stream's checkpoint)."
  type        = bool
  default     = true
}

variable "bucket_policy_json" {
  description = "Extra bucket-policy statements, as IAM policy documents (JSON, e.g. from aws_iam_policy_document), merged with the module's TLS-only statements (e.g. cross-account readers of the parts)."
  type        = list(string)
  default     = []
}

variable "kms_key_users" {
  description = "IAM principal ARNs (roles, accounts) allowed to decrypt with the created key (kms:Decrypt, kms:DescribeKey), e.g. readers of the parts in another account; ignored with kms_key_arn (grant them on your key)."
  type        = list(string)
  default     = []
}

variable "alarm_topic_arn" {
  description = "SNS topic every stream's alarms notify; null creates `<name>-alarms` (encrypted with the stack key, CloudWatch of this account may publish). A topic of your own must accept cloudwatch.amazonaws.com (and its KMS key, if any)."
  type        = string
  default     = null
}

variable "alarm_emails" {
  description = "E-mail addresses subscribed to the created alarm topic (each confirms by mail); ignored with alarm_topic_arn."
  type        = list(string)
  default     = []
}

variable "tags" {
  description = "Tags for every resource."
  type        = map(string)
  default     = {}
}

variable "glue_database_name" {
  description = "Create this Glue database for the streams' catalog tables (their `catalog = { database = … }`); null creates none (a stream's first run then creates the database itself, or use an existing one). 1-255 lower-case letters, digits and `_`."
  type        = string
  default     = null
  validation {
    condition     = var.glue_database_name == null || can(regex("^[a-z0-9_]{1,255}$", coalesce(var.glue_database_name, "x")))
    error_message = "The glue_database_name must be 1-255 lower-case letters, digits and `_`."
  }
}
