//! The baseline reader of a job with column policies or row filters (docs/privacy.md):
//! any engine's reader, with each table's policy applied to its shape and rows.
//!
//! Guarantees: a table's policy is checked against its columns when the reader opens
//! (`SLUICE_CONFIG_POLICY` before a row is read); the engine is asked to read excluded
//! columns as NULL and to filter at the source where it can ([`ReadScope`]: PostgreSQL
//! the whole filter, the server being the authority its publication is too; MySQL /
//! MariaDB the part its collations cannot loosen); every row is then filtered by sluice
//! where the source's evaluation is not the authority, and transformed, before the sink
//! sees it — so the snapshot parts hold only the policy's output. A table with a policy
//! has its chunk bounds sealed ([`crate::policy::seal`]) when a hash key is configured:
//! the plan and the Step Functions chunk list never carry its raw key values.

use std::sync::Arc;

use async_trait::async_trait;

use super::baseline_read::{BaselineReader, ChunkBounds, ReadScope, RowSink};
use crate::change::TableSchema;
use crate::config::Engine;
use crate::error::Result;
use crate::policy::Policies;
use crate::policy::filter::Verdict;
use crate::position::Position;

/// A baseline reader applying the job's policies.
pub struct PolicyReader {
    inner: Box<dyn BaselineReader>,
    policies: Arc<Policies>,
}

impl PolicyReader {
    /// `inner` with `policies` applied to `tables`, or `inner` itself when no table has a
    /// policy.
    pub fn wrap(
        mut inner: Box<dyn BaselineReader>,
        policies: Arc<Policies>,
        engine: Engine,
        tables: &[String],
    ) -> Result<Box<dyn BaselineReader>> {
        if policies.is_empty() {
            return Ok(inner);
        }
        for table in tables.iter().filter(|t| policies.touches(t)) {
            let schema = inner.schema(table)?;
            policies.check(&schema)?;
            let filter = policies.filter(&schema)?;
            let scope = ReadScope {
                nulled: policies
                    .excluded(&schema)
                    .into_iter()
                    .map(str::to_owned)
                    .collect(),
                filter: match engine {
                    Engine::Postgres => filter.map(|f| f.postgres()),
                    Engine::MySql => filter.and_then(|f| f.pushdown_mysql()),
                    Engine::SqlServer => None,
                },
            };
            inner.restrict(table, scope)?;
        }
        Ok(Box::new(PolicyReader { inner, policies }))
    }

    fn output(&self, schema: Arc<TableSchema>) -> Result<Arc<TableSchema>> {
        if !self.policies.touches(&schema.name) {
            return Ok(schema);
        }
        Ok(self.policies.plan(&schema)?.output.clone())
    }

    /// Bounds sealed (`seal`) or opened, for a table with a policy and a hash key.
    fn bounds(
        &self,
        table: &str,
        bounds: &ChunkBounds,
        f: impl Fn(&crate::policy::hash::Hasher, &str) -> Result<String>,
    ) -> Result<ChunkBounds> {
        let Some(hasher) = self
            .policies
            .hasher()
            .filter(|_| self.policies.touches(table))
        else {
            return Ok(bounds.clone());
        };
        let each = |values: &Option<Vec<String>>| -> Result<Option<Vec<String>>> {
            values
                .as_ref()
                .map(|v| v.iter().map(|s| f(hasher, s)).collect())
                .transpose()
        };
        Ok(ChunkBounds {
            lower: each(&bounds.lower)?,
            upper: each(&bounds.upper)?,
        })
    }
}

#[async_trait]
impl BaselineReader for PolicyReader {
    fn schema(&self, table: &str) -> Result<Arc<TableSchema>> {
        self.output(self.inner.schema(table)?)
    }

    async fn current_schema(&mut self, table: &str) -> Result<Arc<TableSchema>> {
        let schema = self.inner.current_schema(table).await?;
        self.output(schema)
    }

    fn restrict(&mut self, table: &str, scope: ReadScope) -> Result<()> {
        self.inner.restrict(table, scope)
    }

    async fn plan(&mut self, table: &str, chunk_rows: u64) -> Result<Vec<ChunkBounds>> {
        let planned = self.inner.plan(table, chunk_rows).await?;
        planned
            .iter()
            .map(|b| self.bounds(table, b, crate::policy::seal::seal))
            .collect()
    }

    async fn snapshot_point(&mut self, table: &str, anchor: &Position) -> Result<Option<Position>> {
        self.inner.snapshot_point(table, anchor).await
    }

    async fn pin_read(&mut self, table: &str, floor: &Position) -> Result<Option<Position>> {
        self.inner.pin_read(table, floor).await
    }

    async fn end_pinned_read(&mut self) -> Result<()> {
        self.inner.end_pinned_read().await
    }

    async fn read_chunk(
        &mut self,
        table: &str,
        bounds: &ChunkBounds,
        rows: &mut RowSink<'_>,
    ) -> Result<u64> {
        let bounds = self.bounds(table, bounds, crate::policy::seal::unseal)?;
        if !self.policies.touches(table) {
            return self.inner.read_chunk(table, &bounds, rows).await;
        }
        let plan = self.policies.plan(&self.inner.schema(table)?)?;
        let on_rows = self.policies.filters_on_rows();
        let mut written = 0u64;
        let mut sink = |values: Vec<crate::change::Value>| {
            if on_rows && plan.verdict(&values, &[]) != Verdict::In {
                return Ok(());
            }
            written += 1;
            rows(plan.image(values))
        };
        self.inner.read_chunk(table, &bounds, &mut sink).await?;
        Ok(written)
    }
}
