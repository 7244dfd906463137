# The drain-then-MERGE state machine's definition, as pure expressions (no providers), so
# tests/cli/terraform.rs renders it offline: with `merge` set it has one Athena MERGE
# state per table after the drain; with `merge` null there is no definition at all.

locals {
  tables = var.merge == null ? [] : sort(keys(var.merge.statements))
  merges = {
    for i, table in local.tables : "Merge${i}" => {
      Type     = "Task"
      Comment  = "The current-state MERGE of ${table}"
      Resource = "arn:aws:states:::athena:startQueryExecution.sync"
      Parameters = merge(
        { QueryString = var.merge.statements[table], WorkGroup = var.merge.workgroup },
        var.merge.output_location == null ? {} : { ResultConfiguration = { OutputLocation = var.merge.output_location } },
      )
      # A MERGE that lost an Iceberg commit race (ICEBERG_COMMIT_ERROR) is safe to run
      # again: the watermark row moves only with the data.
      Retry = [{ ErrorEquals = ["States.TaskFailed"], IntervalSeconds = 30, BackoffRate = 2, MaxAttempts = 2 }]
      Next  = i + 1 < length(local.tables) ? "Merge${i + 1}" : "Done"
    }
  }
  states = merge(
    {
      Drain = {
        Type       = "Task"
        Resource   = "arn:aws:states:::lambda:invoke"
        Parameters = { FunctionName = var.drain_function_arn, Payload = { action = "drain" } }
        # The drain's run summary; its `rows` decides whether anything is merged.
        ResultSelector = { "summary.$" = "$.Payload" }
        ResultPath     = "$.drain"
        Next           = "WroteRows"
      }
      WroteRows = {
        Type = "Choice"
        Choices = [{
          And = [
            { Variable = "$.drain.summary.rows", IsPresent = true },
            { Variable = "$.drain.summary.rows", NumericGreaterThan = 0 },
          ]
          Next = "Merge0"
        }]
        Default = "Done"
      }
      Done = { Type = "Succeed" }
    },
    local.merges,
  )
  definition = var.merge == null ? null : jsonencode({
    Comment = "sluice drain, then the current-state MERGE of each table in Athena when the drain wrote rows (docs/iceberg.md)."
    StartAt = "Drain"
    States  = local.states
  })
}
