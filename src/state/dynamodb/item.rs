//! The item encoding of the state table (the layout documented in the parent module):
//! sort keys, attribute encoders, and typed decoders that report a wrong or missing
//! attribute as `SLUICE_STATE_CORRUPT`, naming table, item and attribute.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

use crate::error::{Code, Error, Result};
use crate::state::{BaselineRecord, BaselineStatus, Checkpoint, ChunkRecord, RunRecord};

/// Sort key of the item holding the lease and the checkpoint.
pub const JOB_SK: &str = "job";
/// The TTL attribute of run records.
pub const TTL_ATTRIBUTE: &str = "expires_at";

pub(super) type Item = HashMap<String, AttributeValue>;

/// The primary key of item `sk` of `job`.
pub(super) fn key(job: &str, sk: &str) -> Item {
    HashMap::from([
        ("pk".to_owned(), AttributeValue::S(job.to_owned())),
        ("sk".to_owned(), AttributeValue::S(sk.to_owned())),
    ])
}

pub(super) fn corrupt(table: &str, job: &str, sk: &str, problem: &str) -> Error {
    Error::new(
        Code::StateCorrupt,
        format!("DynamoDB table {table}, item pk={job} sk={sk}: {problem}"),
    )
    .hint("the item was not written by this version of sluice; restore it from a backup (point-in-time recovery), or delete the job's items and re-baseline")
}

pub(super) fn number(n: impl std::fmt::Display) -> AttributeValue {
    AttributeValue::N(n.to_string())
}

/// Typed access to an item's attributes; a wrong type is `SLUICE_STATE_CORRUPT`.
pub(super) struct Fields<'a> {
    item: &'a Item,
    table: &'a str,
    job: &'a str,
    sk: &'a str,
}

impl<'a> Fields<'a> {
    pub(super) fn new(item: &'a Item, table: &'a str, job: &'a str, sk: &'a str) -> Self {
        Fields {
            item,
            table,
            job,
            sk,
        }
    }

    pub(super) fn bad(&self, name: &str, what: &str) -> Error {
        corrupt(
            self.table,
            self.job,
            self.sk,
            &format!("attribute {name} {what}"),
        )
    }

    pub(super) fn opt_s(&self, name: &str) -> Result<Option<String>> {
        opt_s(self.item, name).map_err(|what| self.bad(name, what))
    }

    pub(super) fn s(&self, name: &str) -> Result<String> {
        self.opt_s(name)?
            .ok_or_else(|| self.bad(name, "is missing"))
    }

    pub(super) fn opt_n<T: std::str::FromStr>(&self, name: &str) -> Result<Option<T>> {
        opt_n(self.item, name).map_err(|what| self.bad(name, what))
    }

    pub(super) fn n<T: std::str::FromStr>(&self, name: &str) -> Result<T> {
        self.opt_n(name)?
            .ok_or_else(|| self.bad(name, "is missing"))
    }

    /// A string set; absent (DynamoDB stores no empty set) is empty.
    pub(super) fn string_set(&self, name: &str) -> Result<std::collections::BTreeSet<String>> {
        match self.item.get(name) {
            None | Some(AttributeValue::Null(_)) => Ok(Default::default()),
            Some(AttributeValue::Ss(set)) => Ok(set.iter().cloned().collect()),
            Some(_) => Err(self.bad(name, "is not a string set")),
        }
    }

    pub(super) fn map(&self, name: &str) -> Result<Option<Fields<'a>>> {
        match self.item.get(name) {
            None | Some(AttributeValue::Null(_)) => Ok(None),
            Some(AttributeValue::M(inner)) => {
                Ok(Some(Fields::new(inner, self.table, self.job, self.sk)))
            }
            Some(_) => Err(self.bad(name, "is not a map")),
        }
    }
}

pub(super) fn opt_s(item: &Item, name: &str) -> std::result::Result<Option<String>, &'static str> {
    match item.get(name) {
        None | Some(AttributeValue::Null(_)) => Ok(None),
        Some(AttributeValue::S(s)) => Ok(Some(s.clone())),
        Some(_) => Err("is not a string"),
    }
}

pub(super) fn opt_n<T: std::str::FromStr>(
    item: &Item,
    name: &str,
) -> std::result::Result<Option<T>, &'static str> {
    match item.get(name) {
        None | Some(AttributeValue::Null(_)) => Ok(None),
        Some(AttributeValue::N(n)) => n.parse().map(Some).map_err(|_| "is not an integer"),
        Some(_) => Err("is not a number"),
    }
}

