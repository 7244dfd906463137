# The stream's alarms, every one notifying local.alarm_actions (the stack's alarm topic
# plus alarm_actions; the plan fails when that is empty), and its dashboard. They watch
# the metrics the binary emits (src/metrics.rs: namespace `sluice`, dimension `job`;
# tests/cli/terraform.rs checks every name used here against the code's constants) and
# Lambda's, Step Functions' and (optionally) RDS's own. Periods follow the schedule
# interval, clamped to what CloudWatch accepts.

locals {
  alarm_actions = distinct(concat(var.stack.alarm_topic_arn == null ? [] : [var.stack.alarm_topic_arn], var.alarm_actions))
  ok_actions    = var.ok_actions == null ? local.alarm_actions : var.ok_actions

  alarm_period = local.interval == null ? 300 : max(60, min(86400, floor(local.interval / 60) * 60))
  # CloudWatch caps period x evaluation periods at one day (seven for hour-long periods).
  missed_periods = min(var.missed_runs_alarm_intervals, floor((local.alarm_period >= 3600 ? 604800 : 86400) / local.alarm_period))

  # Alarms on one metric with a static threshold: name => settings. `sustained` alarms
  # fire only when every one of missed_periods periods breaches (conditions that a
  # single long run causes by design: an overlapping tick throttled or dropped).
  lambda_dims = { FunctionName = local.name }
  sluice_dims = { job = var.job }
  metric_alarms = merge(
    {
      errors = {
        description = "the drain function failed (see its log for the SLUICE_* code and hint)."
        namespace   = "AWS/Lambda", metric = "Errors", dims = local.lambda_dims, stat = "Sum"
        op          = "GreaterThanOrEqualToThreshold", threshold = 1, sustained = false, missing = "notBreaching"
      }
      throttles = {
        description = "the drain function was throttled in ${local.missed_periods} intervals in a row (runs overlap the schedule, or the account's concurrency is exhausted)."
        namespace   = "AWS/Lambda", metric = "Throttles", dims = local.lambda_dims, stat = "Sum"
        op          = "GreaterThanOrEqualToThreshold", threshold = 1, sustained = true, missing = "notBreaching"
      }
      dropped-events = {
        description = "scheduled invocations were dropped (older than one interval, or throttled past their age) in ${local.missed_periods} intervals in a row."
        namespace   = "AWS/Lambda", metric = "AsyncEventsDropped", dims = local.lambda_dims, stat = "Sum"
        op          = "GreaterThanOrEqualToThreshold", threshold = 1, sustained = true, missing = "notBreaching"
      }
      duration = {
        description = "runs took over ${floor(var.duration_alarm_ratio * 100)}% of the ${var.timeout} s timeout in ${local.missed_periods} intervals in a row: the stream is not keeping up, or a run is near being killed."
        namespace   = "AWS/Lambda", metric = "Duration", dims = local.lambda_dims, stat = "Maximum"
        op          = "GreaterThanThreshold", threshold = var.duration_alarm_ratio * var.timeout * 1000, sustained = true, missing = "notBreaching"
      }
      lag = {
        description = "replication lag above ${var.lag_alarm_threshold_seconds} s."
        namespace   = "sluice", metric = "lag_seconds", dims = local.sluice_dims, stat = "Maximum"
        # No runs means no lag datapoints; the missed-runs alarm covers that.
        op = "GreaterThanThreshold", threshold = var.lag_alarm_threshold_seconds, sustained = false, missing = "notBreaching"
      }
      retained-bytes = {
        description = "the source retains over ${var.retained_bytes_alarm_threshold} bytes of log for this stream (a stalled slot fills the source's disk): see docs/operations.md."
        namespace   = "sluice", metric = "source_retained_bytes", dims = local.sluice_dims, stat = "Maximum"
        op          = "GreaterThanThreshold", threshold = var.retained_bytes_alarm_threshold, sustained = false, missing = "notBreaching"
      }
      missed-runs = {
        description = "no run drained to the end of the log in ${local.missed_periods} schedule intervals (failing, partial, skipped or not running)."
        namespace   = "sluice", metric = "run_drained", dims = local.sluice_dims, stat = "Sum"
        op          = "LessThanThreshold", threshold = 1, sustained = true, missing = "breaching"
      }
      failed-runs = {
        description = "a run failed (EMF run_failed; its log has the SLUICE_* code and hint)."
        namespace   = "sluice", metric = "run_failed", dims = local.sluice_dims, stat = "Sum"
        op          = "GreaterThanOrEqualToThreshold", threshold = 1, sustained = false, missing = "notBreaching"
      }
      skipped-runs = {
        description = "runs were skipped (another holder of the lease or claim) in ${local.missed_periods} intervals in a row."
        namespace   = "sluice", metric = "run_skipped", dims = local.sluice_dims, stat = "Sum"
        op          = "GreaterThanOrEqualToThreshold", threshold = 1, sustained = true, missing = "notBreaching"
      }
    },
    var.schedule_type != "scheduler" ? {} : {
      schedule-dlq = {
        description = "a scheduled tick could not be delivered to the drain function after its retries (see the dead-letter queue ${local.names.dead_letter_queue})."
        namespace   = "AWS/SQS", metric = "ApproximateNumberOfMessagesVisible", dims = { QueueName = local.names.dead_letter_queue }, stat = "Maximum"
        op          = "GreaterThanOrEqualToThreshold", threshold = 1, sustained = false, missing = "notBreaching"
      }
    },
    !local.compaction_enabled ? {} : {
      compaction-failed = {
        description = "a table's compaction failed (EMF compaction_failed; the compaction function's log has the SLUICE_* code — SLUICE_COMPACTION_PART_CORRUPT names a part to restore)."
        namespace   = "sluice", metric = "compaction_failed", dims = local.sluice_dims, stat = "Sum"
        op          = "GreaterThanOrEqualToThreshold", threshold = 1, sustained = false, missing = "notBreaching"
      }
      compaction-errors = {
        description = "the compaction function failed (see its log for the SLUICE_* code and hint)."
        namespace   = "AWS/Lambda", metric = "Errors", dims = { FunctionName = local.names.compact_function }, stat = "Sum"
        op          = "GreaterThanOrEqualToThreshold", threshold = 1, sustained = false, missing = "notBreaching"
      }
    },
    !local.verify_enabled ? {} : {
      verify-differs = {
        description = "a verify found rows the lake and the source disagree on (EMF verify_mismatched_rows; the drain function's log has the report's summary line — run sluice verify --table T --json FILE for the keys, --repair to fix them)."
        namespace   = "sluice", metric = "verify_mismatched_rows", dims = local.sluice_dims, stat = "Sum"
        op          = "GreaterThanOrEqualToThreshold", threshold = 1, sustained = false, missing = "notBreaching"
      }
    },
    var.rds_db_instance_identifier == null ? {} : {
      rds-slot-lag = {
        description = "RDS reports over ${var.retained_bytes_alarm_threshold} bytes of WAL behind the oldest replication slot of ${var.rds_db_instance_identifier}."
        namespace   = "AWS/RDS", metric = "OldestReplicationSlotLag", dims = { DBInstanceIdentifier = var.rds_db_instance_identifier }, stat = "Maximum"
        op          = "GreaterThanThreshold", threshold = var.retained_bytes_alarm_threshold, sustained = false, missing = "notBreaching"
      }
    },
  )
}

