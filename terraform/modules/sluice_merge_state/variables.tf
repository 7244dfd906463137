variable "drain_function_arn" {
  description = "ARN of the stream's drain function, which the machine's first state invokes with `{\"action\": \"drain\"}`."
  type        = string
}

variable "merge" {
  description = "The current-state MERGE after a drain that wrote rows (docs/iceberg.md): `statements` maps each table to the text `sluice sql --merge --dialect athena --table <t>` prints (rendered at deploy time; print it again after a schema change), run in Athena `workgroup`, results under `output_location` (null: the workgroup's). null: no MERGE state (the definition is null)."
  type = object({
    statements      = map(string)
    workgroup       = string
    output_location = string
  })
  default = null
}
