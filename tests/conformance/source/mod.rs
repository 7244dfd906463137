//! The source conformance suite: one set of behavioural cases — drain, crash safety,
//! baseline, the correctness oracle — run against every live source engine. A case is a
//! function generic over [`Engine`]; [`source_conformance!`] instantiates each case once
//! per engine, as `conformance::source::postgres::<case>` (PostgreSQL 15),
//! `conformance::source::postgres18::<case>` (PostgreSQL 18) and
//! `conformance::source::mysql::<case>`.
//!
//! An engine says how to make a database and a table, how to write rows in bulk, how a
//! job's config names its source, and the few facts in which engines differ on purpose
//! (what a delete's old image holds, the type it cannot capture, the value Arrow cannot
//! hold, the form of its positions). Everything else a case asserts holds for every
//! engine; what only one engine does stays in `postgres::*` / `mysql::*`. SQL Server is
//! not here: its live suite cannot run on the project's machines (`mssql::live`).

mod baseline;
mod drain;
mod durability;
mod engines;
mod layout;
mod oracle;
mod policy;

use crate::support::Job;

/// What a delete's old row image carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OldImage {
    /// Only the key (PostgreSQL's default replica identity): the other columns of a delete
    /// are null and listed in `__unlogged`.
    KeyOnly,
    /// Every column (MariaDB's FULL row image).
    WholeRow,
}

/// One live source engine, as the cases drive it: one database per test, dropped at the
/// end, and jobs that drain it into a local directory with local state.
pub trait Engine: Sized + 'static {
    /// The module the cases are instantiated in (`postgres`, `mysql`): test paths are
    /// `conformance::source::<MODULE>::<case>`.
    const MODULE: &'static str;
    /// The variable naming the server's admin URL (set by `infra/local/services.sh env`).
    const URL_VAR: &'static str;
    /// The oracle's time budget on this engine when `SLUICE_ORACLE_BUDGET_SECS` is unset.
    const ORACLE_BUDGET_SECS: u64;
    /// A column type for short text values (up to 40 characters).
    const TEXT: &'static str;
    /// The integer key type of the chunked-baseline cases (MariaDB: unsigned, so its
    /// unsigned bounds are planned too).
    const KEY_INT: &'static str;
    /// A column type the engine cannot capture: a drain refuses it at open. `None` for an
    /// engine that captures every type (PostgreSQL: its text form, at worst).
    const UNSUPPORTED_TYPE: Option<&'static str>;
    /// What a delete's old image carries.
    const OLD_IMAGE: OldImage;

    /// A fresh database for `test` on the server at `admin`.
    fn create(admin: &str, test: &str) -> Self;
    /// Runs SQL (several statements allowed) in the test database; panics on failure.
    fn sql(&self, sql: &str) -> String;
    /// A function that runs SQL in the test database from another thread (a writer
    /// running while a baseline reads).
    fn writer(&self) -> Box<dyn Fn(&str) + Send>;
    /// `CREATE TABLE <table> (<columns>)` in the engine's dialect.
    fn create_table(&self, table: &str, columns: &str) {
        self.sql(&format!("CREATE TABLE {table} ({columns})"));
    }
    /// Makes `table` log whole old rows for UPDATEs and DELETEs (PostgreSQL: `REPLICA
    /// IDENTITY FULL`, which a publication row filter over non-key columns needs;
    /// MariaDB's row images are whole already).
    fn log_whole_rows(&self, table: &str) {
        let _ = table;
    }
    /// Inserts `(i, '<prefix>' || i)` for `i` in `1..=n` into `<table> (id, v)` in one
    /// statement, then refreshes the planner's statistics (baselines size their chunks
    /// from them).
    fn insert_series(&self, table: &str, n: u64, prefix: &str);
    /// The statement changing `table.column`'s type to `ty` (NOT NULL, default 7).
    fn retype(table: &str, column: &str, ty: &str) -> String;
    /// An insert of `(id, v)` into `table` that sets `v = again` when the key exists.
    fn upsert(table: &str, id: u64, v: &str, again: &str) -> String;
    /// `<table> (id, v)` as `id=v,…` in id-text order (`NULL` for a null `v`), the form
    /// of `support::replayed_text` with key `id`.
    fn id_v_text(&self, table: &str) -> String;
    /// `table` qualified by its schema (PostgreSQL `public.t`) or database (`<db>.t`), as
    /// a config may name it; parts go to a directory of that name.
    fn qualified(&self, table: &str) -> String;
    /// A job on this database capturing `tables`, with `extra` YAML appended.
    fn job(&self, tables: &[&str], extra: &str) -> Job;
    /// A column type, the SQL writing `(1, <value>)` into `t (id, v)` where the value has
    /// no form in the column's typed output (PostgreSQL's NaN in a `numeric(p,s)`), and
    /// the value's text form; `None` when the engine has none (MariaDB: every value has a
    /// form).
    fn unrepresentable() -> Option<(&'static str, &'static str, &'static str)>;
    /// Asserts the engine's form of a change row's `__pos` and of a summary's `to`.
    fn assert_position_forms(pos: &str, checkpoint: &str);
    /// The correctness oracle's adapter for this engine.
    fn oracle(admin: String) -> Box<dyn crate::oracle::trial::Engine>;

    /// The admin URL, or `None` when the service is not configured (the test is skipped,
    /// saying so; under CI it fails).
    fn admin() -> Option<String> {
        crate::support::service_url(Self::URL_VAR)
    }

    /// A fresh database for `test`, or `None` (skipped) without a server.
    fn for_test(test: &str) -> Option<Self> {
        Self::admin().map(|admin| Self::create(&admin, test))
    }
}

