# One captured stream: the drain function (reserved concurrency 1), its schedule, its
# log group, its least-privilege role, its alarms and, optionally, its baseline state
# machine with a baseline worker function. IAM is in iam.tf, alarms in alarms.tf.

data "aws_caller_identity" "current" {}
data "aws_partition" "current" {}
data "aws_region" "current" {}

locals {
  # Every resource name comes from the sluice_names module (legal by construction).
  names      = module.names.names
  name       = local.names.function
  account_id = data.aws_caller_identity.current.account_id
  partition  = data.aws_partition.current.partition
  region     = data.aws_region.current.name
  prefix     = var.prefix == null ? var.job : var.prefix

  # The machine's ARN is built from its name, so the drain function's config and policy
  # can name it without depending on the machine (which depends on the worker function).
  machine_name = local.names.state_machine
  machine_arn  = var.baseline_state_machine ? "arn:${local.partition}:states:${local.region}:${local.account_id}:stateMachine:${local.machine_name}" : null

  rate      = try(regex("^rate\\(([0-9]+) (minute|minutes|hour|hours|day|days)\\)$", var.schedule_expression), null)
  unit_secs = { minute = 60, hour = 3600, day = 86400 }
  interval = var.schedule_interval_seconds != null ? var.schedule_interval_seconds : (
    local.rate == null ? null : tonumber(local.rate[0]) * local.unit_secs[trimsuffix(local.rate[1], "s")]
  )

  environment = {
    SLUICE_CONFIG = module.config.json
    SLUICE_LOG    = var.log_level
  }

  worker_concurrency = var.baseline_worker_concurrency != null ? var.baseline_worker_concurrency : max(1, coalesce(var.baseline.parallel, 1))
}

module "names" {
  source = "../sluice_names"

  job           = var.job
  function_name = var.function_name
}

module "config" {
  source = "../sluice_config"

  job                        = var.job
  stack                      = var.stack
  prefix                     = var.prefix
  engine                     = var.engine
  secret_arn                 = var.secret_arn
  tables                     = var.tables
  postgres                   = var.postgres
  mysql                      = var.mysql
  output                     = var.output
  compaction_settings        = var.compaction_settings
  timeout                    = var.timeout
  lease_ttl_seconds          = var.lease_ttl_seconds
  safety_margin_seconds      = var.safety_margin_seconds
  initial                    = var.initial
  baseline                   = var.baseline
  baseline_state_machine_arn = local.machine_arn
  catalog                    = var.catalog
  iceberg                    = var.iceberg
  policy                     = var.policy
}

# ---------------------------------------------------------------- logs

resource "aws_cloudwatch_log_group" "drain" {
  name              = local.names.drain_log_group
  retention_in_days = var.log_retention_days
  kms_key_id        = var.stack.kms_key_arn
  tags              = var.tags
}

resource "aws_cloudwatch_log_group" "worker" {
  count             = var.baseline_state_machine ? 1 : 0
  name              = local.names.worker_log_group
  retention_in_days = var.log_retention_days
  kms_key_id        = var.stack.kms_key_arn
  tags              = var.tags
}

# ---------------------------------------------------------------- the drain function

