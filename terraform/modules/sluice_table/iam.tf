# Least privilege per function:
# * logs: write to its own log group only (Terraform creates the group);
# * S3: get/put/abort-multipart on `<prefix>/*` and list only with an s3:prefix under it;
# * DynamoDB: item actions on the state table only for items whose partition key is
#   this job (dynamodb:LeadingKeys) — the lease, checkpoint, baseline and run records —
#   plus get/update on the shared `claim#*` items (resource claims);
# * KMS: the stack key, only through S3, DynamoDB and Lambda (environment);
# * Secrets Manager: GetSecretValue on its one secret (and its key, through Secrets
#   Manager, when it has a customer managed one);
# * Step Functions: StartExecution on its own baseline machine, drain function only;
# * S3 DeleteObject under `<prefix>/_verify/` when verify is on (a verify walk removes its
#   own documents: the drain function's sampled verify, the worker's with verify_parallel);
# * EC2: the ENI actions Lambda needs, only when the function runs in a VPC;
# * Glue: with a catalog, the drain function reads its database (and creates it when
#   missing) and reads, creates and updates the tables in it — nothing else in the catalog.
# * Glue, Iceberg: with `iceberg` on `glue`, both functions (a drain's and a baseline
#   finish's commits) read the namespace's database (and create it when missing) and read,
#   create and update the tables in it, in the catalog of `catalog_id` (default: this
#   account);
# * S3 Tables, Iceberg: with `iceberg` on `s3tables`, both functions use that one table
#   bucket: its namespaces (read, create), its tables (create, read and move the metadata
#   pointer) and their files (read, write).
# The compaction function's role (compaction.tf): its log group, get/put/delete/abort on
# `<prefix>/*`, list under the prefix, get/update of its job's items; no secret, no source.
# The baseline machine's role: invoke its worker; read the chunk lists under
# `<prefix>/_baseline/` (and decrypt them through S3) for the Distributed Map's
# ItemReader; start, describe and stop its own executions (the Distributed Map's child
# executions); deliver its logs.

data "aws_iam_policy_document" "assume_lambda" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["lambda.amazonaws.com"]
    }
  }
}

locals {
  object_arn = "${var.stack.bucket_arn}/${local.prefix}/*"
  eni_arn    = "arn:${local.partition}:ec2:${local.region}:${local.account_id}:network-interface/*"
  subnet_arns = var.vpc == null ? [] : [
    for id in var.vpc.subnet_ids : "arn:${local.partition}:ec2:${local.region}:${local.account_id}:subnet/${id}"
  ]
  sg_arns = var.vpc == null ? [] : [
    for id in var.vpc.security_group_ids : "arn:${local.partition}:ec2:${local.region}:${local.account_id}:security-group/${id}"
  ]
  # src/baseline/delivery.rs CHUNKS_FOLDER: where baseline.plan writes a chunk list too
  # large to pass between states.
  chunk_lists_arn = "${var.stack.bucket_arn}/${local.prefix}/_baseline/*"

  # The account whose Glue Data Catalog holds the Iceberg tables (`iceberg.catalog_id`).
  iceberg_catalog_account = coalesce(try(var.iceberg.catalog_id, null), local.account_id)

  # The claim items of this stream's own resources; a MySQL server id left to the binary
  # (derived from the job) is not known here, so any server id then.
  mysql_server_id = try(var.mysql.server_id, null)
  claim_keys = var.engine == "postgres" ? [
    "claim#*/slot/${try(var.postgres.slot, "")}",
    # The record that this job created its slot (src/claims.rs, `…/slot/<slot>/created-by`).
    "claim#*/slot/${try(var.postgres.slot, "")}/created-by",
    ] : [
    "claim#*/server_id/${local.mysql_server_id == null ? "*" : local.mysql_server_id}"
  ]
}

