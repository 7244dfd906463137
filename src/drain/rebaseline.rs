//! The one place a drain asks for a table's re-baseline: a change it cannot carry in
//! place (a shape the parts cannot continue, rows changed without row changes), or a
//! value its column's typed form cannot hold (the column moves to its text form).
//!
//! Guarantees: the ask is recorded in the state store (`state::rebaseline::request`)
//! before anything after the asking change is checkpointed, and from then on the run
//! writes none of the table's changes (the new baseline, anchored at the run's
//! checkpoint, is after every change not written); the other tables go on. A table is
//! asked for once per run, except that each column moved to its text form is recorded
//! with its own ask, so the table's new baseline reads every such column as text. The
//! tables whose re-baseline a run wanted before it started are skipped from the start.

use std::collections::BTreeMap;

use super::tables::Router;
use crate::change::UnfitValue;
use crate::config::Config;
use crate::error::{Code, Result};
use crate::position::Position;
use crate::state::StateStore;
use crate::state::rebaseline::{Ask, Asker};
use crate::summary::Rebaselined;

/// Why a table is re-baselined.
pub enum Why<'a> {
    /// One of its changes cannot be carried in place.
    Changed(&'a str),
    /// A value of `UnfitValue::column` does not fit the column's typed form.
    Unfit(&'a UnfitValue),
}

/// The re-baselines a run asks for.
pub struct Rebaselines<'a> {
    config: &'a Config,
    state: &'a dyn StateStore,
    /// Every table this run asked for, as the run summary reports it.
    pub asked: BTreeMap<String, Rebaselined>,
}

impl<'a> Rebaselines<'a> {
    pub fn new(config: &'a Config, state: &'a dyn StateStore) -> Self {
        Rebaselines {
            config,
            state,
            asked: BTreeMap::new(),
        }
    }

    /// Skips every table whose re-baseline is wanted already (an earlier run asked, or an
    /// operator did): its changes are not written until it is anchored.
    pub async fn skip_wanted(&self, router: &mut Router) -> Result<()> {
        let wanted = crate::state::rebaseline::wanted(
            self.state,
            &self.config.job,
            &self.config.source.tables,
        )
        .await?;
        for record in wanted {
            tracing::info!(table = %record.table, reason = ?record.reason,
                "the table's re-baseline is wanted: its changes are not written until it is anchored");
            router.skipped.insert(record.table);
        }
        Ok(())
    }

    /// Asks for `table`'s re-baseline because of `why`, at `at` (the commit position of
    /// the transaction the asking change is in), and stops writing the table's changes.
    /// A table already asked for is not asked again, unless `why` moves another of its
    /// columns to its text form: then the column is recorded with the ask.
    pub async fn ask(
        &mut self,
        router: &mut Router,
        table: &str,
        at: Option<Position>,
        why: Why<'_>,
    ) -> Result<()> {
        let (reason, text_column) = match why {
            Why::Changed(reason) => {
                if router.skipped.contains(table) {
                    return Ok(());
                }
                (reason.to_owned(), None)
            }
            Why::Unfit(unfit) => {
                let moved = (unfit.table.clone(), unfit.column.clone());
                if router.moved_to_text.contains(&moved) {
                    return Ok(());
                }
                router.skipped.remove(table);
                router.moved_to_text.insert(moved);
                let reason = format!("{unfit}; the column moves to its text form");
                (reason, Some(unfit.column.as_str()))
            }
        };
        let at = at.map(|p| p.to_string()).unwrap_or_default();
        tracing::warn!(code = Code::SourceTableRebaselined.as_str(), table = %table, at = %at, reason = %reason,
            "a change of the table cannot be carried in place: the table alone is re-baselined after this run; the other tables go on");
        let ask = Ask {
            table,
            at: &at,
            reason: &reason,
            asker: Asker::Drain,
            text_column,
        };
        crate::state::rebaseline::request(
            self.state,
            &self.config.job,
            &self.config.source.tables,
            ask,
        )
        .await?;
        router.skipped.insert(table.to_owned());
        let asked = Rebaselined {
            reason,
            at,
            baseline: "pending".to_owned(),
        };
        self.asked.insert(table.to_owned(), asked);
        Ok(())
    }
}
