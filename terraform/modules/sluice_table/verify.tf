# The stream's verify (docs/verify.md): on its own schedule (default weekly) the drain
# function is invoked with `{"action": "verify"}` and compares every table in the lake with
# the source. It runs on the drain function because it needs what a drain needs (the
# source and its secret, the job's lease and checkpoint: it drains to bring the lake past
# its reads) and writes only what a drain writes (with `"repair": true`, which the schedule
# never sends). A tick that meets a running drain is throttled by the function's reserved
# concurrency and retried by the schedule. verify = false: none of this.
#
# verify_parallel = N: the schedule starts the verify walker instead
# (infra/stepfunctions/verify.asl.json), which runs on the baseline worker function (it
# reads the source in key-range chunks, as a baseline does): up to N chunk tasks at once,
# each comparing one key range with the lake's share of it, then one finish task that
# re-checks, drains and reports — so a table too big for one invocation is verified.

locals {
  verify_enabled     = var.verify
  verify_fan_out     = var.verify && var.verify_parallel != null
  verify_machine_arn = "arn:${local.partition}:states:${local.region}:${local.account_id}:stateMachine:${local.names.verify_machine}"
  # src/verify/walk.rs WALK_FOLDER: the walk's plan, chunk list, chunk results and reports.
  verify_walks_arn = "${var.stack.bucket_arn}/${local.prefix}/_verify/*"
  # What the verify schedule starts, and with what.
  verify_target_arn   = local.verify_fan_out ? local.verify_machine_arn : aws_lambda_function.drain.arn
  verify_target_input = local.verify_fan_out ? jsonencode({ parallel = var.verify_parallel }) : jsonencode({ action = "verify" })
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
    arn      = local.verify_target_arn
    role_arn = aws_iam_role.scheduler[0].arn
    input    = local.verify_target_input

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

# ---------------------------------------------------------------- the verify walker

resource "aws_cloudwatch_log_group" "verify_machine" {
  count             = local.verify_fan_out ? 1 : 0
  name              = local.names.verify_machine_log_group
  retention_in_days = var.log_retention_days
  kms_key_id        = var.stack.kms_key_arn
  tags              = var.tags
}

resource "aws_sfn_state_machine" "verify" {
  #checkov:skip=CKV_AWS_284:the tasks emit no X-Ray segments; execution history and the ERROR-level log are the trace
  count    = local.verify_fan_out ? 1 : 0
  name     = local.names.verify_machine
  role_arn = aws_iam_role.verify_machine[0].arn
  type     = "STANDARD"
  definition = templatefile(
    "${path.module}/../../../infra/stepfunctions/verify.asl.json",
    { function_arn = aws_lambda_function.worker[0].arn },
  )

  logging_configuration {
    log_destination        = "${aws_cloudwatch_log_group.verify_machine[0].arn}:*"
    include_execution_data = true
    level                  = "ERROR"
  }

  tags = var.tags

  lifecycle {
    precondition {
      condition     = var.schedule_type == "scheduler"
      error_message = "verify_parallel needs schedule_type = \"scheduler\" (the schedule starts the verify machine)."
    }
    precondition {
      condition     = var.baseline_state_machine
      error_message = "verify_parallel needs baseline_state_machine = true: the walk runs on the baseline worker function."
    }
    precondition {
      condition     = var.verify_parallel <= local.worker_concurrency
      error_message = "verify_parallel exceeds the baseline worker's reserved concurrency (baseline_worker_concurrency, default baseline.parallel): the extra chunk tasks would only be throttled."
    }
    postcondition {
      condition     = self.arn == local.verify_machine_arn
      error_message = "The verify machine's ARN differs from the one the schedule's role may start."
    }
  }

  depends_on = [aws_iam_role_policy.verify_machine]
}

# Its role's policy is the worker machines' one (iam.tf, `worker_machine["verify"]`): invoke
# the worker, read the chunk lists under `_verify/`, run its own child executions, deliver
# its log.
resource "aws_iam_role" "verify_machine" {
  count                = local.verify_fan_out ? 1 : 0
  name                 = local.names.verify_machine_role
  description          = "sluice verify walker of ${var.job}"
  assume_role_policy   = data.aws_iam_policy_document.assume_own_machine["verify"].json
  path                 = var.iam_role_path
  permissions_boundary = var.permissions_boundary_arn
  tags                 = var.tags
}

resource "aws_iam_role_policy" "verify_machine" {
  count  = local.verify_fan_out ? 1 : 0
  name   = "sluice"
  role   = aws_iam_role.verify_machine[0].id
  policy = data.aws_iam_policy_document.worker_machine["verify"].json
}