resource "aws_cloudwatch_metric_alarm" "metric" {
  for_each            = local.metric_alarms
  alarm_name          = module.names.alarms[each.key]
  alarm_description   = "sluice ${var.job}: ${each.value.description}"
  namespace           = each.value.namespace
  metric_name         = each.value.metric
  dimensions          = each.value.dims
  statistic           = each.value.stat
  period              = local.alarm_period
  evaluation_periods  = each.value.sustained ? local.missed_periods : 1
  datapoints_to_alarm = each.value.sustained ? local.missed_periods : 1
  threshold           = each.value.threshold
  comparison_operator = each.value.op
  treat_missing_data  = each.value.missing
  alarm_actions       = local.alarm_actions
  ok_actions          = local.ok_actions
  tags                = var.tags

  lifecycle {
    precondition {
      condition     = length(local.alarm_actions) > 0
      error_message = "The alarms would reach nobody: give the stack an alarm topic (sluice_stack creates one by default) or set alarm_actions."
    }
  }

  depends_on = [aws_lambda_function.drain]
}

resource "aws_cloudwatch_metric_alarm" "baseline_failed" {
  count               = var.baseline_state_machine ? 1 : 0
  alarm_name          = module.names.alarms["baseline-failed"]
  alarm_description   = "sluice ${var.job}: a baseline execution failed, timed out or was aborted (ExecutionsFailed + ExecutionsTimedOut + ExecutionsAborted)."
  evaluation_periods  = 1
  threshold           = 1
  comparison_operator = "GreaterThanOrEqualToThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = local.alarm_actions
  ok_actions          = local.ok_actions
  tags                = var.tags

  metric_query {
    id          = "ended_badly"
    expression  = "failed + timed_out + aborted"
    label       = "Baseline executions failed, timed out or aborted"
    return_data = true
  }

  dynamic "metric_query" {
    for_each = { failed = "ExecutionsFailed", timed_out = "ExecutionsTimedOut", aborted = "ExecutionsAborted" }
    content {
      id = metric_query.key
      metric {
        namespace   = "AWS/States"
        metric_name = metric_query.value
        dimensions  = { StateMachineArn = aws_sfn_state_machine.baseline[0].arn }
        stat        = "Sum"
        period      = 300
      }
    }
  }

  lifecycle {
    precondition {
      condition     = length(local.alarm_actions) > 0
      error_message = "The alarms would reach nobody: give the stack an alarm topic (sluice_stack creates one by default) or set alarm_actions."
    }
  }
}

