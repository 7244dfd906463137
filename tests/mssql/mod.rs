//! SQL Server: config and connection checks that need no server, and the live suite
//! (`#[ignore]`d unless `SLUICE_TEST_MSSQL_URL` names a server; `make test` runs it then).

mod live;
mod offline;
