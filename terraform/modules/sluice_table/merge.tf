# The optional current-state MERGE (var.current_state_merge, docs/iceberg.md): the
# schedule then starts a state machine instead of invoking the drain function; the
# machine runs the drain and, when its summary says `rows` > 0, each table's MERGE
# through Athena (its definition: the sluice_merge_state module). The MERGE texts are
# rendered at deploy time by `sluice sql --merge --dialect athena`: each is correct for
# every run until the table's columns change (its watermark lives in the target table).

locals {
  merge_enabled     = var.current_state_merge != null
  merge_machine_arn = "arn:${local.partition}:states:${local.region}:${local.account_id}:stateMachine:${local.names.merge_machine}"
  merge_workgroup   = local.merge_enabled ? var.current_state_merge.workgroup : "primary"
  merge_database    = local.merge_enabled ? var.current_state_merge.database : ""
  # The Athena results folder's bucket (null: the workgroup's own, which its config grants).
  merge_results_bucket = local.merge_enabled && try(var.current_state_merge.output_location, null) != null ? regex("^s3://([^/]+)", var.current_state_merge.output_location)[0] : null
}

module "merge_state" {
  source = "../sluice_merge_state"

  drain_function_arn = aws_lambda_function.drain.arn
  merge = local.merge_enabled ? {
    statements      = var.current_state_merge.statements
    workgroup       = var.current_state_merge.workgroup
    output_location = var.current_state_merge.output_location
  } : null
}

resource "aws_cloudwatch_log_group" "merge" {
  count             = local.merge_enabled ? 1 : 0
  name              = local.names.merge_log_group
  retention_in_days = var.log_retention_days
  kms_key_id        = var.stack.kms_key_arn
  tags              = var.tags
}

resource "aws_sfn_state_machine" "merge" {
  #checkov:skip=CKV_AWS_284:the tasks emit no X-Ray segments; execution history and the ERROR-level log are the trace
  count      = local.merge_enabled ? 1 : 0
  name       = local.names.merge_machine
  role_arn   = aws_iam_role.merge[0].arn
  type       = "STANDARD"
  definition = module.merge_state.definition

  logging_configuration {
    log_destination        = "${aws_cloudwatch_log_group.merge[0].arn}:*"
    include_execution_data = true
    level                  = "ERROR"
  }

  tags = var.tags

  lifecycle {
    precondition {
      condition     = var.schedule_type == "scheduler"
      error_message = "current_state_merge needs schedule_type = \"scheduler\" (the schedule starts the machine)."
    }
    postcondition {
      condition     = self.arn == local.merge_machine_arn
      error_message = "The MERGE machine's ARN differs from the one the schedule's role may start."
    }
  }

  depends_on = [aws_iam_role_policy.merge]
}

data "aws_iam_policy_document" "merge" {
  count                   = local.merge_enabled ? 1 : 0
  source_policy_documents = [data.aws_iam_policy_document.deliver_execution_logs.json]

  statement {
    sid       = "InvokeOwnDrain"
    actions   = ["lambda:InvokeFunction"]
    resources = [aws_lambda_function.drain.arn, "${aws_lambda_function.drain.arn}:*"]
  }

  # startQueryExecution.sync starts the query, then polls (and on abort stops) it.
  statement {
    sid       = "RunMergeQueries"
    actions   = ["athena:StartQueryExecution", "athena:GetQueryExecution", "athena:StopQueryExecution", "athena:GetWorkGroup"]
    resources = ["arn:${local.partition}:athena:${local.region}:${local.account_id}:workgroup/${local.merge_workgroup}"]
  }

  # Athena reads the change log and commits the current-state table through Glue.
  statement {
    sid     = "ReadAndCommitIcebergTables"
    actions = ["glue:GetDatabase", "glue:GetTable", "glue:GetTables", "glue:UpdateTable"]
    resources = [
      "arn:${local.partition}:glue:${local.region}:${local.account_id}:catalog",
      "arn:${local.partition}:glue:${local.region}:${local.account_id}:database/${local.merge_database}",
      "arn:${local.partition}:glue:${local.region}:${local.account_id}:table/${local.merge_database}/*",
    ]
  }

  # The change log's parts and the current-state table's files lie below the stream's
  # prefix (the table's `<table>/_current/` by default).
  statement {
    sid       = "ReadAndWriteStreamData"
    actions   = ["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"]
    resources = [local.object_arn]
  }

  statement {
    sid       = "ListStreamData"
    actions   = ["s3:ListBucket", "s3:GetBucketLocation"]
    resources = [var.stack.bucket_arn]
  }

  dynamic "statement" {
    for_each = local.merge_results_bucket == null ? [] : [local.merge_results_bucket]
    content {
      sid       = "WriteQueryResults"
      actions   = ["s3:GetObject", "s3:PutObject", "s3:ListBucket", "s3:GetBucketLocation", "s3:AbortMultipartUpload"]
      resources = ["arn:${local.partition}:s3:::${statement.value}", "arn:${local.partition}:s3:::${statement.value}/*"]
    }
  }

  statement {
    sid       = "UseStackKeyThroughS3"
    actions   = ["kms:Decrypt", "kms:GenerateDataKey"]
    resources = [var.stack.kms_key_arn]
    condition {
      test     = "StringEquals"
      variable = "kms:ViaService"
      values   = ["s3.${local.region}.amazonaws.com"]
    }
  }
}

resource "aws_iam_role" "merge" {
  count                = local.merge_enabled ? 1 : 0
  name                 = local.names.merge_role
  description          = "sluice drain-then-MERGE state machine of ${var.job}"
  assume_role_policy   = data.aws_iam_policy_document.assume_own_machine["merge"].json
  path                 = var.iam_role_path
  permissions_boundary = var.permissions_boundary_arn
  tags                 = var.tags
}

resource "aws_iam_role_policy" "merge" {
  count  = local.merge_enabled ? 1 : 0
  name   = "sluice"
  role   = aws_iam_role.merge[0].id
  policy = data.aws_iam_policy_document.merge[0].json
}
