# ------------------------------------------------------------------ the stream
# These inputs are forwarded unchanged to the sluice_config module, which renders
# SLUICE_CONFIG (same names; tests/cli/terraform.rs checks the forwarding).

variable "job" {
  description = "Stream identity: keys the state (the DynamoDB partition key, which the function's IAM policy is restricted to), names the metrics dimension and every AWS resource of the stream (`sluice-<job>...`, see sluice_names), hence 1-48 letters, digits, '_' or '-'."
  type        = string
  validation {
    condition     = can(regex("^[A-Za-z0-9_-]{1,48}$", var.job))
    error_message = "The job of a deployed stream must be 1-48 letters, digits, '_' or '-': it names the Lambda functions and IAM roles (`sluice-<job>-baseline`, at most 64 characters, no '.')."
  }
}

variable "stack" {
  description = "The sluice_stack module's `for_tables` output."
  type = object({
    bucket_name      = string
    bucket_arn       = string
    state_table_name = string
    state_table_arn  = string
    kms_key_arn      = string
    alarm_topic_arn  = optional(string)
  })
}

variable "prefix" {
  description = "S3 key prefix of this stream (`<prefix>/<table>/...`); null means the job name. The function may read and write only below it."
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
  description = "Secrets Manager secret holding the source URL, or a JSON object with host, port, username, password, dbname. The function may read this one secret."
  type        = string
  validation {
    condition     = can(regex("^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:[0-9]{12}:secret:.+$", var.secret_arn))
    error_message = "The secret_arn must be a full Secrets Manager secret ARN (including its random suffix)."
  }
}

variable "secret_kms_key_arn" {
  description = "Customer managed KMS key of the secret, if it is not encrypted with the AWS managed key; the function may decrypt with it through Secrets Manager only."
  type        = string
  default     = null
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
  description = "PostgreSQL stream resources (required when engine = postgres): the slot and publication owned by this stream, whether to create them when missing, changes and WAL bytes per page."
  type = object({
    slot           = string
    publication    = string
    create         = optional(bool)
    page_changes   = optional(number)
    page_wal_bytes = optional(number)
  })
  default = null
}

variable "mysql" {
  description = "MySQL / MariaDB settings (engine = mysql): replica server id (unique among the server's replicas; default derived from the job), transaction memory and size limits."
  type = object({
    server_id                = optional(number)
    transaction_memory_bytes = optional(number)
    max_transaction_bytes    = optional(number)
  })
  default = null
}

variable "output" {
  description = "Part layout: rollover, row groups, compression and the folders of change parts (`layout`: `flat`, `dated` or `dated-hourly`); `current_state` (a current-state table built after every run, docs/current-state.md) and `current_state_bucket_rows`; `history_retention` (`30d`, `12h`, ...: each compaction folds older changes into a new baseline, docs/compaction.md). Unset keys keep the binary's defaults. Parts under construction spill to /tmp (see ephemeral_storage_mb)."
  type = object({
    rollover_rows             = optional(number)
    rollover_bytes            = optional(number)
    row_group_rows            = optional(number)
    zstd_level                = optional(number)
    layout                    = optional(string)
    current_state             = optional(bool)
    current_state_bucket_rows = optional(number)
    history_retention         = optional(string)
  })
  default  = {}
  nullable = false
  validation {
    condition     = var.output.layout == null || contains(["flat", "dated", "dated-hourly"], coalesce(var.output.layout, "flat"))
    error_message = "The output.layout must be `flat`, `dated` or `dated-hourly`."
  }
  validation {
    condition     = var.output.history_retention == null || can(regex("^[0-9]+[smhd]$", coalesce(var.output.history_retention, "0s")))
    error_message = "The output.history_retention must be a whole number and a unit: `30d`, `12h`, `90m` or `45s`."
  }
}

variable "catalog" {
  description = "Register the stream's tables in the Glue Data Catalog at the end of each run whose table shape changed: { database, table_prefix (optional) }. The drain function's role may then read the database and create and update its tables (glue:GetDatabase, CreateDatabase, GetTable, CreateTable, UpdateTable). null registers nothing."
  type = object({
    database     = string
    table_prefix = optional(string)
  })
  default = null
}

