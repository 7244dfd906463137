# Pure expressions, no providers: this module also evaluates under the offline
# Terraform 1.0 used by the checks (tests/cli/terraform.rs), so it avoids newer syntax
# such as optional() object attributes.
terraform {
  required_version = ">= 1.0.0"
}