# The statements both functions share; `log_group_arn` and `start_machine` differ.
data "aws_iam_policy_document" "function" {
  for_each = merge(
    { drain = { log_group_arn = aws_cloudwatch_log_group.drain.arn, start_machine = var.baseline_state_machine } },
    var.baseline_state_machine ? { worker = { log_group_arn = aws_cloudwatch_log_group.worker[0].arn, start_machine = false } } : {},
  )

  statement {
    sid       = "WriteOwnLogs"
    actions   = ["logs:CreateLogStream", "logs:PutLogEvents"]
    resources = ["${each.value.log_group_arn}:*"]
  }

  statement {
    sid       = "ReadWriteOwnPrefix"
    actions   = ["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload"]
    resources = [local.object_arn]
  }

  # A verify walk removes its documents once its reports are written — under `_verify/`
  # only: the walker's finish on the worker, a sampled verify on the drain function.
  dynamic "statement" {
    for_each = local.verify_enabled && (each.key == "drain" || local.verify_fan_out) ? [local.verify_walks_arn] : []
    content {
      sid       = "RemoveOwnVerifyWalkDocuments"
      actions   = ["s3:DeleteObject"]
      resources = [statement.value]
    }
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
    sid = "OwnJobItemsInStateTable"
    actions = [
      "dynamodb:GetItem",
      "dynamodb:PutItem",
      "dynamodb:UpdateItem",
      "dynamodb:Query",
    ]
    resources = [var.stack.state_table_arn]
    condition {
      test     = "ForAllValues:StringEquals"
      variable = "dynamodb:LeadingKeys"
      values   = [var.job]
    }
  }

  # Resource claims (a replication slot, a replica server id) are items keyed
  # `claim#<resource>`, shared by every job on the table (src/claims.rs: `<server>/slot/<slot>`,
  # `<server>/server_id/<id>`). The function reaches only the claims of its own slot or
  # server id (any server: the host is in the secret); its conditional write only takes a
  # free claim or renews its own, so it cannot take another job's claim.
  statement {
    sid       = "OwnResourceClaimsInStateTable"
    actions   = ["dynamodb:GetItem", "dynamodb:UpdateItem"]
    resources = [var.stack.state_table_arn]
    condition {
      test     = "ForAllValues:StringLike"
      variable = "dynamodb:LeadingKeys"
      values   = local.claim_keys
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

  statement {
    sid       = "ReadSourceSecret"
    actions   = ["secretsmanager:GetSecretValue"]
    resources = [var.secret_arn]
  }

  dynamic "statement" {
    for_each = try(var.policy.hash_key_secret_arn, null) == null ? [] : [var.policy.hash_key_secret_arn]
    content {
      sid       = "ReadHashKeySecret"
      actions   = ["secretsmanager:GetSecretValue"]
      resources = [statement.value]
    }
  }

  dynamic "statement" {
    for_each = var.secret_kms_key_arn == null ? [] : [var.secret_kms_key_arn]
    content {
      sid       = "DecryptSourceSecret"
      actions   = ["kms:Decrypt"]
      resources = [statement.value]
      condition {
        test     = "StringEquals"
        variable = "kms:ViaService"
        values   = ["secretsmanager.${local.region}.amazonaws.com"]
      }
    }
  }

  dynamic "statement" {
    for_each = each.value.start_machine ? [local.machine_arn] : []
    content {
      sid       = "StartOwnBaseline"
      actions   = ["states:StartExecution"]
      resources = [statement.value]
    }
  }

  dynamic "statement" {
    for_each = var.catalog != null && each.key == "drain" ? [var.catalog.database] : []
    content {
      sid = "RegisterOwnCatalogTables"
      actions = [
        "glue:GetDatabase",
        "glue:CreateDatabase",
        "glue:GetTable",
        "glue:CreateTable",
        "glue:UpdateTable",
      ]
      resources = [
        "arn:${local.partition}:glue:${local.region}:${local.account_id}:catalog",
        "arn:${local.partition}:glue:${local.region}:${local.account_id}:database/${statement.value}",
        "arn:${local.partition}:glue:${local.region}:${local.account_id}:table/${statement.value}/*",
      ]
    }
  }

  dynamic "statement" {
    for_each = try(var.iceberg.catalog, null) == "glue" ? [coalesce(var.iceberg.namespace, "sluice")] : []
    content {
      sid = "CommitOwnIcebergTables"
      actions = [
        "glue:GetDatabase",
        "glue:CreateDatabase",
        "glue:GetTable",
        "glue:CreateTable",
        "glue:UpdateTable",
      ]
      resources = [
        "arn:${local.partition}:glue:${local.region}:${local.iceberg_catalog_account}:catalog",
        "arn:${local.partition}:glue:${local.region}:${local.iceberg_catalog_account}:database/${statement.value}",
        "arn:${local.partition}:glue:${local.region}:${local.iceberg_catalog_account}:table/${statement.value}/*",
      ]
    }
  }

  dynamic "statement" {
    for_each = try(var.iceberg.catalog, null) == "s3tables" ? [var.iceberg.table_bucket_arn] : []
    content {
      sid = "CommitOwnS3Tables"
      actions = [
        "s3tables:GetTableBucket",
        "s3tables:GetNamespace",
        "s3tables:CreateNamespace",
        "s3tables:CreateTable",
        "s3tables:GetTableMetadataLocation",
        "s3tables:UpdateTableMetadataLocation",
        "s3tables:GetTableData",
        "s3tables:PutTableData",
      ]
      resources = [
        statement.value,
        "${statement.value}/table/*",
      ]
    }
  }

  dynamic "statement" {
    for_each = var.vpc == null ? [] : [1]
    content {
      sid       = "CreateEniInOwnSubnets"
      actions   = ["ec2:CreateNetworkInterface"]
      resources = concat([local.eni_arn], local.subnet_arns, local.sg_arns)
    }
  }

  dynamic "statement" {
    for_each = var.vpc == null ? [] : [1]
    content {
      sid       = "ManageEnis"
      actions   = ["ec2:DeleteNetworkInterface", "ec2:AssignPrivateIpAddresses", "ec2:UnassignPrivateIpAddresses"]
      resources = [local.eni_arn]
    }
  }

  dynamic "statement" {
    # Describe calls support no resource-level permissions.
    for_each = var.vpc == null ? [] : [1]
    content {
      sid       = "DescribeEnis"
      actions   = ["ec2:DescribeNetworkInterfaces", "ec2:DescribeSubnets"]
      resources = ["*"]
    }
  }
}

resource "aws_iam_role" "drain" {
  name                 = local.names.drain_role
  description          = "sluice drain function of ${var.job}"
  assume_role_policy   = data.aws_iam_policy_document.assume_lambda.json
  path                 = var.iam_role_path
  permissions_boundary = var.permissions_boundary_arn
  tags                 = var.tags
}

resource "aws_iam_role_policy" "drain" {
  name   = "sluice"
  role   = aws_iam_role.drain.id
  policy = data.aws_iam_policy_document.function["drain"].json
}

resource "aws_iam_role" "worker" {
  count                = var.baseline_state_machine ? 1 : 0
  name                 = local.names.worker_role
  description          = "sluice baseline worker of ${var.job}"
  assume_role_policy   = data.aws_iam_policy_document.assume_lambda.json
  path                 = var.iam_role_path
  permissions_boundary = var.permissions_boundary_arn
  tags                 = var.tags
}

resource "aws_iam_role_policy" "worker" {
  count  = var.baseline_state_machine ? 1 : 0
  name   = "sluice"
  role   = aws_iam_role.worker[0].id
  policy = data.aws_iam_policy_document.function["worker"].json
}

# ---------------------------------------------------------------- the machine's role

data "aws_iam_policy_document" "assume_states" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["states.amazonaws.com"]
    }
    # Only this account's state machine of this name may use the role (confused deputy);
    # the Distributed Map's child executions run as `stateMachine:<machine>/<map label>`.
    condition {
      test     = "StringEquals"
      variable = "aws:SourceAccount"
      values   = [local.account_id]
    }
    condition {
      test     = "ArnLike"
      variable = "aws:SourceArn"
      values = [
        "arn:${local.partition}:states:${local.region}:${local.account_id}:stateMachine:${local.machine_name}",
        "arn:${local.partition}:states:${local.region}:${local.account_id}:stateMachine:${local.machine_name}/*",
      ]
    }
  }
}

