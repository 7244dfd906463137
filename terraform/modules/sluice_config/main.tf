# Renders the SLUICE_CONFIG document of one stream from typed inputs. The keys mirror
# src/config.rs, which rejects unknown keys: a key this module writes and the binary
# does not know fails `sluice validate --config-json` in tests/cli/terraform.rs.
# Null values are dropped, so an unset input keeps the binary's default.

locals {
  pg_keys         = ["slot", "publication", "create", "page_changes", "page_wal_bytes"]
  mysql_keys      = ["server_id", "transaction_memory_bytes", "max_transaction_bytes"]
  output_keys     = ["rollover_rows", "rollover_bytes", "row_group_rows", "zstd_level", "memory_budget_bytes", "current_state", "current_state_bucket_rows", "history_retention"]
  compaction_keys = ["target_bytes", "min_age_seconds", "lease_ttl_seconds", "drop_superseded"]
  baseline_key    = ["chunk_rows", "parallel", "inline_plan_max_bytes", "keys"]

  # A for-expression builds a map, whose values Terraform unifies to one type (a bool
  # next to a string becomes "false"), so keys of different types are filtered in
  # separate maps and merged into an object.
  postgres = var.postgres == null ? null : merge(
    { for k in ["slot", "publication"] : k => lookup(var.postgres, k, null) if lookup(var.postgres, k, null) != null },
    { for k in ["create"] : k => lookup(var.postgres, k, null) if lookup(var.postgres, k, null) != null },
    { for k in ["page_changes", "page_wal_bytes"] : k => lookup(var.postgres, k, null) if lookup(var.postgres, k, null) != null },
  )
  # All numbers.
  mysql = var.mysql == null ? {} : {
    for k in local.mysql_keys : k => lookup(var.mysql, k, null) if lookup(var.mysql, k, null) != null
  }

  engine_block = merge(
    var.engine == "postgres" ? { postgres = local.postgres } : {},
    var.engine == "mysql" ? { mysql = local.mysql } : {},
  )

  # Inputs the document would silently drop are errors instead (file() of a message
  # that is not a file is the pre-1.2 way to fail a plan with a readable reason).
  unknown_keys = concat(
    [for k in keys(var.postgres == null ? {} : var.postgres) : "postgres.${k}" if !contains(local.pg_keys, k)],
    [for k in keys(var.mysql == null ? {} : var.mysql) : "mysql.${k}" if !contains(local.mysql_keys, k)],
    [for k in keys(var.output) : "output.${k}" if !contains(concat(local.output_keys, ["layout"]), k)],
    [for k in keys(var.catalog == null ? {} : var.catalog) : "catalog.${k}" if !contains(["database", "table_prefix"], k)],
    [for k in keys(var.iceberg == null ? {} : var.iceberg) : "iceberg.${k}" if !contains(["catalog", "namespace", "table_prefix", "catalog_id", "table_bucket_arn"], k)],
    [for k in keys(var.baseline) : "baseline.${k}" if !contains(local.baseline_key, k)],
    [for k in keys(local.compaction_input) : "compaction.${k}" if !contains(local.compaction_keys, k)],
    var.engine == "postgres" && local.postgres == null ? ["postgres (required when engine = postgres)"] : [],
    var.engine == "mysql" && var.postgres != null ? ["postgres (set for engine = mysql)"] : [],
    var.engine == "postgres" && var.mysql != null ? ["mysql (set for engine = postgres)"] : [],
  )
  checked = length(local.unknown_keys) == 0 ? true : file("sluice_config: unknown or misplaced inputs: ${join(", ", local.unknown_keys)}")

  lease_ttl = var.lease_ttl_seconds == null ? var.timeout + 60 : var.lease_ttl_seconds

  # `compaction: { … }` only with a setting that differs from the binary's defaults.
  # (Through JSON: a conditional's branches must have one type, and {} is not the type of
  # an object with attributes.)
  compaction_input    = jsondecode(var.compaction_settings == null ? "{}" : jsonencode(var.compaction_settings))
  compaction_settings = { for k in local.compaction_keys : k => lookup(local.compaction_input, k, null) if lookup(local.compaction_input, k, null) != null }
  compaction_block    = length(local.compaction_settings) == 0 ? {} : { compaction = local.compaction_settings }

  # `catalog: { type: glue, database, table_prefix }` only when a catalog is asked for.
  catalog_block = var.catalog == null ? {} : {
    catalog = merge(
      { type = "glue", database = var.catalog.database },
      lookup(var.catalog, "table_prefix", null) == null ? {} : { table_prefix = var.catalog.table_prefix },
    )
  }

  # `policy: { hash_key: { secret_arn }, hash_output, column_lists, tables }` only when column policies
  # or row filters are asked for; the hash key itself is never in the document.
  policy_block = var.policy == null ? {} : {
    policy = merge(
      lookup(var.policy, "hash_key_secret_arn", null) == null ? {} : { hash_key = { secret_arn = var.policy.hash_key_secret_arn } },
      lookup(var.policy, "hash_output", null) == null ? {} : { hash_output = var.policy.hash_output },
      lookup(var.policy, "column_lists", null) == null ? {} : { column_lists = var.policy.column_lists },
      { tables = lookup(var.policy, "tables", {}) },
    )
  }

  # `table_format: iceberg` and `iceberg: { catalog: { type: glue, catalog_id } or { type:
  # s3tables, table_bucket_arn }, namespace, table_prefix }` only when Iceberg tables are
  # asked for.
  iceberg_block = var.iceberg == null ? {} : {
    iceberg = merge(
      {
        catalog = merge(
          { type = var.iceberg.catalog },
          lookup(var.iceberg, "catalog_id", null) == null ? {} : { catalog_id = var.iceberg.catalog_id },
          lookup(var.iceberg, "table_bucket_arn", null) == null ? {} : { table_bucket_arn = var.iceberg.table_bucket_arn },
        )
      },
      lookup(var.iceberg, "namespace", null) == null ? {} : { namespace = var.iceberg.namespace },
      lookup(var.iceberg, "table_prefix", null) == null ? {} : { table_prefix = var.iceberg.table_prefix },
    )
  }
  table_format_block = var.iceberg == null ? {} : { table_format = "iceberg" }

  document = merge({
    job = var.job
    source = merge(
      {
        url_secret_arn = var.secret_arn
        tables         = var.tables
      },
      local.engine_block,
    )
    # Objects are written under the stack's KMS key, the same key as the bucket default,
    # so the request never weakens the bucket's encryption.
    destination = {
      type       = "s3"
      bucket     = var.stack.bucket_name
      prefix     = var.prefix == null ? var.job : var.prefix
      encryption = { mode = "sse-kms", kms_key_id = var.stack.kms_key_arn }
    }
    state = {
      type  = "dynamodb"
      table = var.stack.state_table_name
    }
    output = merge(
      { for k in local.output_keys : k => lookup(var.output, k, null) if lookup(var.output, k, null) != null },
      { for k in ["layout"] : k => lookup(var.output, k, null) if lookup(var.output, k, null) != null },
      { spill_dir = "/tmp" },
    )
    lease    = { ttl_seconds = local.lease_ttl }
    deadline = { for k, v in { safety_margin_seconds = var.safety_margin_seconds } : k => v if v != null }
    initial  = var.initial
    baseline = merge(
      { for k in local.baseline_key : k => lookup(var.baseline, k, null) if lookup(var.baseline, k, null) != null },
      var.baseline_state_machine_arn == null ? {} : { state_machine_arn = var.baseline_state_machine_arn },
    )
  }, local.catalog_block, local.table_format_block, local.iceberg_block, local.policy_block, local.compaction_block)
}
