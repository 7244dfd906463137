# The shared resources of one account/region: the bucket, the state table and the KMS
# key that encrypts both (and the log groups and function environments of every
# sluice_table). Per-stream resources, including each stream's baseline state machine,
# live in sluice_table.

data "aws_caller_identity" "current" {}
data "aws_partition" "current" {}
data "aws_region" "current" {}

locals {
  create_key  = var.kms_key_arn == null
  kms_key_arn = local.create_key ? aws_kms_key.this[0].arn : var.kms_key_arn
  account_id  = data.aws_caller_identity.current.account_id
  partition   = data.aws_partition.current.partition
  region      = data.aws_region.current.name

  create_topic    = var.alarm_topic_arn == null
  alarm_topic_arn = local.create_topic ? aws_sns_topic.alarms[0].arn : var.alarm_topic_arn
}

# ---------------------------------------------------------------- KMS

data "aws_iam_policy_document" "key" {
  count = local.create_key ? 1 : 0
  # In a key policy, Resource "*" means "this key".
  #checkov:skip=CKV_AWS_109:key policy; the account root statement is what keeps the key manageable through IAM
  #checkov:skip=CKV_AWS_111:key policy; Resource "*" is the key itself
  #checkov:skip=CKV_AWS_356:key policy; Resource "*" is the key itself
  statement {
    sid       = "AccountAdministersTheKeyThroughIAM"
    actions   = ["kms:*"]
    resources = ["*"]
    principals {
      type        = "AWS"
      identifiers = ["arn:${local.partition}:iam::${local.account_id}:root"]
    }
  }
  statement {
    sid = "CloudWatchLogsEncryptsSluiceLogGroups"
    actions = [
      "kms:Encrypt*",
      "kms:Decrypt*",
      "kms:ReEncrypt*",
      "kms:GenerateDataKey*",
      "kms:Describe*",
    ]
    resources = ["*"]
    principals {
      type        = "Service"
      identifiers = ["logs.${local.region}.amazonaws.com"]
    }
    condition {
      test     = "ArnLike"
      variable = "kms:EncryptionContext:aws:logs:arn"
      values = [
        "arn:${local.partition}:logs:${local.region}:${local.account_id}:log-group:/aws/lambda/*",
        "arn:${local.partition}:logs:${local.region}:${local.account_id}:log-group:/aws/vendedlogs/states/*",
      ]
    }
  }
  dynamic "statement" {
    for_each = length(var.kms_key_users) == 0 ? [] : [1]
    content {
      sid       = "KeyUsersDecrypt"
      actions   = ["kms:Decrypt", "kms:DescribeKey"]
      resources = ["*"]
      principals {
        type        = "AWS"
        identifiers = var.kms_key_users
      }
    }
  }
  # CloudWatch alarms publish to the (encrypted) alarm topic.
  statement {
    sid       = "CloudWatchAlarmsPublishToTheEncryptedTopic"
    actions   = ["kms:Decrypt", "kms:GenerateDataKey*"]
    resources = ["*"]
    principals {
      type        = "Service"
      identifiers = ["cloudwatch.amazonaws.com"]
    }
    condition {
      test     = "StringEquals"
      variable = "aws:SourceAccount"
      values   = [local.account_id]
    }
  }
}

resource "aws_kms_key" "this" {
  count                   = local.create_key ? 1 : 0
  description             = "sluice ${var.name}: parts bucket, state table, logs, function environments"
  enable_key_rotation     = true
  deletion_window_in_days = 30
  policy                  = data.aws_iam_policy_document.key[0].json
  tags                    = var.tags
}

resource "aws_kms_alias" "this" {
  count         = local.create_key ? 1 : 0
  name          = "alias/${var.name}"
  target_key_id = aws_kms_key.this[0].key_id
}

# ---------------------------------------------------------------- S3

resource "aws_s3_bucket" "this" {
  #checkov:skip=CKV_AWS_144:cross-region replication is a deployment choice; parts can be re-derived only from a source that still has the log, so add replication in the caller if needed
  #checkov:skip=CKV2_AWS_62:no consumer of event notifications is part of sluice; downstream loaders poll _manifest.json / _SUCCESS
  #checkov:skip=CKV_AWS_18:server access logging is optional (var.access_log_bucket); CloudTrail data events are the usual audit trail
  bucket        = var.bucket_name
  force_destroy = var.force_destroy
  tags          = var.tags
}

resource "aws_s3_bucket_ownership_controls" "this" {
  bucket = aws_s3_bucket.this.id
  rule {
    object_ownership = "BucketOwnerEnforced"
  }
}

