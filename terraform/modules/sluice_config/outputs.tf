output "document" {
  description = "The config document as an object (what SLUICE_CONFIG carries)."
  value       = local.checked ? local.document : null
}

output "json" {
  description = "The config document as JSON, the value of SLUICE_CONFIG."
  value       = local.checked ? jsonencode(local.document) : null
}

output "lease_ttl_seconds" {
  description = "The lease lifetime the document sets."
  value       = local.lease_ttl
}
