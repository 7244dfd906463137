//! What only the MySQL / MariaDB source does or refuses (the binlog, its settings, server
//! ids, its types, TLS, faults, doctor, the oracle engine). Behaviour every engine shares
//! is in `conformance::source`.

mod baseline;
mod dated;
mod doctor;
mod drain;
mod durability;
mod failover;
mod faults;
mod keyless;
mod ndjson;
pub mod oracle;
mod policy;
mod schema_history;
mod security;
mod types_every;