variable "iceberg" {
  description = "Commit each run's parts to an Iceberg change-log table per captured table (table_format = iceberg): { catalog = \"glue\" or \"s3tables\", namespace (optional; default sluice), table_prefix (optional), catalog_id (glue, optional: the catalog's account), table_bucket_arn (s3tables, required) }. With glue both functions' roles may read the namespace's database (and create it when missing) and read, create and update its tables (glue:GetDatabase, CreateDatabase, GetTable, CreateTable, UpdateTable); with s3tables they may use the table bucket's namespaces and tables (s3tables:GetTableBucket, GetNamespace, CreateNamespace, CreateTable, GetTableMetadataLocation, UpdateTableMetadataLocation, GetTableData, PutTableData) — that bucket only. null commits nothing."
  type = object({
    catalog          = string
    namespace        = optional(string)
    table_prefix     = optional(string)
    catalog_id       = optional(string)
    table_bucket_arn = optional(string)
  })
  default = null
  validation {
    condition     = var.iceberg == null || try(contains(["glue", "s3tables"], var.iceberg.catalog), false)
    error_message = "The iceberg.catalog must be `glue` or `s3tables` (the SQL catalog on SQLite is for local runs)."
  }
  validation {
    condition     = var.iceberg == null || try((var.iceberg.catalog == "s3tables") == (var.iceberg.table_bucket_arn != null), false)
    error_message = "iceberg.table_bucket_arn is required with catalog = \"s3tables\" and only then (arn:aws:s3tables:<region>:<account>:bucket/<name>)."
  }
}

variable "policy" {
  description = "Column policies and row filters (docs/privacy.md): { hash_key_secret_arn (optional: the Secrets Manager secret whose string is the hash key; both functions' roles may read it, secretsmanager:GetSecretValue — that secret only), hash_output (optional: hex or binary), column_lists (optional, PostgreSQL: leave excluded columns out of the publication — PostgreSQL then refuses to drop or retype the listed columns), tables = { table = { exclude, include, hash, mask, null, filter } } }. null captures every column and row."
  type = object({
    hash_key_secret_arn = optional(string)
    hash_output         = optional(string)
    column_lists        = optional(bool)
    tables              = any
  })
  default = null
}

variable "lease_ttl_seconds" {
  description = "Lease lifetime; null means timeout + 60. Must be at least the function timeout."
  type        = number
  default     = null
}

variable "safety_margin_seconds" {
  description = "Time kept before the invocation deadline for the final flush, checkpoint and ack; null keeps the binary's default (20 s)."
  type        = number
  default     = null
}

variable "initial" {
  description = "What a new stream starts from: `none` (changes from now on) or `snapshot` (a baseline of the tables first)."
  type        = string
  default     = "none"
  nullable    = false
  validation {
    condition     = contains(["none", "snapshot"], var.initial)
    error_message = "The initial must be `none` or `snapshot`."
  }
}

variable "baseline" {
  description = "Baseline chunking: rows per chunk, chunks read at once, and the largest chunk list (bytes of JSON) passed inline between states — a longer one goes to the state machine through `<prefix>/_baseline/` in S3; unset keys keep the binary's defaults."
  type = object({
    chunk_rows            = optional(number)
    parallel              = optional(number)
    inline_plan_max_bytes = optional(number)
  })
  default  = {}
  nullable = false
}

# ------------------------------------------------------------------ the function

variable "function_name" {
  description = "Lambda function name; null means `sluice-<job>`. The baseline worker is `<name>-baseline`."
  type        = string
  default     = null
  validation {
    condition     = var.function_name == null || can(regex("^[A-Za-z0-9_-]{1,55}$", var.function_name))
    error_message = "The function_name must be 1-55 letters, digits, '_' or '-' (room is left for the -baseline and -schedule suffixes within AWS's 64-character limit)."
  }
}

variable "package_path" {
  description = "Path to the Lambda zip built by `make lambda` (target/lambda/sluice/bootstrap.zip)."
  type        = string
}

variable "architecture" {
  description = "Instruction set of the package: `arm64` (default, `make lambda`) or `x86_64` (`make lambda ARCH=x86_64`)."
  type        = string
  default     = "arm64"
  nullable    = false
  validation {
    condition     = contains(["arm64", "x86_64"], var.architecture)
    error_message = "The architecture must be `arm64` or `x86_64`."
  }
}

variable "memory_size" {
  description = "Function memory in MB (also scales CPU). Memory use is bounded by output.rollover_* and row_group_rows, not by backlog."
  type        = number
  default     = 1024
  nullable    = false
  validation {
    condition     = var.memory_size >= 128 && var.memory_size <= 10240
    error_message = "The memory_size must be between 128 and 10240 MB."
  }
}