resource "aws_s3_bucket_public_access_block" "this" {
  bucket                  = aws_s3_bucket.this.id
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

resource "aws_s3_bucket_server_side_encryption_configuration" "this" {
  bucket = aws_s3_bucket.this.id
  rule {
    apply_server_side_encryption_by_default {
      sse_algorithm     = "aws:kms"
      kms_master_key_id = local.kms_key_arn
    }
    bucket_key_enabled = true
  }
}

resource "aws_s3_bucket_versioning" "this" {
  bucket = aws_s3_bucket.this.id
  versioning_configuration {
    status = var.bucket_versioning ? "Enabled" : "Suspended"
  }
}

resource "aws_s3_bucket_lifecycle_configuration" "this" {
  bucket = aws_s3_bucket.this.id

  rule {
    id     = "abort-incomplete-multipart-uploads"
    status = "Enabled"
    filter {}
    abort_incomplete_multipart_upload {
      days_after_initiation = var.abort_incomplete_multipart_days
    }
  }

  # The optional rules are always present, disabled when unset (static blocks keep the
  # plan readable and the configuration analysable).
  rule {
    id     = "expire-noncurrent-versions"
    status = var.bucket_versioning && var.noncurrent_version_expiration_days != null ? "Enabled" : "Disabled"
    filter {}
    noncurrent_version_expiration {
      noncurrent_days = coalesce(var.noncurrent_version_expiration_days, 30)
    }
  }

  rule {
    id     = "expire-old-objects"
    status = var.part_expiration_days == null ? "Disabled" : "Enabled"
    filter {}
    expiration {
      days = coalesce(var.part_expiration_days, 3650)
    }
  }

  depends_on = [aws_s3_bucket_versioning.this]
}

resource "aws_s3_bucket_logging" "this" {
  count         = var.access_log_bucket == null ? 0 : 1
  bucket        = aws_s3_bucket.this.id
  target_bucket = var.access_log_bucket
  target_prefix = "s3/${var.bucket_name}/"
}

data "aws_iam_policy_document" "bucket" {
  source_policy_documents = var.bucket_policy_json
  statement {
    sid     = "DenyInsecureTransport"
    effect  = "Deny"
    actions = ["s3:*"]
    resources = [
      aws_s3_bucket.this.arn,
      "${aws_s3_bucket.this.arn}/*",
    ]
    principals {
      type        = "*"
      identifiers = ["*"]
    }
    condition {
      test     = "Bool"
      variable = "aws:SecureTransport"
      values   = ["false"]
    }
  }
  statement {
    sid     = "DenyTlsOlderThan12"
    effect  = "Deny"
    actions = ["s3:*"]
    resources = [
      aws_s3_bucket.this.arn,
      "${aws_s3_bucket.this.arn}/*",
    ]
    principals {
      type        = "*"
      identifiers = ["*"]
    }
    condition {
      test     = "NumericLessThan"
      variable = "s3:TlsVersion"
      values   = ["1.2"]
    }
  }
}

resource "aws_s3_bucket_policy" "this" {
  bucket = aws_s3_bucket.this.id
  policy = data.aws_iam_policy_document.bucket.json
  # The public access block must exist first, or a racing policy could be public.
  depends_on = [aws_s3_bucket_public_access_block.this]
}

# ---------------------------------------------------------------- DynamoDB

resource "aws_dynamodb_table" "state" {
  name                        = "${var.name}-state"
  billing_mode                = "PAY_PER_REQUEST"
  hash_key                    = "pk"
  range_key                   = "sk"
  deletion_protection_enabled = var.state_table_deletion_protection

  attribute {
    name = "pk"
    type = "S"
  }
  attribute {
    name = "sk"
    type = "S"
  }

  # Run records (`run#<run_id>`) carry expires_at; lease/checkpoint items do not.
  ttl {
    attribute_name = "expires_at"
    enabled        = true
  }

  point_in_time_recovery {
    enabled = true
  }

  server_side_encryption {
    enabled     = true
    kms_key_arn = local.kms_key_arn
  }

  tags = var.tags
}

# ---------------------------------------------------------------- Glue

# The database the streams register their tables in (docs/aws.md, Glue catalog).
resource "aws_glue_catalog_database" "this" {
  count       = var.glue_database_name == null ? 0 : 1
  name        = var.glue_database_name
  description = "CDC tables registered by sluice (${var.name})"
}

# ---------------------------------------------------------------- SNS (alarms)

# Every sluice_table's alarms notify this topic (its `for_tables.alarm_topic_arn`), so
# an alarm always reaches someone subscribed here; or pass alarm_topic_arn.
resource "aws_sns_topic" "alarms" {
  count             = local.create_topic ? 1 : 0
  name              = "${var.name}-alarms"
  kms_master_key_id = local.kms_key_arn
  tags              = var.tags
}

data "aws_iam_policy_document" "alarms_topic" {
  count = local.create_topic ? 1 : 0
  statement {
    sid       = "CloudWatchAlarmsOfThisAccountPublish"
    actions   = ["sns:Publish"]
    resources = [aws_sns_topic.alarms[0].arn]
    principals {
      type        = "Service"
      identifiers = ["cloudwatch.amazonaws.com"]
    }
    condition {
      test     = "StringEquals"
      variable = "aws:SourceAccount"
      values   = [local.account_id]
    }
  }
  statement {
    sid       = "DenyInsecureTransport"
    effect    = "Deny"
    actions   = ["sns:Publish"]
    resources = [aws_sns_topic.alarms[0].arn]
    principals {
      type        = "*"
      identifiers = ["*"]
    }
    condition {
      test     = "Bool"
      variable = "aws:SecureTransport"
      values   = ["false"]
    }
  }
}

resource "aws_sns_topic_policy" "alarms" {
  count  = local.create_topic ? 1 : 0
  arn    = aws_sns_topic.alarms[0].arn
  policy = data.aws_iam_policy_document.alarms_topic[0].json
}

resource "aws_sns_topic_subscription" "alarm_emails" {
  for_each  = local.create_topic ? toset(var.alarm_emails) : toset([])
  topic_arn = aws_sns_topic.alarms[0].arn
  protocol  = "email"
  endpoint  = each.value
}