/// One `#[test]` per case and engine: `module::case` names a function generic over
/// [`Engine`].
macro_rules! source_conformance {
    ($($module:ident :: $case:ident),* $(,)?) => {
        /// The cases against PostgreSQL 15 (`SLUICE_TEST_PG_URL`).
        mod postgres {
            use super::engines::{Pg15, Postgres};
            $(#[test] fn $case() { super::$module::$case::<Postgres<Pg15>>(); })*
        }
        /// The cases against PostgreSQL 18 (`SLUICE_TEST_PG18_URL`).
        mod postgres18 {
            use super::engines::{Pg18, Postgres};
            $(#[test] fn $case() { super::$module::$case::<Postgres<Pg18>>(); })*
        }
        /// The cases against MariaDB (`SLUICE_TEST_MYSQL_URL`).
        mod mysql {
            $(#[test] fn $case() { super::$module::$case::<super::engines::Mariadb>(); })*
        }
    };
}

source_conformance!(
    drain::insert_update_delete_are_captured_in_commit_order,
    drain::primary_key_update_is_split_into_delete_and_insert,
    drain::resume_captures_only_new_changes_and_idle_runs_move_the_checkpoint,
    drain::truncate_of_a_captured_table_is_an_event,
    drain::unsupported_column_type_fails_at_open_naming_the_column,
    drain::an_unrepresentable_value_moves_its_column_to_text_never_null,
    drain::lease_held_by_another_run_is_skipped_with_exit_zero,
    durability::crash_after_part_durable_loses_nothing,
    durability::crash_mid_upload_loses_nothing,
    durability::crash_before_checkpoint_loses_nothing,
    durability::crash_after_checkpoint_written_loses_nothing,
    durability::crash_after_source_acked_loses_nothing,
    durability::a_killed_first_run_keeps_its_start,
    baseline::baseline_with_concurrent_writes_and_drains_replays_to_the_exact_source_state,
    baseline::crashed_baseline_resumes_with_only_the_remaining_chunks,
    baseline::drain_with_initial_snapshot_baselines_first_then_streams,
    baseline::a_column_renamed_between_baseline_chunks_restarts_the_baseline,
    baseline::a_column_retyped_during_a_chunk_read_restarts_the_baseline,
    baseline::a_rebaseline_in_progress_reads_as_the_last_complete_snapshot,
    baseline::unrepresentable_values_move_the_column_to_text_and_the_baseline_reads_again,
    layout::a_table_folder_reads_as_data_only_with_pyarrow_and_duckdb,
    oracle::oracle,
    policy::every_policy_kind_and_a_row_filter_replay_the_policy_applied_source,
    policy::a_policy_change_rebaselines_that_table_alone,
);
