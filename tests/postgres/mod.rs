//! What only the PostgreSQL source does or refuses (slots, publications, replica identity,
//! TOAST, its types, TLS, faults, doctor, the oracle engine). Behaviour every engine shares
//! is in `conformance::source`.

mod baseline;
mod dated;
mod ddl;
mod doctor;
mod drain;
mod durability;
mod failover;
mod faults;
mod keyless;
mod killed;
mod memory_budget;
mod ndjson;
pub mod oracle;
mod orphan_backend;
mod pgvector;
mod policy;
mod postgis;
mod progress;
mod rebaseline;
mod security;
mod standby;
mod types_every;
mod unfit;
