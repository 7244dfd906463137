# The stream's compaction (docs/compaction.md): a function of its own running
# `{"action": "compact"}` on its own schedule (default daily), so a compaction never takes
# the drain function's single reserved slot and a drain never waits for one. It reads and
# writes the stream's prefix only (deleting the parts it replaced) and its job's items of
# the state table (its per-table lease and record, `op#compact#<table>`); it never reads
# the source or its secret. compaction = false: none of this.
#
# compaction_parallel = N: the schedule starts a Step Functions machine instead
# (infra/stepfunctions/compact.asl.json) that compacts up to N tables at once, each in as
# many invocations as it needs, so a job with many tables, or a table with a long backlog
# of small parts, is not held to one invocation's 15 minutes.

locals {
  compaction_enabled  = var.compaction
  compaction_fan_out  = var.compaction && var.compaction_parallel != null
  compact_machine_arn = "arn:${local.partition}:states:${local.region}:${local.account_id}:stateMachine:${local.names.compact_machine}"
  # What the compaction schedule starts, and with what.
  compaction_target_arn   = local.compaction_fan_out ? local.compact_machine_arn : (local.compaction_enabled ? aws_lambda_function.compact[0].arn : null)
  compaction_target_input = local.compaction_fan_out ? jsonencode({ parallel = var.compaction_parallel }) : jsonencode({ action = "compact" })
}

resource "aws_cloudwatch_log_group" "compact" {
  count             = local.compaction_enabled ? 1 : 0
  name              = local.names.compact_log_group
  retention_in_days = var.log_retention_days
  kms_key_id        = var.stack.kms_key_arn
  tags              = var.tags
}

resource "aws_lambda_function" "compact" {
  #checkov:skip=CKV_AWS_116:retries are off by design (the next tick redoes the work; the lease makes duplicates harmless); failures raise the compaction alarms
  #checkov:skip=CKV_AWS_117:it reaches only S3 and DynamoDB (never the source), so it needs no VPC
  #checkov:skip=CKV_AWS_272:code signing needs a signing profile the deployer owns; the package hash is pinned by source_code_hash
  #checkov:skip=CKV_AWS_50:the binary emits no X-Ray segments; per-run telemetry is the EMF metrics and JSON logs
  count            = local.compaction_enabled ? 1 : 0
  function_name    = local.names.compact_function
  description      = "sluice compaction of ${var.job} (${join(", ", var.tables)})"
  role             = aws_iam_role.compact[0].arn
  filename         = var.package_path
  source_code_hash = filebase64sha256(var.package_path)
  handler          = "bootstrap"
  runtime          = "provided.al2023"
  architectures    = [var.architecture]
  memory_size      = var.memory_size
  timeout          = var.timeout
  kms_key_arn      = var.stack.kms_key_arn

  # One invocation per table at a time: each table's lease is the mechanism, this is belt
  # and braces (the fan-out machine runs up to compaction_parallel tables at once).
  reserved_concurrent_executions = local.compaction_fan_out ? var.compaction_parallel : 1

  ephemeral_storage {
    size = var.ephemeral_storage_mb
  }

  environment {
    variables = local.environment
  }

  logging_config {
    log_format = var.log_format
    log_group  = aws_cloudwatch_log_group.compact[0].name
  }

  tags = var.tags

  depends_on = [
    aws_cloudwatch_log_group.compact,
    aws_iam_role_policy.compact,
  ]
}

resource "aws_lambda_function_event_invoke_config" "compact" {
  count                        = local.compaction_enabled ? 1 : 0
  function_name                = aws_lambda_function.compact[0].function_name
  maximum_retry_attempts       = 0
  maximum_event_age_in_seconds = 3600
}

resource "aws_scheduler_schedule" "compact" {
  count                        = local.compaction_enabled && var.schedule_type == "scheduler" ? 1 : 0
  name                         = local.names.compaction_schedule
  description                  = "sluice compaction of ${var.job}"
  schedule_expression          = var.compaction_schedule_expression
  schedule_expression_timezone = var.schedule_time_zone
  kms_key_arn                  = var.stack.kms_key_arn
  state                        = var.schedule_enabled ? "ENABLED" : "DISABLED"

  flexible_time_window {
    mode = "OFF"
  }

  target {
    arn      = local.compaction_target_arn
    role_arn = aws_iam_role.scheduler[0].arn
    input    = local.compaction_target_input

    retry_policy {
      maximum_event_age_in_seconds = 3600
      maximum_retry_attempts       = var.schedule_retry_attempts
    }

    dead_letter_config {
      arn = aws_sqs_queue.schedule_dlq[0].arn
    }
  }
}

resource "aws_cloudwatch_event_rule" "compact" {
  count = local.compaction_enabled && var.schedule_type == "rule" ? 1 : 0

  lifecycle {
    precondition {
      condition     = var.compaction_parallel == null
      error_message = "compaction_parallel needs schedule_type = \"scheduler\" (the schedule starts the compaction machine)."
    }
  }

  name                = local.names.compaction_schedule
  description         = "sluice compaction of ${var.job}"
  schedule_expression = var.compaction_schedule_expression
  state               = var.schedule_enabled ? "ENABLED" : "DISABLED"
  tags                = var.tags
}

resource "aws_cloudwatch_event_target" "compact" {
  count = local.compaction_enabled && var.schedule_type == "rule" ? 1 : 0
  rule  = aws_cloudwatch_event_rule.compact[0].name
  arn   = aws_lambda_function.compact[0].arn
  input = jsonencode({ action = "compact" })
}

