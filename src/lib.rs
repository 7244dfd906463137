//! sluice: change data capture as a scheduled function.
//!
//! Each run drains a database's change log from its checkpoint up to the log's end as of
//! the run's start, writes typed Parquet parts with manifests, advances the checkpoint
//! under a fenced single-writer lease, and exits. `README.md` and `docs/` describe the contract.
//!
//! Rooms and the direction of imports (`docs/development.md` has the map; a test in
//! `tests/` fails on any cycle, between rooms or between files): faces (`cli`, `lambda`,
//! `doctor`, `init`, `validate`, `replay` — `sluice sql` —, `status`, `recovery`) →
//! `verify` (a table in the lake compared with the source; it runs drains through `job`) →
//! `job` (claims → baseline if due → drain) → `drain`, `baseline`, `compaction` (small
//! covered parts rewritten into few large ones, beside the drain), `materialize`
//! (current-state tables folded from the parts), `forget` (a deleted key's rows erased
//! from every file of a table, on compaction's steps) → `commit` (the one
//! owner of part → fenced checkpoint → ack), `iceberg` (durable parts committed to
//! Iceberg tables before the checkpoint), `backends` → `source` (the contracts; one folder
//! per engine), `parts` (Parquet parts and their manifests), `destination`, `state`, `claims`, `secret`,
//! `registration` (Glue registration at a run's end), `lake` (reading a table folder back: its
//! shape, its data files), `fold` (the replay rule executed on Arrow rows) → `spill` (memory and disk budgets, spill
//! files and their sweep; below both the part writers and the engines, which never import
//! `parts`) → core types and services (`config`, `policy` — column policies and row filters,
//! applied where rows are decoded —, `faults`, `change`, `position`, `framer`,
//! `summary`, `metrics`, `error`, `redact`, `tls`, `aws`, `arn`, `run_id`, `progress`,
//! `allocator`).

pub mod allocator;
pub mod arn;
pub mod aws;
pub mod backends;
pub mod baseline;
pub mod change;
pub mod claims;
pub mod cli;
pub mod commit;
pub mod compaction;
pub mod config;
pub mod destination;
pub mod doctor;
pub mod drain;
pub mod error;
pub mod faults;
pub mod fold;
pub mod forget;
pub mod framer;
pub mod iceberg;
pub mod init;
pub mod job;
pub mod lake;
pub mod lambda;
pub mod materialize;
pub mod metrics;
pub mod parts;
pub mod policy;
pub mod position;
pub mod progress;
pub mod recovery;
pub mod redact;
pub mod registration;
pub mod replay;
pub mod run_id;
pub mod secret;
pub mod source;
pub mod spill;
pub mod state;
pub mod status;
pub mod summary;
pub mod tls;
pub mod validate;
pub mod verify;