/// The `job` item, parsed.
#[derive(Debug, Default)]
pub(super) struct JobItem {
    pub(super) format_version: u32,
    pub(super) lease_token: u64,
    pub(super) lease_owner: Option<String>,
    pub(super) lease_expires_at_ms: Option<i64>,
    pub(super) checkpoint: Option<Checkpoint>,
}

impl JobItem {
    pub(super) fn parse(table: &str, job: &str, item: &Item) -> Result<JobItem> {
        let f = Fields::new(item, table, job, JOB_SK);
        let checkpoint = match f.map("checkpoint")? {
            None => None,
            Some(cp) => Some(Checkpoint {
                position: cp.s("position")?,
                source_identity: cp.s("source_identity")?,
                version: cp.n("version")?,
                run_id: cp.s("run_id")?,
                updated_at_ms: cp.n("updated_at_ms")?,
            }),
        };
        let format_version = f.opt_n("format_version")?.unwrap_or(1);
        if format_version != 1 {
            return Err(corrupt(
                table,
                job,
                JOB_SK,
                &format!("format_version {format_version} is not supported (this sluice writes 1)"),
            ));
        }
        Ok(JobItem {
            format_version,
            lease_token: f.opt_n("lease_token")?.unwrap_or(0),
            lease_owner: f.opt_s("lease_owner")?,
            lease_expires_at_ms: f.opt_n("lease_expires_at_ms")?,
            checkpoint,
        })
    }
}

pub(super) fn checkpoint_value(cp: &Checkpoint) -> AttributeValue {
    AttributeValue::M(HashMap::from([
        (
            "position".to_owned(),
            AttributeValue::S(cp.position.clone()),
        ),
        (
            "source_identity".to_owned(),
            AttributeValue::S(cp.source_identity.clone()),
        ),
        ("version".to_owned(), number(cp.version)),
        ("run_id".to_owned(), AttributeValue::S(cp.run_id.clone())),
        ("updated_at_ms".to_owned(), number(cp.updated_at_ms)),
    ]))
}

pub(super) fn baseline_sk(table: &str) -> String {
    format!("snapshot#{table}")
}

pub(super) fn chunk_sk(table: &str, chunk: u32) -> String {
    format!("chunk#{table}#{chunk:06}")
}

pub(super) fn op_sk(op: &str) -> String {
    format!("op#{op}")
}

/// An `op#` item: the operation's lease and its last record.
pub(super) fn parse_op(f: &Fields<'_>) -> Result<crate::state::ops::OpRecord> {
    let last = match f.opt_s("last")? {
        None => None,
        Some(text) => {
            Some(serde_json::from_str(&text).map_err(|e| f.bad("last", "is not JSON").source(e))?)
        }
    };
    Ok(crate::state::ops::OpRecord {
        op: f.opt_s("op")?.unwrap_or_default(),
        lease_token: f.opt_n("lease_token")?.unwrap_or(0),
        lease_owner: f.opt_s("lease_owner")?,
        lease_expires_at_ms: f.opt_n("lease_expires_at_ms")?,
        last,
    })
}

pub(super) fn run_sk(run_id: &str) -> String {
    format!("run#{run_id}")
}

pub(super) fn parse_baseline(f: &Fields<'_>) -> Result<BaselineRecord> {
    let status = match f.s("status")?.as_str() {
        "anchored" => BaselineStatus::Anchored,
        "running" => BaselineStatus::Running,
        "done" => BaselineStatus::Done,
        "wanted" => BaselineStatus::Wanted,
        other => return Err(f.bad("status", &format!("has the unknown value {other:?}"))),
    };
    Ok(BaselineRecord {
        table: f.s("table")?,
        status,
        anchor: f.s("anchor")?,
        run_id: f.s("run_id")?,
        updated_at_ms: f.n("updated_at_ms")?,
        reason: f.opt_s("reason")?,
        text_columns: f.string_set("text_columns")?,
    })
}

pub(super) fn parse_chunk(f: &Fields<'_>) -> Result<ChunkRecord> {
    Ok(ChunkRecord {
        table: f.s("table")?,
        chunk: f.n("chunk")?,
        rows: f.n("rows")?,
        part_key: f.s("part_key")?,
        bytes: f.opt_n("bytes")?.unwrap_or(0),
        checksum: f.opt_s("checksum")?.unwrap_or_default(),
        updated_at_ms: f.n("updated_at_ms")?,
    })
}

