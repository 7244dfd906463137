//! sluice: change data capture as a scheduled function.
//!
//! Each run drains a database's change log from its checkpoint up to the log's end as of
//! the run's start, writes typed Parquet parts with manifests, advances the checkpoint
//! under a fenced single-writer lease, and exits. See `DESIGN.md` for the contract.

pub mod aws;
pub mod baseline;
pub mod change;
pub mod claims;
pub mod cli;
pub mod config;
pub mod destination;
pub mod doctor;
pub mod drain;
pub mod error;
pub mod framer;
pub mod init;
pub mod lambda;
pub mod metrics;
pub mod position;
pub mod progress;
pub mod redact;
pub mod run_id;
pub mod secret;
pub mod sink;
pub mod source;
pub mod state;
pub mod tls;
pub mod validate;