resource "aws_lambda_function" "drain" {
  #checkov:skip=CKV_AWS_116:retries are off by design (the next tick is the retry; the lease makes duplicates harmless); failures raise the errors alarm
  #checkov:skip=CKV_AWS_117:a VPC is optional (var.vpc); a source reachable over TLS on a public endpoint needs none
  #checkov:skip=CKV_AWS_272:code signing needs a signing profile the deployer owns; the package hash is pinned by source_code_hash
  #checkov:skip=CKV_AWS_50:the binary emits no X-Ray segments; per-run telemetry is the EMF metrics and JSON logs
  function_name    = local.names.function
  description      = "sluice CDC drain of ${var.job} (${var.engine}: ${join(", ", var.tables)})"
  role             = aws_iam_role.drain.arn
  filename         = var.package_path
  source_code_hash = filebase64sha256(var.package_path)
  handler          = "bootstrap"
  runtime          = "provided.al2023"
  architectures    = [var.architecture]
  memory_size      = var.memory_size
  timeout          = var.timeout
  kms_key_arn      = var.stack.kms_key_arn

  # One writer per stream: the DynamoDB lease is the mechanism, this is belt and braces.
  reserved_concurrent_executions = 1

  ephemeral_storage {
    size = var.ephemeral_storage_mb
  }

  environment {
    variables = local.environment
  }

  logging_config {
    log_format = var.log_format
    log_group  = aws_cloudwatch_log_group.drain.name
  }

  dynamic "vpc_config" {
    for_each = var.vpc == null ? [] : [var.vpc]
    content {
      subnet_ids         = vpc_config.value.subnet_ids
      security_group_ids = vpc_config.value.security_group_ids
    }
  }

  tags = var.tags

  lifecycle {
    precondition {
      condition     = module.config.lease_ttl_seconds >= var.timeout
      error_message = "lease_ttl_seconds must be at least the function timeout, or a slow invocation could outlive its lease."
    }
    precondition {
      condition     = local.interval != null
      error_message = "Set schedule_interval_seconds when schedule_expression is a cron() expression."
    }
    precondition {
      condition     = (var.engine == "postgres") == (var.postgres != null)
      error_message = "Set postgres { slot, publication } exactly when engine = postgres."
    }
  }

  depends_on = [
    aws_cloudwatch_log_group.drain,
    aws_iam_role_policy.drain,
  ]
}

# Asynchronous invocations (the schedule's) are not retried: the next tick retries, and
# a tick older than one interval is dropped rather than queued behind a long run.
resource "aws_lambda_function_event_invoke_config" "drain" {
  function_name                = aws_lambda_function.drain.function_name
  maximum_retry_attempts       = 0
  maximum_event_age_in_seconds = max(60, min(local.interval == null ? 3600 : local.interval, 21600))
}

# ---------------------------------------------------------------- the schedule

# EventBridge Scheduler (default): retries an undeliverable tick within one interval,
# then parks it in a dead-letter queue (alarmed in alarms.tf).
resource "aws_sqs_queue" "schedule_dlq" {
  count                             = var.schedule_type == "scheduler" ? 1 : 0
  name                              = local.names.dead_letter_queue
  message_retention_seconds         = 1209600
  kms_master_key_id                 = var.stack.kms_key_arn
  kms_data_key_reuse_period_seconds = 3600
  tags                              = var.tags
}

resource "aws_scheduler_schedule" "drain" {
  count                        = var.schedule_type == "scheduler" ? 1 : 0
  name                         = local.names.schedule
  description                  = "sluice drain of ${var.job}"
  schedule_expression          = var.schedule_expression
  schedule_expression_timezone = var.schedule_time_zone
  # The target input is stored encrypted under the stack key.
  kms_key_arn = var.stack.kms_key_arn
  state       = var.schedule_enabled ? "ENABLED" : "DISABLED"

  flexible_time_window {
    mode = "OFF"
  }

  target {
    # With current_state_merge the tick starts the drain-then-MERGE machine (merge.tf).
    arn      = local.merge_enabled ? local.merge_machine_arn : aws_lambda_function.drain.arn
    role_arn = aws_iam_role.scheduler[0].arn
    input    = jsonencode({ action = "drain" })

    retry_policy {
      maximum_event_age_in_seconds = max(60, min(local.interval == null ? 3600 : local.interval, 86400))
      maximum_retry_attempts       = var.schedule_retry_attempts
    }

    dead_letter_config {
      arn = aws_sqs_queue.schedule_dlq[0].arn
    }
  }
}

resource "aws_cloudwatch_event_rule" "schedule" {
  count               = var.schedule_type == "rule" ? 1 : 0
  name                = local.names.schedule
  description         = "sluice drain of ${var.job}"
  schedule_expression = var.schedule_expression
  state               = var.schedule_enabled ? "ENABLED" : "DISABLED"
  tags                = var.tags
}

resource "aws_cloudwatch_event_target" "drain" {
  count = var.schedule_type == "rule" ? 1 : 0
  rule  = aws_cloudwatch_event_rule.schedule[0].name
  arn   = aws_lambda_function.drain.arn
  input = jsonencode({ action = "drain" })
}

