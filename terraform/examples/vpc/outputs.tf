output "function_name" {
  description = "The drain function."
  value       = module.orders.function_name
}

output "function_security_group_id" {
  description = "The function's security group."
  value       = aws_security_group.function.id
}
