variable "job" {
  description = "Stream identity; keys the state (the DynamoDB partition key) and names the metrics dimension."
  type        = string
  validation {
    condition     = can(regex("^[A-Za-z0-9_.-]{1,128}$", var.job))
    error_message = "The job must be 1-128 letters, digits, '_', '-' or '.'."
  }
}

variable "stack" {
  description = "The shared stack's names (the sluice_stack module's `for_tables` output; extra attributes are ignored)."
  type = object({
    bucket_name      = string
    state_table_name = string
    kms_key_arn      = string
  })
}

variable "prefix" {
  description = "S3 key prefix of this stream's objects (`<prefix>/<table>/...`); null means the job name."
  type        = string
  default     = null
  validation {
    condition     = var.prefix == null || can(regex("^[A-Za-z0-9!_.*'()=-]+(/[A-Za-z0-9!_.*'()=-]+)*$", var.prefix))
    error_message = "The prefix must be non-empty `a/b` segments without a leading or trailing '/', '//' or spaces."
  }
}

variable "engine" {
  description = "Source engine: `postgres` or `mysql` (MySQL 8 / MariaDB)."
  type        = string
  validation {
    condition     = contains(["postgres", "mysql"], var.engine)
    error_message = "The engine must be `postgres` or `mysql`."
  }
}

variable "secret_arn" {
  description = "Secrets Manager secret holding the source URL, or a JSON object with host, port, username, password, dbname."
  type        = string
  validation {
    condition     = can(regex("^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:[0-9]{12}:secret:.+$", var.secret_arn))
    error_message = "The secret_arn must be a full Secrets Manager secret ARN (including its random suffix)."
  }
}

variable "tables" {
  description = "Captured tables, `schema.table` (PostgreSQL: a bare name means `public`; MySQL: `database.table`)."
  type        = list(string)
  validation {
    condition     = length(var.tables) > 0 && length(distinct(var.tables)) == length(var.tables)
    error_message = "List at least one table, each once."
  }
}

variable "postgres" {
  description = "PostgreSQL stream resources: { slot, publication, create (default true), page_changes, page_wal_bytes }. Required when engine = postgres."
  type        = any
  default     = null
}

variable "mysql" {
  description = "MySQL / MariaDB stream settings: { server_id, transaction_memory_bytes, max_transaction_bytes }, all optional."
  type        = any
  default     = null
}

variable "output" {
  description = "Part layout and memory, and what the lake keeps: { rollover_rows, rollover_bytes, row_group_rows, zstd_level, memory_budget_bytes, layout, current_state, current_state_bucket_rows, history_retention }; unset keys keep the binary's defaults (memory_budget_bytes: half the function's memory; layout: flat; every change kept). Parts are spilled to /tmp."
  type        = any
  default     = {}
}

variable "compaction_settings" {
  description = "Compaction settings (docs/compaction.md): { target_bytes, min_age_seconds, lease_ttl_seconds, drop_superseded }; unset keys keep the binary's defaults."
  type        = any
  default     = {}
}

variable "timeout" {
  description = "The function timeout in seconds; the lease outlives it by default."
  type        = number
}

variable "lease_ttl_seconds" {
  description = "Lease lifetime; null means timeout + 60, so a crashed invocation's lease expires soon after the invocation itself could have run."
  type        = number
  default     = null
}

variable "safety_margin_seconds" {
  description = "Time kept in reserve before the invocation deadline for the final flush, checkpoint and ack; null keeps the binary's default (20)."
  type        = number
  default     = null
}

variable "initial" {
  description = "What a new stream starts from: `none` (changes from now on) or `snapshot` (a baseline of the tables first)."
  type        = string
  default     = "none"
  validation {
    condition     = contains(["none", "snapshot"], var.initial)
    error_message = "The initial must be `none` or `snapshot`."
  }
}

variable "baseline" {
  description = "Baseline chunking: { chunk_rows, parallel, inline_plan_max_bytes, keys = { table = [NOT NULL columns] } for tables without a primary key }; unset keys keep the binary's defaults."
  type        = any
  default     = {}
}

variable "baseline_state_machine_arn" {
  description = "Step Functions state machine that runs this stream's baseline chunks; null reads baselines inline."
  type        = string
  default     = null
}

variable "catalog" {
  description = "Glue catalog registration: { database, table_prefix (optional) }; null registers nothing."
  type        = any
  default     = null
}

variable "iceberg" {
  description = "Iceberg change-log tables in the Glue Data Catalog or an S3 Tables table bucket: { catalog = \"glue\" or \"s3tables\", namespace, table_prefix, catalog_id (glue), table_bucket_arn (s3tables) } (each optional but catalog, and table_bucket_arn for s3tables) renders table_format = iceberg and the iceberg block; null commits nothing."
  type        = any
  default     = null
}

variable "policy" {
  description = "Column policies and row filters (docs/privacy.md): { hash_key_secret_arn (the Secrets Manager secret whose string is the hash key), hash_output (hex or binary), column_lists (PostgreSQL: leave excluded columns out of the publication; PostgreSQL then refuses to drop or retype listed columns), tables = { table = { exclude, include, hash, mask, null, filter } } } (each optional) renders the policy block; null captures every column and row."
  type        = any
  default     = null
}
