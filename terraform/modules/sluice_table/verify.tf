# The stream's verify (docs/verify.md): on its own schedule (default weekly) the drain
# function is invoked with `{"action": "verify"}` and compares every table in the lake with
# the source. It runs on the drain function because it needs what a drain needs (the
# source and its secret, the job's lease and checkpoint: it drains to bring the lake past
# its reads) and writes only what a drain writes (with `"repair": true`, which the schedule
# never sends). A tick that meets a running drain is throttled by the function's reserved
# concurrency and retried by the schedule. verify = false: none of this.

locals {
  verify_enabled = var.verify
}

resource "aws_scheduler_schedule" "verify" {
  count                        = local.verify_enabled && var.schedule_type == "scheduler" ? 1 : 0
  name                         = local.names.verify_schedule
  description                  = "sluice verify of ${var.job}"
  schedule_expression          = var.verify_schedule_expression
  schedule_expression_timezone = var.schedule_time_zone
  kms_key_arn                  = var.stack.kms_key_arn
  state                        = var.schedule_enabled ? "ENABLED" : "DISABLED"

  flexible_time_window {
    mode = "OFF"
  }

  target {
    arn      = aws_lambda_function.drain.arn
    role_arn = aws_iam_role.scheduler[0].arn
    input    = jsonencode({ action = "verify" })

    retry_policy {
      maximum_event_age_in_seconds = 3600
      maximum_retry_attempts       = var.schedule_retry_attempts
    }

    dead_letter_config {
      arn = aws_sqs_queue.schedule_dlq[0].arn
    }
  }
}

resource "aws_cloudwatch_event_rule" "verify" {
  count               = local.verify_enabled && var.schedule_type == "rule" ? 1 : 0
  name                = local.names.verify_schedule
  description         = "sluice verify of ${var.job}"
  schedule_expression = var.verify_schedule_expression
  state               = var.schedule_enabled ? "ENABLED" : "DISABLED"
  tags                = var.tags
}

resource "aws_cloudwatch_event_target" "verify" {
  count = local.verify_enabled && var.schedule_type == "rule" ? 1 : 0
  rule  = aws_cloudwatch_event_rule.verify[0].name
  arn   = aws_lambda_function.drain.arn
  input = jsonencode({ action = "verify" })
}

resource "aws_lambda_permission" "verify" {
  count          = local.verify_enabled && var.schedule_type == "rule" ? 1 : 0
  statement_id   = "sluice-verify-schedule"
  action         = "lambda:InvokeFunction"
  function_name  = aws_lambda_function.drain.function_name
  principal      = "events.amazonaws.com"
  source_arn     = aws_cloudwatch_event_rule.verify[0].arn
  source_account = local.account_id
}
