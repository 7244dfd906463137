output "bucket_name" {
  description = "Where the parts land: s3://<bucket>/<job>/<table>/."
  value       = module.stack.bucket_name
}

output "state_table_name" {
  description = "The shared state table."
  value       = module.stack.state_table_name
}

output "functions" {
  description = "The drain function of each stream."
  value = {
    orders    = module.orders.function_name
    customers = module.customers.function_name
  }
}

output "baseline_state_machine_arn" {
  description = "The orders stream's baseline state machine."
  value       = module.orders.state_machine_arn
}

output "configs" {
  description = "The rendered SLUICE_CONFIG of each stream."
  value = {
    orders    = module.orders.config
    customers = module.customers.config
  }
}