variable "timeout" {
  description = "Function timeout in seconds. A run stops at a transaction boundary safety_margin_seconds before it and reports `partial`; the next tick continues."
  type        = number
  default     = 900
  nullable    = false
  validation {
    condition     = var.timeout >= 30 && var.timeout <= 900
    error_message = "The timeout must be between 30 and 900 seconds."
  }
}

variable "ephemeral_storage_mb" {
  description = "Size of /tmp in MB: parts under construction and large transactions spill there. Keep it above output.rollover_bytes plus the largest transaction."
  type        = number
  default     = 2048
  nullable    = false
  validation {
    condition     = var.ephemeral_storage_mb >= 512 && var.ephemeral_storage_mb <= 10240
    error_message = "The ephemeral_storage_mb must be between 512 and 10240."
  }
}

variable "log_level" {
  description = "SLUICE_LOG filter (tracing EnvFilter syntax), e.g. `info` or `sluice=debug,info`."
  type        = string
  default     = "info"
  nullable    = false
}

variable "log_format" {
  description = "Lambda log format of both functions: `JSON` (structured system logs next to the binary's JSON lines) or `Text`."
  type        = string
  default     = "JSON"
  nullable    = false
  validation {
    condition     = contains(["JSON", "Text"], var.log_format)
    error_message = "The log_format must be `JSON` or `Text`."
  }
}

variable "log_retention_days" {
  description = "Retention of the function's (and the baseline machine's) log groups."
  type        = number
  default     = 365
  nullable    = false
  validation {
    condition     = contains([1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653], var.log_retention_days)
    error_message = "The log_retention_days must be a CloudWatch Logs retention value (1, 3, 5, 7, 14, 30, ..., 365, ..., 3653)."
  }
}

variable "vpc" {
  description = "Run the function in these subnets with these security groups (a source reachable only inside a VPC); null runs it outside a VPC. The subnets need a route to S3, DynamoDB and Secrets Manager (NAT or VPC endpoints)."
  type = object({
    subnet_ids         = list(string)
    security_group_ids = list(string)
  })
  default = null
  validation {
    condition     = var.vpc == null ? true : length(var.vpc.subnet_ids) > 0 && length(var.vpc.security_group_ids) > 0
    error_message = "A vpc needs at least one subnet and one security group."
  }
}

variable "iam_role_path" {
  description = "Path of the stream's IAM roles (landing zones often require one, e.g. `/workloads/`)."
  type        = string
  default     = "/"
  nullable    = false
  validation {
    condition     = can(regex("^/([A-Za-z0-9_+=,.@-]+/)*$", var.iam_role_path)) && length(var.iam_role_path) <= 512
    error_message = "The iam_role_path must start and end with '/' (e.g. `/workloads/`), at most 512 characters."
  }
}

variable "permissions_boundary_arn" {
  description = "IAM policy set as the permissions boundary of every role of the stream (required by many landing zones); null: none."
  type        = string
  default     = null
}

# ------------------------------------------------------------------ the schedule

variable "schedule_expression" {
  description = "EventBridge schedule of the drain: `rate(5 minutes)`, `cron(0/10 * * * ? *)`, ..."
  type        = string
  default     = "rate(5 minutes)"
  nullable    = false
  validation {
    condition     = can(regex("^(rate\\([1-9][0-9]* (minute|minutes|hour|hours|day|days)\\)|cron\\(.+\\))$", var.schedule_expression))
    error_message = "The schedule_expression must be `rate(N minutes|hours|days)` or `cron(...)`."
  }
}

variable "schedule_interval_seconds" {
  description = "The schedule's interval, for the missed-run alarm and for how long a queued tick stays useful; null derives it from a rate() expression (required with cron())."
  type        = number
  default     = null
}

variable "schedule_type" {
  description = "What starts the drain: `scheduler` (EventBridge Scheduler: time zone, retry policy, a dead-letter queue with an alarm) or `rule` (a classic EventBridge rule)."
  type        = string
  default     = "scheduler"
  nullable    = false
  validation {
    condition     = contains(["scheduler", "rule"], var.schedule_type)
    error_message = "The schedule_type must be `scheduler` or `rule`."
  }
}

variable "schedule_time_zone" {
  description = "Time zone of a cron() schedule (IANA name, e.g. `Europe/Paris`); schedule_type = scheduler only."
  type        = string
  default     = "UTC"
  nullable    = false
}

