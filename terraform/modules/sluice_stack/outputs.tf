output "bucket_name" {
  description = "The data bucket."
  value       = aws_s3_bucket.this.id
}

output "bucket_arn" {
  description = "ARN of the data bucket."
  value       = aws_s3_bucket.this.arn
}

output "state_table_name" {
  description = "The DynamoDB state table (pk/sk strings, TTL on expires_at)."
  value       = aws_dynamodb_table.state.name
}

output "state_table_arn" {
  description = "ARN of the state table."
  value       = aws_dynamodb_table.state.arn
}

output "kms_key_arn" {
  description = "The KMS key encrypting the bucket, state table, log groups and function environments."
  value       = local.kms_key_arn
}

output "alarm_topic_arn" {
  description = "The SNS topic the streams' alarms notify (created, or alarm_topic_arn)."
  value       = local.alarm_topic_arn
}

output "glue_database_name" {
  description = "The Glue database created for the streams' catalog tables (glue_database_name), or null."
  value       = try(aws_glue_catalog_database.this[0].name, null)
}

output "for_tables" {
  description = "Everything a sluice_table needs from the stack, as one object (pass it as `stack`)."
  value = {
    bucket_name      = aws_s3_bucket.this.id
    bucket_arn       = aws_s3_bucket.this.arn
    state_table_name = aws_dynamodb_table.state.name
    state_table_arn  = aws_dynamodb_table.state.arn
    kms_key_arn      = local.kms_key_arn
    alarm_topic_arn  = local.alarm_topic_arn
  }
  # The bucket must not be usable before its policy and encryption exist.
  depends_on = [
    aws_s3_bucket_policy.this,
    aws_s3_bucket_server_side_encryption_configuration.this,
    aws_s3_bucket_public_access_block.this,
  ]
}