resource "aws_lambda_permission" "compact" {
  count          = local.compaction_enabled && var.schedule_type == "rule" ? 1 : 0
  statement_id   = "sluice-compaction-schedule"
  action         = "lambda:InvokeFunction"
  function_name  = aws_lambda_function.compact[0].function_name
  principal      = "events.amazonaws.com"
  source_arn     = aws_cloudwatch_event_rule.compact[0].arn
  source_account = local.account_id
}

# Least privilege: its log group; get, put, delete and abort-multipart below the stream's
# prefix (delete: the parts a compaction replaced, after its manifest), list only with an
# s3:prefix under it; get and update on the job's own items of the state table (its
# operation leases and records); the stack key through S3, DynamoDB and Lambda.
data "aws_iam_policy_document" "compact" {
  count = local.compaction_enabled ? 1 : 0

  statement {
    sid       = "WriteOwnLogs"
    actions   = ["logs:CreateLogStream", "logs:PutLogEvents"]
    resources = ["${aws_cloudwatch_log_group.compact[0].arn}:*"]
  }

  statement {
    sid       = "RewriteOwnPrefix"
    actions   = ["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"]
    resources = [local.object_arn]
  }

  statement {
    sid       = "ListOwnPrefix"
    actions   = ["s3:ListBucket"]
    resources = [var.stack.bucket_arn]
    condition {
      test     = "StringLike"
      variable = "s3:prefix"
      values   = ["${local.prefix}/*"]
    }
  }

  statement {
    sid       = "OwnOperationItemsInStateTable"
    actions   = ["dynamodb:GetItem", "dynamodb:UpdateItem"]
    resources = [var.stack.state_table_arn]
    condition {
      test     = "ForAllValues:StringEquals"
      variable = "dynamodb:LeadingKeys"
      values   = [var.job]
    }
  }

  statement {
    sid       = "StackKeyThroughItsServices"
    actions   = ["kms:Decrypt", "kms:GenerateDataKey"]
    resources = [var.stack.kms_key_arn]
    condition {
      test     = "StringEquals"
      variable = "kms:ViaService"
      values = [
        "s3.${local.region}.amazonaws.com",
        "dynamodb.${local.region}.amazonaws.com",
        "lambda.${local.region}.amazonaws.com",
      ]
    }
  }
}

resource "aws_iam_role" "compact" {
  count                = local.compaction_enabled ? 1 : 0
  name                 = local.names.compact_role
  description          = "sluice compaction function of ${var.job}"
  assume_role_policy   = data.aws_iam_policy_document.assume_lambda.json
  path                 = var.iam_role_path
  permissions_boundary = var.permissions_boundary_arn
  tags                 = var.tags
}

resource "aws_iam_role_policy" "compact" {
  count  = local.compaction_enabled ? 1 : 0
  name   = "sluice"
  role   = aws_iam_role.compact[0].id
  policy = data.aws_iam_policy_document.compact[0].json
}

# ---------------------------------------------------------------- the fan-out machine

resource "aws_cloudwatch_log_group" "compact_machine" {
  count             = local.compaction_fan_out ? 1 : 0
  name              = local.names.compact_machine_log_group
  retention_in_days = var.log_retention_days
  kms_key_id        = var.stack.kms_key_arn
  tags              = var.tags
}

resource "aws_sfn_state_machine" "compact" {
  #checkov:skip=CKV_AWS_284:the tasks emit no X-Ray segments; execution history and the ERROR-level log are the trace
  count    = local.compaction_fan_out ? 1 : 0
  name     = local.names.compact_machine
  role_arn = aws_iam_role.compact_machine[0].arn
  type     = "STANDARD"
  definition = templatefile(
    "${path.module}/../../../infra/stepfunctions/compact.asl.json",
    { function_arn = aws_lambda_function.compact[0].arn },
  )

  logging_configuration {
    log_destination        = "${aws_cloudwatch_log_group.compact_machine[0].arn}:*"
    include_execution_data = true
    level                  = "ERROR"
  }

  tags = var.tags

  lifecycle {
    precondition {
      condition     = var.schedule_type == "scheduler"
      error_message = "compaction_parallel needs schedule_type = \"scheduler\" (the schedule starts the compaction machine)."
    }
    postcondition {
      condition     = self.arn == local.compact_machine_arn
      error_message = "The compaction machine's ARN differs from the one the schedule's role may start."
    }
  }

  depends_on = [aws_iam_role_policy.compact_machine]
}

# It invokes the compaction function and delivers its own ERROR-level log; nothing else.
data "aws_iam_policy_document" "compact_machine" {
  count                   = local.compaction_fan_out ? 1 : 0
  source_policy_documents = [data.aws_iam_policy_document.deliver_execution_logs.json]

  statement {
    sid       = "InvokeOwnCompaction"
    actions   = ["lambda:InvokeFunction"]
    resources = [aws_lambda_function.compact[0].arn, "${aws_lambda_function.compact[0].arn}:*"]
  }
}

resource "aws_iam_role" "compact_machine" {
  count                = local.compaction_fan_out ? 1 : 0
  name                 = local.names.compact_machine_role
  description          = "sluice compaction state machine of ${var.job}"
  assume_role_policy   = data.aws_iam_policy_document.assume_own_machine["compact"].json
  path                 = var.iam_role_path
  permissions_boundary = var.permissions_boundary_arn
  tags                 = var.tags
}

resource "aws_iam_role_policy" "compact_machine" {
  count  = local.compaction_fan_out ? 1 : 0
  name   = "sluice"
  role   = aws_iam_role.compact_machine[0].id
  policy = data.aws_iam_policy_document.compact_machine[0].json
}
