output "function_name" {
  description = "The drain function."
  value       = aws_lambda_function.drain.function_name
}

output "function_arn" {
  description = "ARN of the drain function."
  value       = aws_lambda_function.drain.arn
}

output "role_arn" {
  description = "The drain function's execution role (grant the source database access to nothing else)."
  value       = aws_iam_role.drain.arn
}

output "log_group_name" {
  description = "The drain function's log group (JSON logs and one EMF line per run)."
  value       = aws_cloudwatch_log_group.drain.name
}

output "schedule_arn" {
  description = "What starts the drain: the EventBridge Scheduler schedule, or the classic rule (schedule_type = rule)."
  value       = var.schedule_type == "scheduler" ? aws_scheduler_schedule.drain[0].arn : aws_cloudwatch_event_rule.schedule[0].arn
}

output "schedule_dead_letter_queue_arn" {
  description = "The schedule's dead-letter queue (null with schedule_type = rule)."
  value       = var.schedule_type == "scheduler" ? aws_sqs_queue.schedule_dlq[0].arn : null
}

output "state_machine_arn" {
  description = "The baseline state machine (null unless baseline_state_machine)."
  value       = var.baseline_state_machine ? aws_sfn_state_machine.baseline[0].arn : null
}

output "worker_function_arn" {
  description = "The baseline worker function (null unless baseline_state_machine)."
  value       = var.baseline_state_machine ? aws_lambda_function.worker[0].arn : null
}

output "compaction_function_arn" {
  description = "The compaction function (null with compaction = false)."
  value       = local.compaction_enabled ? aws_lambda_function.compact[0].arn : null
}

output "compaction_state_machine_arn" {
  description = "The compaction's fan-out machine (null without compaction_parallel)."
  value       = local.compaction_fan_out ? aws_sfn_state_machine.compact[0].arn : null
}

output "compaction_schedule_arn" {
  description = "What starts the compaction: its EventBridge Scheduler schedule or classic rule (null with compaction = false)."
  value       = !local.compaction_enabled ? null : (var.schedule_type == "scheduler" ? aws_scheduler_schedule.compact[0].arn : aws_cloudwatch_event_rule.compact[0].arn)
}

output "verify_state_machine_arn" {
  description = "The verify walker's machine (null without verify_parallel)."
  value       = local.verify_fan_out ? aws_sfn_state_machine.verify[0].arn : null
}

output "config" {
  description = "The SLUICE_CONFIG document of both functions, as an object."
  value       = module.config.document
}

output "alarm_arns" {
  description = "The stream's alarms, by name suffix (errors, throttles, dropped-events, duration, lag, retained-bytes, missed-runs, failed-runs, skipped-runs, rds-slot-lag, baseline-failed, compaction-failed, compaction-errors, verify-differs)."
  value = merge(
    { for k, a in aws_cloudwatch_metric_alarm.metric : k => a.arn },
    { for a in aws_cloudwatch_metric_alarm.baseline_failed : "baseline-failed" => a.arn },
  )
}

output "dashboard_name" {
  description = "The stream's CloudWatch dashboard (lag, retained bytes, rows, bytes, parts, duration, runs by status, compactions, verifies, errors, throttles)."
  value       = aws_cloudwatch_dashboard.stream.dashboard_name
}