pub(super) fn parse_run(f: &Fields<'_>) -> Result<RunRecord> {
    let summary = serde_json::from_str(&f.s("summary")?)
        .map_err(|e| f.bad("summary", "is not JSON").source(e))?;
    Ok(RunRecord {
        run_id: f.s("run_id")?,
        summary,
        expires_at_s: f.n(TTL_ATTRIBUTE)?,
    })
}

pub(super) fn status_text(status: BaselineStatus) -> &'static str {
    match status {
        BaselineStatus::Anchored => "anchored",
        BaselineStatus::Running => "running",
        BaselineStatus::Done => "done",
        BaselineStatus::Wanted => "wanted",
    }
}

pub(super) fn sk_of(item: &Item) -> String {
    opt_s(item, "sk").ok().flatten().unwrap_or_default()
}

pub(super) fn baseline_item(job: &str, record: &BaselineRecord) -> Item {
    let mut item = key(job, &baseline_sk(&record.table));
    item.extend([
        ("table".to_owned(), AttributeValue::S(record.table.clone())),
        (
            "status".to_owned(),
            AttributeValue::S(status_text(record.status).to_owned()),
        ),
        (
            "anchor".to_owned(),
            AttributeValue::S(record.anchor.clone()),
        ),
        (
            "run_id".to_owned(),
            AttributeValue::S(record.run_id.clone()),
        ),
        ("updated_at_ms".to_owned(), number(record.updated_at_ms)),
    ]);
    if let Some(reason) = &record.reason {
        item.insert("reason".to_owned(), AttributeValue::S(reason.clone()));
    }
    if !record.text_columns.is_empty() {
        item.insert(
            "text_columns".to_owned(),
            AttributeValue::Ss(record.text_columns.iter().cloned().collect()),
        );
    }
    item
}

pub(super) fn chunk_item(job: &str, record: &ChunkRecord) -> Item {
    let mut item = key(job, &chunk_sk(&record.table, record.chunk));
    item.extend([
        ("table".to_owned(), AttributeValue::S(record.table.clone())),
        ("chunk".to_owned(), number(record.chunk)),
        ("rows".to_owned(), number(record.rows)),
        (
            "part_key".to_owned(),
            AttributeValue::S(record.part_key.clone()),
        ),
        ("bytes".to_owned(), number(record.bytes)),
        (
            "checksum".to_owned(),
            AttributeValue::S(record.checksum.clone()),
        ),
        ("updated_at_ms".to_owned(), number(record.updated_at_ms)),
    ]);
    item
}

pub(super) fn run_item(job: &str, record: &RunRecord) -> Item {
    let mut item = key(job, &run_sk(&record.run_id));
    item.extend([
        (
            "run_id".to_owned(),
            AttributeValue::S(record.run_id.clone()),
        ),
        (
            "summary".to_owned(),
            AttributeValue::S(record.summary.to_string()),
        ),
        (TTL_ATTRIBUTE.to_owned(), number(record.expires_at_s)),
    ]);
    item
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sort_keys_follow_the_documented_layout() {
        assert_eq!(baseline_sk("public.orders"), "snapshot#public.orders");
        assert_eq!(chunk_sk("public.orders", 42), "chunk#public.orders#000042");
        assert_eq!(
            run_sk("20261201T000000000Z-abcdef"),
            "run#20261201T000000000Z-abcdef"
        );
    }

    #[test]
    fn records_round_trip_and_bad_attributes_are_corrupt() {
        let record = ChunkRecord {
            table: "t".into(),
            chunk: 3,
            rows: 10,
            bytes: 10,
            checksum: "fnv1a64:0000000000000001".into(),
            part_key: "t/snapshot/part-000003.parquet".into(),
            updated_at_ms: 7,
        };
        let mut item = chunk_item("j", &record);
        let f = Fields::new(&item, "tbl", "j", "chunk#t#000003");
        assert_eq!(parse_chunk(&f).unwrap(), record);
        item.insert("rows".into(), AttributeValue::S("ten".into()));
        let f = Fields::new(&item, "tbl", "j", "chunk#t#000003");
        let err = parse_chunk(&f).unwrap_err();
        assert_eq!(err.code(), Code::StateCorrupt);
        assert!(
            err.message().contains("rows") && err.message().contains("tbl"),
            "{err}"
        );
    }
}
