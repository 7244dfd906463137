# Each stream's sluice_table inputs: the stream's own settings over the shared defaults,
# tags merged (fleet, defaults, stream) plus `job`. Pure expressions: tests/cli/terraform.rs
# evaluates this file offline to render every stream's SLUICE_CONFIG.

locals {
  streams = {
    for job, t in var.tables : job => merge(var.defaults, t, {
      job  = job
      tags = merge(var.tags, lookup(var.defaults, "tags", {}), lookup(t, "tags", {}), { job = job })
    })
  }
}
