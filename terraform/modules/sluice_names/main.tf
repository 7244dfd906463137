# Every AWS name of one stream, derived from its job (or function_name) in one place,
# so that a plan-time validation of the inputs is enough to make each name legal:
# tests/cli/terraform.rs renders this module with the longest legal job and checks
# every name against the limit of the AWS service that owns it. sluice_table names
# its resources only through this module.

locals {
  name         = var.function_name == null ? "sluice-${var.job}" : var.function_name
  machine_name = "${local.name}-baseline"

  names = {
    # Lambda function names: <= 64, [A-Za-z0-9_-].
    function         = local.name
    worker_function  = local.machine_name
    compact_function = "${local.name}-compact"
    # IAM role names: <= 64, [\w+=,.@-].
    drain_role           = local.name
    worker_role          = local.machine_name
    machine_role         = "${local.name}-sfn"
    scheduler_role       = "${local.name}-schedule"
    merge_role           = "${local.name}-merge"
    compact_role         = "${local.name}-compact"
    compact_machine_role = "${local.name}-sfn-cmp"
    verify_machine_role  = "${local.name}-sfn-vfy"
    # Step Functions state machine: <= 80, no whitespace or special characters.
    state_machine   = local.machine_name
    merge_machine   = "${local.name}-merge"
    compact_machine = "${local.name}-compact"
    verify_machine  = "${local.name}-verify"
    # EventBridge rule / Scheduler schedule: <= 64, [.A-Za-z0-9_-].
    schedule            = local.name
    compaction_schedule = "${local.name}-compact"
    verify_schedule     = "${local.name}-verify"
    # SQS queue (the schedule's dead-letter queue): <= 80, [A-Za-z0-9_-].
    dead_letter_queue = "${local.name}-dlq"
    # CloudWatch Logs log groups: <= 512.
    drain_log_group           = "/aws/lambda/${local.name}"
    worker_log_group          = "/aws/lambda/${local.machine_name}"
    machine_log_group         = "/aws/vendedlogs/states/${local.machine_name}"
    merge_log_group           = "/aws/vendedlogs/states/${local.name}-merge"
    compact_log_group         = "/aws/lambda/${local.name}-compact"
    compact_machine_log_group = "/aws/vendedlogs/states/${local.name}-compact"
    verify_machine_log_group  = "/aws/vendedlogs/states/${local.name}-verify"
    # CloudWatch dashboard: <= 255, [A-Za-z0-9_-].
    dashboard = local.name
  }

  # CloudWatch alarm names: <= 255.
  alarm_suffixes = [
    "errors", "throttles", "dropped-events", "duration", "lag", "retained-bytes",
    "missed-runs", "failed-runs", "skipped-runs", "rds-slot-lag", "baseline-failed", "schedule-dlq",
    "compaction-failed", "compaction-errors", "verify-differs",
  ]
  alarms = { for s in local.alarm_suffixes : s => "${local.name}-${s}" }
}