variable "schedule_retry_attempts" {
  description = "Times EventBridge Scheduler retries an invocation it could not deliver (within one interval); then the event goes to the dead-letter queue. schedule_type = scheduler only."
  type        = number
  default     = 2
  nullable    = false
  validation {
    condition     = var.schedule_retry_attempts >= 0 && var.schedule_retry_attempts <= 185
    error_message = "The schedule_retry_attempts must be between 0 and 185."
  }
}

variable "schedule_enabled" {
  description = "Whether the schedule fires (false pauses the stream; the slot / binlog keeps the changes meanwhile, so watch source retention)."
  type        = bool
  default     = true
  nullable    = false
}

variable "compaction" {
  description = "Compact the stream's tables (docs/compaction.md): a function of its own, invoked on compaction_schedule_expression with `{\"action\": \"compact\"}`, rewrites each table's small parts into few large ones beside the drains (its role may delete below the prefix and reaches no source), with the binary's compaction defaults (parts older than an hour, 128 MiB targets), its alarms and dashboard rows. false: none of this."
  type        = bool
  default     = true
  nullable    = false
}

variable "compaction_settings" {
  description = "The compaction's settings (docs/compaction.md): { target_bytes, min_age_seconds, lease_ttl_seconds, drop_superseded }; unset keys keep the binary's defaults (128 MiB targets, parts older than an hour, a 900 s lease, superseded parts dropped)."
  type = object({
    target_bytes      = optional(number)
    min_age_seconds   = optional(number)
    lease_ttl_seconds = optional(number)
    drop_superseded   = optional(bool)
  })
  default  = {}
  nullable = false
}

variable "compaction_parallel" {
  description = "Fan the compaction out over the stream's tables: the schedule starts a Step Functions machine (infra/stepfunctions/compact.asl.json) that compacts up to this many tables at once, each in as many invocations of the compaction function as it needs (one that stops at its deadline is followed by the next), a table that fails leaving the others going (the execution fails at the end). Its role may only invoke the compaction function. Needs schedule_type = \"scheduler\". null: the schedule invokes the function once for every table, one after the other."
  type        = number
  default     = null
  validation {
    condition     = var.compaction_parallel == null || try(var.compaction_parallel >= 1 && var.compaction_parallel <= 40 && floor(var.compaction_parallel) == var.compaction_parallel, false)
    error_message = "The compaction_parallel must be a whole number from 1 to 40 (an inline Map's concurrency), or null."
  }
}

variable "compaction_schedule_expression" {
  description = "Schedule of the compaction: `rate(1 day)`, `cron(0 3 * * ? *)`, ... (the drain's schedule_type, time zone and dead-letter queue)."
  type        = string
  default     = "rate(1 day)"
  nullable    = false
  validation {
    condition     = can(regex("^(rate\\([1-9][0-9]* (minute|minutes|hour|hours|day|days)\\)|cron\\(.+\\))$", var.compaction_schedule_expression))
    error_message = "The compaction_schedule_expression must be `rate(N minutes|hours|days)` or `cron(...)`."
  }
}

variable "verify" {
  description = "Verify the stream's tables on verify_schedule_expression (docs/verify.md): the drain function is invoked with `{\"action\": \"verify\"}`, compares every table in the lake with the source (reading it, and draining), and emits verify_mismatched_rows, which the verify-differs alarm watches. It needs the source user's grant for pinned reads on PostgreSQL (UPDATE on each table). false: no schedule, no alarm."
  type        = bool
  default     = true
  nullable    = false
}

variable "verify_schedule_expression" {
  description = "Schedule of the verify: `rate(7 days)`, `cron(0 4 ? * SUN *)`, ... (the drain's schedule_type, time zone and dead-letter queue)."
  type        = string
  default     = "rate(7 days)"
  nullable    = false
  validation {
    condition     = can(regex("^(rate\\([1-9][0-9]* (minute|minutes|hour|hours|day|days)\\)|cron\\(.+\\))$", var.verify_schedule_expression))
    error_message = "The verify_schedule_expression must be `rate(N minutes|hours|days)` or `cron(...)`."
  }
}