# ---------------------------------------------------------------- dashboard

locals {
  # One widget per row of [title, namespace, metric, dimensions, stat].
  widgets = [
    ["Replication lag (s)", "sluice", "lag_seconds", local.sluice_dims, "Maximum"],
    ["Source log retained (bytes)", "sluice", "source_retained_bytes", local.sluice_dims, "Maximum"],
    ["Rows", "sluice", "rows", local.sluice_dims, "Sum"],
    ["Bytes written", "sluice", "bytes", local.sluice_dims, "Sum"],
    ["Parts", "sluice", "parts", local.sluice_dims, "Sum"],
    ["Run duration (ms)", "sluice", "duration_ms", local.sluice_dims, "Maximum"],
    ["Runs drained", "sluice", "run_drained", local.sluice_dims, "Sum"],
    ["Runs partial", "sluice", "run_partial", local.sluice_dims, "Sum"],
    ["Runs skipped", "sluice", "run_skipped", local.sluice_dims, "Sum"],
    ["Runs failed", "sluice", "run_failed", local.sluice_dims, "Sum"],
    ["Compaction: data files before", "sluice", "compaction_files_before", local.sluice_dims, "Maximum"],
    ["Compaction: data files after", "sluice", "compaction_files_after", local.sluice_dims, "Maximum"],
    ["Compaction: bytes read", "sluice", "compaction_bytes_read", local.sluice_dims, "Sum"],
    ["Compaction: bytes written", "sluice", "compaction_bytes_written", local.sluice_dims, "Sum"],
    ["Compaction duration (ms)", "sluice", "compaction_duration_ms", local.sluice_dims, "Maximum"],
    ["Compactions failed", "sluice", "compaction_failed", local.sluice_dims, "Sum"],
    ["Verify: chunks", "sluice", "verify_chunks", local.sluice_dims, "Sum"],
    ["Verify: mismatched rows", "sluice", "verify_mismatched_rows", local.sluice_dims, "Sum"],
    ["Verify duration (ms)", "sluice", "verify_duration_ms", local.sluice_dims, "Maximum"],
    ["Function errors", "AWS/Lambda", "Errors", local.lambda_dims, "Sum"],
    ["Function throttles", "AWS/Lambda", "Throttles", local.lambda_dims, "Sum"],
  ]
}

resource "aws_cloudwatch_dashboard" "stream" {
  dashboard_name = local.names.dashboard
  dashboard_body = jsonencode({
    widgets = [
      for i, w in local.widgets : {
        type   = "metric"
        x      = (i % 3) * 8
        y      = floor(i / 3) * 6
        width  = 8
        height = 6
        properties = {
          title   = w[0]
          region  = local.region
          stat    = w[4]
          period  = local.alarm_period
          view    = "timeSeries"
          metrics = [concat([w[1], w[2]], flatten([for k, v in w[3] : [k, v]]))]
        }
      }
    ]
  })
}

# The alarms were single resources before they shared one for_each.
moved {
  from = aws_cloudwatch_metric_alarm.errors
  to   = aws_cloudwatch_metric_alarm.metric["errors"]
}

moved {
  from = aws_cloudwatch_metric_alarm.lag
  to   = aws_cloudwatch_metric_alarm.metric["lag"]
}

moved {
  from = aws_cloudwatch_metric_alarm.missed_runs
  to   = aws_cloudwatch_metric_alarm.metric["missed-runs"]
}
