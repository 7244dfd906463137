# Two captured streams sharing one stack: a PostgreSQL table set with a Step Functions
# baseline, and a MySQL table capturing changes from now on. Both drain every 5 minutes.
#
# Keep the config inputs of the sluice_table blocks literal (or var.*): tests/cli/terraform.rs
# reads them from this file, renders each SLUICE_CONFIG with the sluice_config module and
# checks it with `sluice validate --config-json` and against expected_config.json.

module "stack" {
  source      = "../../modules/sluice_stack"
  name        = "sluice"
  bucket_name = var.bucket_name
}

module "orders" {
  source       = "../../modules/sluice_table"
  stack        = module.stack.for_tables
  package_path = var.package_path

  job        = "shop-orders"
  engine     = "postgres"
  secret_arn = var.postgres_secret_arn
  tables     = ["public.orders", "public.order_lines"]
  postgres = {
    slot        = "sluice_shop_orders"
    publication = "sluice_shop_orders"
  }

  # A first run anchors the slot and hands the tables' baseline to a state machine
  # (4 chunks at a time on the worker function); drains run on top meanwhile.
  initial                = "snapshot"
  baseline               = { chunk_rows = 250000, parallel = 4 }
  baseline_state_machine = true

  schedule_expression = "rate(5 minutes)"
  memory_size         = 1024
  timeout             = 900
  alarm_actions       = var.alarm_actions
}

module "customers" {
  source       = "../../modules/sluice_table"
  stack        = module.stack.for_tables
  package_path = var.package_path

  job        = "shop-customers"
  engine     = "mysql"
  secret_arn = var.mysql_secret_arn
  tables     = ["shop.customers"]
  mysql      = { server_id = 4242001 }
  output     = { rollover_rows = 500000 }

  schedule_expression = "rate(5 minutes)"
  memory_size         = 512
  timeout             = 600
  alarm_actions       = var.alarm_actions
}