# Step Functions may take the role of one machine only: this account's, of that name
# (confused deputy). The MERGE machine's, the compaction machine's and the verify walker's.
data "aws_iam_policy_document" "assume_own_machine" {
  for_each = { merge = local.merge_machine_arn, compact = local.compact_machine_arn, verify = local.verify_machine_arn }

  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["states.amazonaws.com"]
    }
    condition {
      test     = "StringEquals"
      variable = "aws:SourceAccount"
      values   = [local.account_id]
    }
    condition {
      test     = "ArnLike"
      variable = "aws:SourceArn"
      values   = [each.value]
    }
  }
}

# The logging part of each state machine's role (the baseline machine's and the MERGE's).
data "aws_iam_policy_document" "deliver_execution_logs" {
  statement {
    # CloudWatch Logs delivery for Step Functions supports no resource-level permissions.
    #checkov:skip=CKV_AWS_111:log delivery actions accept only Resource "*" (AWS documents this for Step Functions logging)
    #checkov:skip=CKV_AWS_356:log delivery actions accept only Resource "*"
    sid = "DeliverExecutionLogs"
    actions = [
      "logs:CreateLogDelivery",
      "logs:GetLogDelivery",
      "logs:UpdateLogDelivery",
      "logs:DeleteLogDelivery",
      "logs:ListLogDeliveries",
      "logs:PutResourcePolicy",
      "logs:DescribeResourcePolicies",
      "logs:DescribeLogGroups",
    ]
    resources = ["*"]
  }
}

