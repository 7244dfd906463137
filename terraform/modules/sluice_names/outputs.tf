output "names" {
  description = "The stream's resource names: function, worker_function, compact_function, drain_role, worker_role, machine_role, scheduler_role, merge_role, compact_role, compact_machine_role, state_machine, merge_machine, compact_machine, schedule, compaction_schedule, verify_schedule, dead_letter_queue, drain_log_group, worker_log_group, machine_log_group, merge_log_group, compact_log_group, compact_machine_log_group, dashboard."
  value       = local.names
}

output "alarms" {
  description = "The stream's alarm names, by alarm (errors, throttles, dropped-events, duration, lag, retained-bytes, missed-runs, failed-runs, skipped-runs, rds-slot-lag, baseline-failed, schedule-dlq, compaction-failed, compaction-errors, verify-differs)."
  value       = local.alarms
}
