//! The columns captured in their text form because a value did not fit their typed form,
//! as the tables' baseline records keep them ([`super::BaselineRecord::text_columns`]).
//!
//! Guarantees: every reader of a table's rows — the stream and every baseline task — is
//! given the set the state store holds when it starts ([`with_text_columns`]), so a
//! column moved to its text form is read as text by every reader that starts after the
//! move; a reader that started before it meets the value again and asks again (the move
//! is idempotent).

use std::borrow::Cow;

use super::StateStore;
use crate::config::{Config, TextColumns};
use crate::error::Result;

/// The text-form columns of every captured table that has any.
pub async fn load(state: &dyn StateStore, job: &str, tables: &[String]) -> Result<TextColumns> {
    let mut columns = TextColumns::new();
    for table in tables {
        if let Some(record) = state.load_baseline(job, table).await?
            && !record.text_columns.is_empty()
        {
            columns.insert(table.clone(), record.text_columns);
        }
    }
    Ok(columns)
}

/// `config` with `source.text_columns` as the state store holds them now.
pub async fn with_text_columns<'a>(
    config: &'a Config,
    state: &dyn StateStore,
) -> Result<Cow<'a, Config>> {
    let columns = load(state, &config.job, &config.source.tables).await?;
    if columns == config.source.text_columns {
        return Ok(Cow::Borrowed(config));
    }
    let mut config = config.clone();
    config.source.text_columns = columns;
    Ok(Cow::Owned(config))
}