# The machines that drive the baseline worker — the baseline machine, and the verify
# walker with verify_parallel — each: invoke the worker; read the chunk lists its plan
# writes (SSE-KMS under the stack key) for the Distributed Map's ItemReader — that folder
# only, not the stream's data; start, watch and stop its own child executions (a
# Distributed Map runs each chunk as one, `execution:<machine>/<map label>:<id>`); deliver
# its own log.
locals {
  worker_machines = merge(
    var.baseline_state_machine ? { baseline = { name = local.machine_name, arn = local.machine_arn, lists_arn = local.chunk_lists_arn } } : {},
    local.verify_fan_out ? { verify = { name = local.names.verify_machine, arn = local.verify_machine_arn, lists_arn = local.verify_walks_arn } } : {},
  )
}

data "aws_iam_policy_document" "worker_machine" {
  for_each                = local.worker_machines
  source_policy_documents = [data.aws_iam_policy_document.deliver_execution_logs.json]

  statement {
    sid       = "InvokeOwnWorker"
    actions   = ["lambda:InvokeFunction"]
    resources = [aws_lambda_function.worker[0].arn, "${aws_lambda_function.worker[0].arn}:*"]
  }

  statement {
    sid       = "ReadChunkLists"
    actions   = ["s3:GetObject"]
    resources = [each.value.lists_arn]
  }

  statement {
    sid       = "DecryptChunkListsThroughS3"
    actions   = ["kms:Decrypt"]
    resources = [var.stack.kms_key_arn]
    condition {
      test     = "StringEquals"
      variable = "kms:ViaService"
      values   = ["s3.${local.region}.amazonaws.com"]
    }
  }

  statement {
    sid       = "StartOwnChildExecutions"
    actions   = ["states:StartExecution"]
    resources = [each.value.arn]
  }

  statement {
    sid     = "WatchOwnExecutions"
    actions = ["states:DescribeExecution", "states:StopExecution"]
    resources = [
      "arn:${local.partition}:states:${local.region}:${local.account_id}:execution:${each.value.name}:*",
      "arn:${local.partition}:states:${local.region}:${local.account_id}:execution:${each.value.name}/*",
    ]
  }
}

resource "aws_iam_role" "machine" {
  count                = var.baseline_state_machine ? 1 : 0
  name                 = local.names.machine_role
  description          = "sluice baseline state machine of ${var.job}"
  assume_role_policy   = data.aws_iam_policy_document.assume_states.json
  path                 = var.iam_role_path
  permissions_boundary = var.permissions_boundary_arn
  tags                 = var.tags
}