resource "aws_lambda_permission" "schedule" {
  count          = var.schedule_type == "rule" ? 1 : 0
  statement_id   = "sluice-schedule"
  action         = "lambda:InvokeFunction"
  function_name  = aws_lambda_function.drain.function_name
  principal      = "events.amazonaws.com"
  source_arn     = aws_cloudwatch_event_rule.schedule[0].arn
  source_account = local.account_id
}

# ---------------------------------------------------------------- the baseline machine

# The Map's chunk invocations run on their own function: the drain function's reserved
# concurrency of 1 would throttle them (and a running drain would block them).
resource "aws_lambda_function" "worker" {
  #checkov:skip=CKV_AWS_116:invoked synchronously by Step Functions, whose Retry handles failures
  #checkov:skip=CKV_AWS_117:a VPC is optional (var.vpc); a source reachable over TLS on a public endpoint needs none
  #checkov:skip=CKV_AWS_272:code signing needs a signing profile the deployer owns; the package hash is pinned by source_code_hash
  #checkov:skip=CKV_AWS_50:the binary emits no X-Ray segments; per-run telemetry is the EMF metrics and JSON logs
  count            = var.baseline_state_machine ? 1 : 0
  function_name    = local.names.worker_function
  description      = "sluice baseline worker of ${var.job} (Step Functions tasks)"
  role             = aws_iam_role.worker[0].arn
  filename         = var.package_path
  source_code_hash = filebase64sha256(var.package_path)
  handler          = "bootstrap"
  runtime          = "provided.al2023"
  architectures    = [var.architecture]
  memory_size      = var.memory_size
  timeout          = var.timeout
  kms_key_arn      = var.stack.kms_key_arn

  # Bounds how many chunks read the source at once.
  reserved_concurrent_executions = local.worker_concurrency

  ephemeral_storage {
    size = var.ephemeral_storage_mb
  }

  environment {
    variables = local.environment
  }

  logging_config {
    log_format = var.log_format
    log_group  = aws_cloudwatch_log_group.worker[0].name
  }

  dynamic "vpc_config" {
    for_each = var.vpc == null ? [] : [var.vpc]
    content {
      subnet_ids         = vpc_config.value.subnet_ids
      security_group_ids = vpc_config.value.security_group_ids
    }
  }

  tags = var.tags

  depends_on = [
    aws_cloudwatch_log_group.worker,
    aws_iam_role_policy.worker,
  ]
}

resource "aws_cloudwatch_log_group" "machine" {
  count             = var.baseline_state_machine ? 1 : 0
  name              = local.names.machine_log_group
  retention_in_days = var.log_retention_days
  kms_key_id        = var.stack.kms_key_arn
  tags              = var.tags
}

resource "aws_sfn_state_machine" "baseline" {
  #checkov:skip=CKV_AWS_284:the tasks emit no X-Ray segments; execution history and the ERROR-level log are the trace
  count    = var.baseline_state_machine ? 1 : 0
  name     = local.names.state_machine
  role_arn = aws_iam_role.machine[0].arn
  type     = "STANDARD"
  definition = templatefile(
    var.baseline_definition_path == null ? "${path.module}/../../../infra/stepfunctions/baseline.asl.json" : var.baseline_definition_path,
    { function_arn = aws_lambda_function.worker[0].arn },
  )

  logging_configuration {
    log_destination = "${aws_cloudwatch_log_group.machine[0].arn}:*"
    # Failed tasks' input and output (chunk bounds, run summaries, redacted errors).
    include_execution_data = true
    level                  = "ERROR"
  }

  tags = var.tags

  lifecycle {
    # The drain function's config and policy name the ARN built in locals.
    postcondition {
      condition     = self.arn == local.machine_arn
      error_message = "The state machine's ARN differs from the one in the drain function's config and policy."
    }
  }

  depends_on = [aws_iam_role_policy.machine]
}

# The classic rule was unconditional before schedule_type (schedule_type = "rule" keeps it).
moved {
  from = aws_cloudwatch_event_rule.schedule
  to   = aws_cloudwatch_event_rule.schedule[0]
}

moved {
  from = aws_cloudwatch_event_target.drain
  to   = aws_cloudwatch_event_target.drain[0]
}

moved {
  from = aws_lambda_permission.schedule
  to   = aws_lambda_permission.schedule[0]
}
