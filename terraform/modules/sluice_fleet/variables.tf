# Terraform 1.0 syntax only (no optional()): tests/cli/terraform.rs evaluates streams.tf
# with these variables offline. Each stream's settings are type-checked by sluice_table.

variable "stack" {
  description = "The sluice_stack module's `for_tables` output, shared by every stream."
  type        = any
}

variable "package_path" {
  description = "Path to the Lambda zip built by `make lambda` (target/lambda/sluice/bootstrap.zip)."
  type        = string
}

variable "tables" {
  description = "The streams, by job: each value holds any sluice_table inputs (engine, secret_arn, tables, postgres / mysql, schedule_expression, ...) over `defaults`. The key is the job (1-48 letters, digits, '_' or '-')."
  type        = any
}

variable "defaults" {
  description = "sluice_table inputs shared by every stream (e.g. engine, secret_arn, memory_size, timeout, schedule_expression, alarm_actions); a stream's own value wins. Unset everywhere means sluice_table's default."
  type        = any
  default     = {}
}

variable "tags" {
  description = "Tags for every resource of every stream; each stream's resources also get `job = <job>`."
  type        = map(string)
  default     = {}
}
