//! Asking for a per-table re-baseline, and finding the ones pending.
//!
//! A re-baseline is a table's `snapshot#<table>` record anchored anew: first the record
//! becomes `wanted` (with the position and the reason that asked for it) — from then on
//! drains skip the table's changes, which the new snapshot supersedes — then the anchor
//! step (`crate::baseline::tasks::anchor`) replaces it, under the job's lease, by an `anchored`
//! record at the job's checkpoint (`crate::baseline::epoch`), and plan, chunks and finish write a
//! new plan folder whose epoch marker drops every earlier row of the table from the
//! replay. Every other table's record is left untouched.
//!
//! Guarantees: the `wanted` record is one state write, stored before the drain that asked
//! for it checkpoints past the change that asked ([`request`] is awaited where the change
//! is met), so no crash can leave the table's later changes neither written nor
//! superseded; a table whose re-baseline is already anchored and not done is resumed, not
//! started over, when asked again by hand.

use super::{BaselineRecord, BaselineStatus, StateStore};
use crate::error::{Code, Error, Result};

/// Who asked for a re-baseline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asker {
    /// An operator (`sluice baseline --table`, the Lambda action or the state machine's
    /// input): a re-baseline already anchored and not done is resumed.
    Operator,
    /// A drain that met a change it cannot carry in place: always starts over (a
    /// baseline in progress may have read rows of the old shape).
    Drain,
}

/// One request for a re-baseline of `table`, asked at `at` (a tagged position, or a
/// description when the stream has none yet) for `reason`.
#[derive(Debug, Clone, Copy)]
pub struct Ask<'a> {
    pub table: &'a str,
    pub at: &'a str,
    pub reason: &'a str,
    pub asker: Asker,
    /// A column that moves to its text form with this re-baseline (a value did not fit
    /// its typed form); it stays in text form in every later record of the table.
    pub text_column: Option<&'a str>,
}

/// Records that `ask.table` needs a re-baseline. Returns false when an operator's request
/// found a re-baseline of the table in progress (it is resumed).
pub async fn request(
    state: &dyn StateStore,
    job: &str,
    tables: &[String],
    ask: Ask<'_>,
) -> Result<bool> {
    let Ask {
        table,
        at,
        reason,
        asker,
        text_column,
    } = ask;
    if !tables.iter().any(|t| t == table) {
        return Err(Error::new(
            Code::ConfigInvalid,
            format!("table {table:?} is not in source.tables"),
        )
        .hint("name the table exactly as source.tables lists it"));
    }
    let existing = state.load_baseline(job, table).await?;
    if asker == Asker::Operator
        && let Some(record) = &existing
        && matches!(
            record.status,
            BaselineStatus::Anchored | BaselineStatus::Running
        )
        && record.reason.is_some()
    {
        tracing::info!(table = %table, anchor = %record.anchor, "a re-baseline of the table is in progress; resuming it");
        return Ok(false);
    }
    let mut record = BaselineRecord::next(
        table,
        BaselineStatus::Wanted,
        at.to_owned(),
        existing
            .as_ref()
            .map(|r| r.run_id.clone())
            .unwrap_or_default(),
        Some(reason.to_owned()),
        existing.as_ref(),
    );
    record.text_columns.extend(text_column.map(str::to_owned));
    state.replace_snapshot(job, &record).await?;
    Ok(true)
}

/// The records of every table whose re-baseline is wanted and not yet anchored.
pub async fn wanted(
    state: &dyn StateStore,
    job: &str,
    tables: &[String],
) -> Result<Vec<BaselineRecord>> {
    let mut wanted = Vec::new();
    for table in tables {
        if let Some(record) = state.load_baseline(job, table).await?
            && record.status == BaselineStatus::Wanted
        {
            wanted.push(record);
        }
    }
    Ok(wanted)
}

/// The records of every re-baseline not done: wanted, or anchored and not finished.
pub async fn pending(
    state: &dyn StateStore,
    job: &str,
    tables: &[String],
) -> Result<Vec<BaselineRecord>> {
    let mut pending = Vec::new();
    for table in tables {
        if let Some(record) = state.load_baseline(job, table).await?
            && record.reason.is_some()
            && record.status != BaselineStatus::Done
        {
            pending.push(record);
        }
    }
    Ok(pending)
}
