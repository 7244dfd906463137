# Three alarms per stream, on the metrics the binary emits (src/metrics.rs: namespace
# `sluice`, dimension `job`) and on Lambda's own Errors metric. Periods follow the
# schedule interval, clamped to what CloudWatch accepts.

locals {
  alarm_period = local.interval == null ? 300 : max(60, min(86400, floor(local.interval / 60) * 60))
  # CloudWatch caps period x evaluation periods at one day (seven for hour-long periods).
  missed_periods = min(var.missed_runs_alarm_intervals, floor((local.alarm_period >= 3600 ? 604800 : 86400) / local.alarm_period))
}

resource "aws_cloudwatch_metric_alarm" "errors" {
  alarm_name          = "${local.name}-errors"
  alarm_description   = "sluice ${var.job}: the drain function failed (see its log for the SLUICE_* code and hint)."
  namespace           = "AWS/Lambda"
  metric_name         = "Errors"
  dimensions          = { FunctionName = aws_lambda_function.drain.function_name }
  statistic           = "Sum"
  period              = local.alarm_period
  evaluation_periods  = 1
  threshold           = 1
  comparison_operator = "GreaterThanOrEqualToThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = var.alarm_actions
  ok_actions          = var.ok_actions
  tags                = var.tags
}

resource "aws_cloudwatch_metric_alarm" "lag" {
  alarm_name          = "${local.name}-lag"
  alarm_description   = "sluice ${var.job}: replication lag above ${var.lag_alarm_threshold_seconds} s."
  namespace           = "sluice"
  metric_name         = "lag_seconds"
  dimensions          = { job = var.job }
  statistic           = "Maximum"
  period              = local.alarm_period
  evaluation_periods  = 1
  threshold           = var.lag_alarm_threshold_seconds
  comparison_operator = "GreaterThanThreshold"
  # No runs means no lag datapoints; the missed-runs alarm covers that.
  treat_missing_data = "notBreaching"
  alarm_actions      = var.alarm_actions
  ok_actions         = var.ok_actions
  tags               = var.tags
}

resource "aws_cloudwatch_metric_alarm" "missed_runs" {
  alarm_name          = "${local.name}-missed-runs"
  alarm_description   = "sluice ${var.job}: no run drained to the end of the log in ${local.missed_periods} schedule intervals (failing, partial, skipped or not running)."
  namespace           = "sluice"
  metric_name         = "run_drained"
  dimensions          = { job = var.job }
  statistic           = "Sum"
  period              = local.alarm_period
  evaluation_periods  = local.missed_periods
  datapoints_to_alarm = local.missed_periods
  threshold           = 1
  comparison_operator = "LessThanThreshold"
  treat_missing_data  = "breaching"
  alarm_actions       = var.alarm_actions
  ok_actions          = var.ok_actions
  tags                = var.tags
}

resource "aws_cloudwatch_metric_alarm" "baseline_failed" {
  count               = var.baseline_state_machine ? 1 : 0
  alarm_name          = "${local.name}-baseline-failed"
  alarm_description   = "sluice ${var.job}: a baseline execution failed, timed out or was aborted."
  namespace           = "AWS/States"
  metric_name         = "ExecutionsFailed"
  dimensions          = { StateMachineArn = aws_sfn_state_machine.baseline[0].arn }
  statistic           = "Sum"
  period              = 300
  evaluation_periods  = 1
  threshold           = 1
  comparison_operator = "GreaterThanOrEqualToThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = var.alarm_actions
  ok_actions          = var.ok_actions
  tags                = var.tags
}
