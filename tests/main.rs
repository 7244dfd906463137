//! The one integration test binary (`autotests = false` in Cargo.toml): every suite is a
//! module here, so `support` and `oracle` compile once. Run one suite or test by its
//! module path: `cargo test --test integration postgres::drain::`, or
//! `cargo test --test integration -- --exact conformance::source::mysql::oracle`.
//!
//! * `conformance` — one set of cases run against every implementation: the source suite
//!   per live engine (PostgreSQL, MariaDB), the destination and state store suites per
//!   backend.
//! * `postgres`, `mysql`, `mssql` — what only one source engine does or refuses.
//! * `aws` — S3, DynamoDB, Secrets Manager, Step Functions and the Lambda face (moto).
//! * `cli` — configs (validate, init, Terraform), exit codes and output, claims.
//! * `compaction` — `sluice compact` on both engines, local and S3: crashes at every
//!   fault point, readers and drains beside it, corrupt parts.
//! * `architecture` — the import direction of `src/`; `docs_links` — every relative link
//!   of README.md and docs/ resolves.
//!
//! Services come from `make services` (`eval "$(infra/local/services.sh env)"`); a test
//! whose service is missing fails under `CI=true` and says SKIPPED on the terminal
//! otherwise. Tests that need a service no CI machine has are `#[ignore]`d with the reason.

#[macro_use]
mod support;
mod oracle;

mod architecture;
mod aws;
mod cli;
mod compaction;
mod conformance;
mod docs_links;
mod forget;
mod iceberg;
mod mssql;
mod mysql;
mod postgres;
mod verify;
