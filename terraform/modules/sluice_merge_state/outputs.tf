output "definition" {
  description = "The state machine definition (Amazon States Language JSON): Drain, then — when the drain's summary says `rows` > 0 — one Athena `startQueryExecution.sync` state per table running its MERGE. null when `merge` is null."
  value       = local.definition
}
