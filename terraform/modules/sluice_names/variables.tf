variable "job" {
  description = "Stream identity (sluice_table's `job`). Every AWS name of the stream derives from it, so it is limited to what the strictest of them accepts: 1-48 letters, digits, '_' or '-' (`sluice-<job>-baseline` is a 64-character Lambda function and IAM role name; Lambda names allow no '.')."
  type        = string
  validation {
    condition     = can(regex("^[A-Za-z0-9_-]{1,48}$", var.job))
    error_message = "The job of a deployed stream must be 1-48 letters, digits, '_' or '-': it names the Lambda functions and IAM roles (`sluice-<job>-baseline`, at most 64 characters, no '.')."
  }
}

variable "function_name" {
  description = "Name of the drain function instead of `sluice-<job>`; every other name derives from it. 1-55 letters, digits, '_' or '-' (room for the `-baseline` / `-schedule` suffixes)."
  type        = string
  default     = null
  validation {
    condition     = var.function_name == null || can(regex("^[A-Za-z0-9_-]{1,55}$", var.function_name))
    error_message = "The function_name must be 1-55 letters, digits, '_' or '-' (room is left for the -baseline and -schedule suffixes within AWS's 64-character limit)."
  }
}