variable "verify_parallel" {
  description = "Walk the verify by chunks on Step Functions (infra/stepfunctions/verify.asl.json, docs/verify.md \"Walked by Step Functions\"): the verify schedule starts a machine that runs up to this many chunk tasks at once on the baseline worker function, each comparing one key range of a table with the lake's share of it, then re-checks and reports in one finish task — for tables too big for one invocation. Needs baseline_state_machine = true (the worker), schedule_type = \"scheduler\", and at most the worker's reserved concurrency. null: the schedule invokes the drain function, which verifies each table in one invocation."
  type        = number
  default     = null
  validation {
    condition     = var.verify_parallel == null || try(var.verify_parallel >= 1 && var.verify_parallel <= 40 && floor(var.verify_parallel) == var.verify_parallel, false)
    error_message = "The verify_parallel must be a whole number from 1 to 40 (an inline Map's concurrency), or null."
  }
}

# ------------------------------------------------------------------ the baseline machine

variable "baseline_state_machine" {
  description = "Create a Step Functions state machine (and a baseline worker function) for this stream's baselines; the drain function then starts it instead of reading the baseline inline."
  type        = bool
  default     = false
  nullable    = false
}

variable "current_state_merge" {
  description = "Keep a current-state Iceberg table per captured table with an Athena MERGE after every drain that wrote rows (docs/iceberg.md): the schedule then starts a state machine (drain, then one Athena `startQueryExecution.sync` per table). `statements` maps each table to the text `sluice sql --merge --dialect athena --table <t>` prints (render it at deploy time, again after a schema change; create each target once with `--merge --create`); `database` is the Glue database of the change logs and targets; results go to `output_location` (null: the workgroup's). Needs schedule_type = \"scheduler\". null: no MERGE, the schedule invokes the drain function."
  type = object({
    statements      = map(string)
    database        = string
    workgroup       = optional(string, "primary")
    output_location = optional(string)
  })
  default = null
}

variable "baseline_definition_path" {
  description = "The state machine definition (a templatefile with `function_arn`); default: infra/stepfunctions/baseline.asl.json of this repository."
  type        = string
  default     = null
}

variable "baseline_worker_concurrency" {
  description = "Reserved concurrency of the baseline worker (the Map's chunk invocations); null means baseline.parallel (at least 1). Bounds the load on the source."
  type        = number
  default     = null
}

# ------------------------------------------------------------------ alarms

variable "alarm_actions" {
  description = "ARNs notified when an alarm fires, besides the stack's alarm topic (`stack.alarm_topic_arn`). Every alarm needs at least one action: the plan fails when both are empty."
  type        = list(string)
  default     = []
  nullable    = false
}

variable "ok_actions" {
  description = "ARNs notified when an alarm clears; null means the alarm actions."
  type        = list(string)
  default     = null
}

variable "lag_alarm_threshold_seconds" {
  description = "Alarm when the replication lag (EMF `lag_seconds`, Maximum) exceeds this."
  type        = number
  default     = 1800
  nullable    = false
}

variable "retained_bytes_alarm_threshold" {
  description = "Alarm when the source retains more than this many bytes of log for the stream (EMF `source_retained_bytes`, Maximum; PostgreSQL: WAL held by the slot) — the classic CDC outage, a stalled slot filling the source's disk. Default 10 GiB."
  type        = number
  default     = 10737418240
  nullable    = false
  validation {
    condition     = var.retained_bytes_alarm_threshold > 0
    error_message = "The retained_bytes_alarm_threshold must be positive."
  }
}

variable "rds_db_instance_identifier" {
  description = "RDS PostgreSQL instance of the source, for an alarm on RDS's own `OldestReplicationSlotLag` (also fires when no run reports, e.g. the function cannot reach the source); null: no such alarm."
  type        = string
  default     = null
}

variable "duration_alarm_ratio" {
  description = "Alarm when the drain's longest run exceeds this fraction of the timeout for `missed_runs_alarm_intervals` intervals in a row (the stream is not keeping up, or a run is near being killed)."
  type        = number
  default     = 0.8
  nullable    = false
  validation {
    condition     = var.duration_alarm_ratio > 0 && var.duration_alarm_ratio <= 1
    error_message = "The duration_alarm_ratio must be in (0, 1]."
  }
}

variable "missed_runs_alarm_intervals" {
  description = "Alarm when no run drained to the end (EMF `run_drained`) in this many schedule intervals; missing data counts as missed."
  type        = number
  default     = 3
  nullable    = false
  validation {
    condition     = var.missed_runs_alarm_intervals >= 1
    error_message = "The missed_runs_alarm_intervals must be at least 1."
  }
}

variable "tags" {
  description = "Tags for every resource."
  type        = map(string)
  default     = {}
  nullable    = false
}
