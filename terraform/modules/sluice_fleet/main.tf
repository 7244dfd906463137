# The fleet entry point: one sluice_table per entry of `tables` (for_each), with shared
# defaults and a `job` tag on everything. Every sluice_table input is forwarded as
# lookup(each.value, "<input>", null); null keeps sluice_table's default (its inputs are
# nullable = false). tests/cli/terraform.rs checks the forwarding is complete.

module "table" {
  source   = "../sluice_table"
  for_each = local.streams

  job          = each.key
  stack        = var.stack
  package_path = var.package_path
  tags         = each.value.tags

  prefix                         = lookup(each.value, "prefix", null)
  engine                         = lookup(each.value, "engine", null)
  secret_arn                     = lookup(each.value, "secret_arn", null)
  secret_kms_key_arn             = lookup(each.value, "secret_kms_key_arn", null)
  tables                         = lookup(each.value, "tables", null)
  postgres                       = lookup(each.value, "postgres", null)
  mysql                          = lookup(each.value, "mysql", null)
  output                         = lookup(each.value, "output", null)
  lease_ttl_seconds              = lookup(each.value, "lease_ttl_seconds", null)
  safety_margin_seconds          = lookup(each.value, "safety_margin_seconds", null)
  initial                        = lookup(each.value, "initial", null)
  baseline                       = lookup(each.value, "baseline", null)
  catalog                        = lookup(each.value, "catalog", null)
  iceberg                        = lookup(each.value, "iceberg", null)
  policy                         = lookup(each.value, "policy", null)
  function_name                  = lookup(each.value, "function_name", null)
  architecture                   = lookup(each.value, "architecture", null)
  memory_size                    = lookup(each.value, "memory_size", null)
  timeout                        = lookup(each.value, "timeout", null)
  ephemeral_storage_mb           = lookup(each.value, "ephemeral_storage_mb", null)
  log_level                      = lookup(each.value, "log_level", null)
  log_retention_days             = lookup(each.value, "log_retention_days", null)
  vpc                            = lookup(each.value, "vpc", null)
  schedule_expression            = lookup(each.value, "schedule_expression", null)
  schedule_interval_seconds      = lookup(each.value, "schedule_interval_seconds", null)
  schedule_enabled               = lookup(each.value, "schedule_enabled", null)
  baseline_state_machine         = lookup(each.value, "baseline_state_machine", null)
  baseline_definition_path       = lookup(each.value, "baseline_definition_path", null)
  current_state_merge            = lookup(each.value, "current_state_merge", null)
  baseline_worker_concurrency    = lookup(each.value, "baseline_worker_concurrency", null)
  alarm_actions                  = lookup(each.value, "alarm_actions", null)
  ok_actions                     = lookup(each.value, "ok_actions", null)
  lag_alarm_threshold_seconds    = lookup(each.value, "lag_alarm_threshold_seconds", null)
  retained_bytes_alarm_threshold = lookup(each.value, "retained_bytes_alarm_threshold", null)
  rds_db_instance_identifier     = lookup(each.value, "rds_db_instance_identifier", null)
  duration_alarm_ratio           = lookup(each.value, "duration_alarm_ratio", null)
  missed_runs_alarm_intervals    = lookup(each.value, "missed_runs_alarm_intervals", null)
  iam_role_path                  = lookup(each.value, "iam_role_path", null)
  permissions_boundary_arn       = lookup(each.value, "permissions_boundary_arn", null)
  log_format                     = lookup(each.value, "log_format", null)
  schedule_type                  = lookup(each.value, "schedule_type", null)
  schedule_time_zone             = lookup(each.value, "schedule_time_zone", null)
  schedule_retry_attempts        = lookup(each.value, "schedule_retry_attempts", null)
  compaction                     = lookup(each.value, "compaction", null)
  compaction_schedule_expression = lookup(each.value, "compaction_schedule_expression", null)
  compaction_parallel            = lookup(each.value, "compaction_parallel", null)
  compaction_settings            = lookup(each.value, "compaction_settings", null)
  verify                         = lookup(each.value, "verify", null)
  verify_schedule_expression     = lookup(each.value, "verify_schedule_expression", null)
  verify_parallel                = lookup(each.value, "verify_parallel", null)
}
