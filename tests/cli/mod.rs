//! The binary as an operator meets it: configs (`validate`, `init`, the Terraform
//! modules' rendered configs), exit codes with a closed stdout, and claims that keep two
//! jobs off one source, and `sluice sql`; a source that never answers (`black_hole`).

mod black_hole;
mod claims;
mod init;
mod materialize;
mod not_writable;
mod output;
mod paths;
mod preflight;
mod recovery;
mod sql;
mod status;
mod terraform;
mod validate_corpus;
