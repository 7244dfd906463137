output "bucket_name" {
  description = "Where the parts land: s3://<bucket>/<job>/<table>/."
  value       = module.stack.bucket_name
}

output "alarm_topic_arn" {
  description = "The topic every alarm notifies."
  value       = module.stack.alarm_topic_arn
}

output "functions" {
  description = "The drain function of each stream, by job."
  value       = module.fleet.function_names
}

output "dashboards" {
  description = "The dashboard of each stream, by job."
  value       = module.fleet.dashboard_names
}
