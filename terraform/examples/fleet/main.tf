# Twenty streams on one stack through sluice_fleet: fourteen PostgreSQL tables (each its
# own slot; the orders table with a Step Functions baseline) and six MySQL tables, every
# 5 minutes, all alarms to the stack's alarm topic (subscribe var.alarm_emails).
#
# Keep the inputs literal (or var.*): tests/cli/terraform.rs renders every stream's
# SLUICE_CONFIG from this file and tables.tf.

module "stack" {
  source       = "../../modules/sluice_stack"
  name         = "sluice"
  bucket_name  = var.bucket_name
  alarm_emails = var.alarm_emails
}

module "fleet" {
  source       = "../../modules/sluice_fleet"
  stack        = module.stack.for_tables
  package_path = var.package_path
  tables       = local.tables

  defaults = {
    engine              = "postgres"
    secret_arn          = var.postgres_secret_arn
    schedule_expression = "rate(5 minutes)"
    memory_size         = 1024
    timeout             = 900
    alarm_actions       = var.alarm_actions
  }

  tags = { team = "data-platform" }
}
