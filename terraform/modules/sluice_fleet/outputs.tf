output "function_names" {
  description = "The drain function of each stream, by job."
  value       = { for job, t in module.table : job => t.function_name }
}

output "state_machine_arns" {
  description = "The baseline state machine of each stream that has one, by job."
  value       = { for job, t in module.table : job => t.state_machine_arn if t.state_machine_arn != null }
}

output "alarm_arns" {
  description = "Every stream's alarms, by job and alarm."
  value       = { for job, t in module.table : job => t.alarm_arns }
}

output "dashboard_names" {
  description = "The dashboard of each stream, by job."
  value       = { for job, t in module.table : job => t.dashboard_name }
}

output "configs" {
  description = "The rendered SLUICE_CONFIG of each stream, by job."
  value       = { for job, t in module.table : job => t.config }
}