resource "aws_iam_role_policy" "machine" {
  count  = var.baseline_state_machine ? 1 : 0
  name   = "sluice"
  role   = aws_iam_role.machine[0].id
  policy = data.aws_iam_policy_document.worker_machine["baseline"].json
}

# ---------------------------------------------------------------- the scheduler's role

data "aws_iam_policy_document" "assume_scheduler" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["scheduler.amazonaws.com"]
    }
    # Only this account's schedule of this name may use the role (confused deputy).
    condition {
      test     = "StringEquals"
      variable = "aws:SourceAccount"
      values   = [local.account_id]
    }
    condition {
      test     = "ArnLike"
      variable = "aws:SourceArn"
      values = [
        "arn:${local.partition}:scheduler:${local.region}:${local.account_id}:schedule/default/${local.names.schedule}",
        "arn:${local.partition}:scheduler:${local.region}:${local.account_id}:schedule/default/${local.names.compaction_schedule}",
        "arn:${local.partition}:scheduler:${local.region}:${local.account_id}:schedule/default/${local.names.verify_schedule}",
      ]
    }
  }
}

data "aws_iam_policy_document" "scheduler" {
  count = var.schedule_type == "scheduler" ? 1 : 0

  statement {
    sid       = "InvokeOwnDrain"
    actions   = ["lambda:InvokeFunction"]
    resources = [aws_lambda_function.drain.arn, "${aws_lambda_function.drain.arn}:*"]
  }

  dynamic "statement" {
    for_each = local.compaction_enabled && !local.compaction_fan_out ? [aws_lambda_function.compact[0].arn] : []
    content {
      sid       = "InvokeOwnCompaction"
      actions   = ["lambda:InvokeFunction"]
      resources = [statement.value, "${statement.value}:*"]
    }
  }

  dynamic "statement" {
    for_each = local.compaction_fan_out ? [local.compact_machine_arn] : []
    content {
      sid       = "StartOwnCompactionMachine"
      actions   = ["states:StartExecution"]
      resources = [statement.value]
    }
  }

  dynamic "statement" {
    for_each = local.verify_fan_out ? [local.verify_machine_arn] : []
    content {
      sid       = "StartOwnVerifyMachine"
      actions   = ["states:StartExecution"]
      resources = [statement.value]
    }
  }

  dynamic "statement" {
    for_each = local.merge_enabled ? [local.merge_machine_arn] : []
    content {
      sid       = "StartOwnMergeMachine"
      actions   = ["states:StartExecution"]
      resources = [statement.value]
    }
  }

  statement {
    sid       = "ParkUndeliveredTicks"
    actions   = ["sqs:SendMessage"]
    resources = [aws_sqs_queue.schedule_dlq[0].arn]
  }

  # The schedule is encrypted with the stack key; its execution role decrypts it.
  statement {
    sid       = "DecryptOwnSchedule"
    actions   = ["kms:Decrypt"]
    resources = [var.stack.kms_key_arn]
  }

  statement {
    sid       = "EncryptDeadLettersThroughSqs"
    actions   = ["kms:GenerateDataKey", "kms:Decrypt"]
    resources = [var.stack.kms_key_arn]
    condition {
      test     = "StringEquals"
      variable = "kms:ViaService"
      values   = ["sqs.${local.region}.amazonaws.com"]
    }
  }
}

resource "aws_iam_role" "scheduler" {
  count                = var.schedule_type == "scheduler" ? 1 : 0
  name                 = local.names.scheduler_role
  description          = "sluice schedule of ${var.job}"
  assume_role_policy   = data.aws_iam_policy_document.assume_scheduler.json
  path                 = var.iam_role_path
  permissions_boundary = var.permissions_boundary_arn
  tags                 = var.tags
}

resource "aws_iam_role_policy" "scheduler" {
  count  = var.schedule_type == "scheduler" ? 1 : 0
  name   = "sluice"
  role   = aws_iam_role.scheduler[0].id
  policy = data.aws_iam_policy_document.scheduler[0].json
}
