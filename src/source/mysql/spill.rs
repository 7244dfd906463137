//! The buffer that holds one binlog transaction until its commit event arrives.
//!
//! The binlog gives a transaction's rows before its XID/COMMIT, and only the commit gives
//! the position every row is stamped with, so the rows are held until then. Guarantees:
//!
//! * memory is bounded by `memory_cap` (decoded bytes, estimated generously): the rows
//!   that fit stay in memory, and once the next row would pass it, that row and every
//!   later one of the transaction are appended to a spill file in the spill directory
//!   (`/tmp` on Lambda) — the heap stays O(cap) whatever the transaction's size, and the
//!   rows already held are not copied to disk and back;
//! * a transaction past `max_bytes` fails with [`SpillError::TooLarge`] before it can fill
//!   the volume; a full volume is [`SpillError::Io`] with `StorageFull`;
//! * rows come back exactly (a lossless binary codec, property-tested) and in order; each
//!   row is one length-prefixed record, encoded into and decoded from a reused buffer
//!   (one read per row, not one per field);
//! * once a transaction is on disk, its later rows events are written as the binlog logged
//!   them ([`TxnBuffer::push_rows`]: the row images, their column counts and the table)
//!   and come back as [`Held::Rows`], decoded by the caller as the transaction is emitted —
//!   so a large transaction's rows are decoded once, while the part writers run, instead
//!   of decoded, encoded and decoded again; `max_bytes` counts them as written;
//! * the spill file has a name no other process uses and is removed on [`TxnBuffer::clear`]
//!   and on drop (a crash leaves at most one `sluice-txn-*.spill` per process in the
//!   directory; the name carries the pid).

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::PathBuf;
use std::sync::Arc;

use super::events::{LoggedRows, MappedTable};
use super::rows::ImageColumns;
use crate::change::{Op, RowChange, TableSchema, Value};
use crate::spill::files::{self, SpillKind};

/// Why a row could not be buffered.
#[derive(Debug, thiserror::Error)]
pub enum SpillError {
    #[error("the transaction holds more than {limit} bytes of rows")]
    TooLarge { limit: u64 },
    #[error("spill file {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

struct SpillFile {
    path: PathBuf,
    /// Marks the file in use for the spill sweep of other processes, until dropped.
    _hold: Option<File>,
    writer: Option<BufWriter<File>>,
    reader: Option<BufReader<File>>,
}

impl Drop for SpillFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// A buffered item, in order.
#[derive(Debug)]
pub enum Held {
    Change(RowChange),
    /// A rows event as logged, to be decoded ([`super::events::decode_logged`]).
    Rows(HeldRows),
}

/// A rows event kept as the binlog logged it.
#[derive(Debug)]
pub struct HeldRows {
    pub table: Arc<MappedTable>,
    pub op: Op,
    pub before: Option<ImageColumns>,
    pub after: Option<ImageColumns>,
    pub data: Vec<u8>,
    /// Where the event ends, for messages.
    pub at: String,
}

impl HeldRows {
    /// The event as [`LoggedRows`].
    pub fn logged(&self) -> LoggedRows<'_> {
        LoggedRows {
            op: self.op,
            before: self.before,
            after: self.after,
            data: &self.data,
        }
    }
}

/// Record kinds in the spill file.
const RECORD_CHANGE: u8 = 0;
const RECORD_ROWS: u8 = 1;

/// One transaction's row changes, in memory up to a cap, then on local disk.
pub struct TxnBuffer {
    dir: PathBuf,
    memory_cap: u64,
    max_bytes: u64,
    memory: VecDeque<RowChange>,
    memory_bytes: u64,
    total_bytes: u64,
    /// Schemas referenced by spilled rows (by index).
    tables: Vec<Arc<TableSchema>>,
    /// Tables of the rows events spilled as logged (by index).
    mapped: Vec<Arc<MappedTable>>,
    file: Option<SpillFile>,
    /// Spilled rows not yet read back.
    file_rows: u64,
    /// The record being written or read (reused: no allocation per row).
    scratch: Vec<u8>,
}

impl TxnBuffer {
    /// An empty buffer spilling to `dir`.
    pub fn new(dir: PathBuf, memory_cap: u64, max_bytes: u64) -> Self {
        TxnBuffer {
            dir,
            memory_cap,
            max_bytes,
            memory: VecDeque::new(),
            memory_bytes: 0,
            total_bytes: 0,
            tables: Vec::new(),
            mapped: Vec::new(),
            file: None,
            file_rows: 0,
            scratch: Vec::new(),
        }
    }

    /// True when the transaction holds nothing (no row change, no rows event) not yet
    /// read back.
    pub fn is_empty(&self) -> bool {
        self.memory.is_empty() && self.file_rows == 0
    }

    /// True once the transaction has moved to disk.
    pub fn spilled(&self) -> bool {
        self.file.is_some()
    }

    /// Decoded bytes buffered (estimate).
    pub fn bytes(&self) -> u64 {
        self.total_bytes
    }

    /// Adds a row at the end.
    pub fn push(&mut self, change: RowChange) -> Result<(), SpillError> {
        let size = change_size(&change);
        self.reserve(size)?;
        if self.file.is_none() && self.memory_bytes + size <= self.memory_cap {
            self.memory_bytes += size;
            self.memory.push_back(change);
            return Ok(());
        }
        let table = index_of(&mut self.tables, &change.table);
        self.scratch.clear();
        self.scratch.push(RECORD_CHANGE);
        encode_change(&mut self.scratch, table, &change);
        self.write_scratch()
    }

    /// Adds a rows event of `table` at the end as the binlog logged it (`at`: where it
    /// ends, for messages), on disk: the transaction moves there first if it has not.
    pub fn push_rows(
        &mut self,
        table: &Arc<MappedTable>,
        rows: &LoggedRows<'_>,
        at: &str,
    ) -> Result<(), SpillError> {
        self.reserve((rows.data.len() + at.len() + 64) as u64)?;
        let table = index_of(&mut self.mapped, table);
        self.scratch.clear();
        self.scratch.push(RECORD_ROWS);
        encode_rows(&mut self.scratch, table, rows, at);
        self.write_scratch()
    }

    /// Counts `size` more bytes held, or refuses them past `max_bytes`.
    fn reserve(&mut self, size: u64) -> Result<(), SpillError> {
        if self.total_bytes + size > self.max_bytes {
            return Err(SpillError::TooLarge {
                limit: self.max_bytes,
            });
        }
        self.total_bytes += size;
        Ok(())
    }

    /// The next item in order, after the last push; `None` when all were read.
    pub fn pop(&mut self) -> Result<Option<Held>, SpillError> {
        if let Some(change) = self.memory.pop_front() {
            return Ok(Some(Held::Change(change)));
        }
        if self.file_rows == 0 {
            return Ok(None);
        }
        let file = self.file.as_mut().expect("spilled rows have a file");
        let path = file.path.clone();
        let io = |source| SpillError::Io {
            path: path.clone(),
            source,
        };
        if let Some(mut writer) = file.writer.take() {
            writer.flush().map_err(io)?;
            let mut inner = writer.into_inner().map_err(|e| io(e.into_error()))?;
            inner.seek(SeekFrom::Start(0)).map_err(io)?;
            file.reader = Some(BufReader::with_capacity(256 * 1024, inner));
        }
        let reader = file.reader.as_mut().expect("reader after the writer");
        let len = u64::from_le_bytes(read_array(reader).map_err(io)?);
        let len = usize::try_from(len).map_err(|_| io(corrupt("record length")))?;
        self.scratch.resize(len, 0);
        reader.read_exact(&mut self.scratch).map_err(io)?;
        let mut record = Record {
            data: &self.scratch,
            at: 0,
        };
        let held = match record.array::<1>().map_err(io)?[0] {
            RECORD_CHANGE => Held::Change(decode_change(&mut record, &self.tables).map_err(io)?),
            RECORD_ROWS => Held::Rows(decode_rows(&mut record, &self.mapped).map_err(io)?),
            _ => return Err(io(corrupt("record kind"))),
        };
        if record.at != len {
            return Err(io(corrupt("record length")));
        }
        self.file_rows -= 1;
        Ok(Some(held))
    }

    /// Drops everything (rollback, or after the commit was emitted) and removes the file.
    pub fn clear(&mut self) {
        self.memory.clear();
        self.memory_bytes = 0;
        self.total_bytes = 0;
        self.tables.clear();
        self.mapped.clear();
        self.file = None;
        self.file_rows = 0;
    }

    fn open_file(&mut self) -> Result<(), SpillError> {
        let created =
            files::create(&self.dir, SpillKind::Transaction).map_err(|failed| SpillError::Io {
                path: failed.path,
                source: failed.source,
            })?;
        tracing::info!(path = %created.path.display(), "transaction exceeds the memory cap; spilling to disk");
        self.file = Some(SpillFile {
            path: created.path,
            _hold: created.hold,
            writer: Some(BufWriter::with_capacity(256 * 1024, created.file)),
            reader: None,
        });
        Ok(())
    }

    /// Writes the record in `scratch` to the spill file, opening it first if needed.
    fn write_scratch(&mut self) -> Result<(), SpillError> {
        if self.file.is_none() {
            self.open_file()?;
        }
        let file = self.file.as_mut().expect("the file was just opened");
        let writer = file
            .writer
            .as_mut()
            .expect("rows are pushed before they are read");
        writer
            .write_all(&(self.scratch.len() as u64).to_le_bytes())
            .and_then(|_| writer.write_all(&self.scratch))
            .map_err(|source| SpillError::Io {
                path: file.path.clone(),
                source,
            })?;
        self.file_rows += 1;
        Ok(())
    }
}

/// A generous estimate of a change's heap footprint.
fn change_size(change: &RowChange) -> u64 {
    let image = |img: &Option<Vec<Value>>| {
        img.as_ref()
            .map_or(0, |v| v.iter().map(value_size).sum::<u64>())
    };
    96 + image(&change.before)
        + image(&change.after)
        + 8 * (change.before_unlogged.len() + change.after_unlogged.len()) as u64
}

fn value_size(value: &Value) -> u64 {
    let inline = std::mem::size_of::<Value>() as u64;
    inline
        + match value {
            Value::Text(s) => s.len() as u64,
            Value::Bytes(b) => b.len() as u64,
            Value::List(items) => items.iter().map(value_size).sum(),
            _ => 0,
        }
}

/// The spill code of an op ([`Record::op`] reads it back).
fn op_code(op: Op) -> u8 {
    match op {
        Op::Insert => 0,
        Op::Update => 1,
        Op::Delete => 2,
        Op::Snapshot => 3,
        Op::Truncate => 4,
        Op::Rebaseline => 5,
    }
}

fn encode_change(w: &mut Vec<u8>, table: u32, change: &RowChange) {
    w.extend_from_slice(&table.to_le_bytes());
    w.push(op_code(change.op));
    for image in [&change.before, &change.after] {
        match image {
            None => w.push(0),
            Some(values) => {
                w.push(1);
                w.extend_from_slice(&(values.len() as u64).to_le_bytes());
                for value in values {
                    encode_value(w, value);
                }
            }
        }
    }
    for list in [&change.before_unlogged, &change.after_unlogged] {
        w.extend_from_slice(&(list.len() as u64).to_le_bytes());
        for i in list {
            w.extend_from_slice(&(*i as u64).to_le_bytes());
        }
    }
}

/// The index of `item` in `list` (by identity), appended when it is not there yet.
fn index_of<T>(list: &mut Vec<Arc<T>>, item: &Arc<T>) -> u32 {
    let index = match list.iter().position(|t| Arc::ptr_eq(t, item)) {
        Some(i) => i,
        None => {
            list.push(item.clone());
            list.len() - 1
        }
    };
    index as u32
}

fn encode_rows(w: &mut Vec<u8>, table: u32, rows: &LoggedRows<'_>, at: &str) {
    w.extend_from_slice(&table.to_le_bytes());
    w.push(op_code(rows.op));
    for image in [rows.before, rows.after] {
        match image {
            None => w.push(0),
            Some(columns) => {
                let (present, listed) = columns.counts();
                w.push(1);
                w.extend_from_slice(&(present as u64).to_le_bytes());
                w.extend_from_slice(&(listed as u64).to_le_bytes());
            }
        }
    }
    for bytes in [rows.data, at.as_bytes()] {
        w.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
        w.extend_from_slice(bytes);
    }
}

fn decode_rows(r: &mut Record<'_>, tables: &[Arc<MappedTable>]) -> io::Result<HeldRows> {
    let table = r.table(tables)?;
    let op = r.op()?;
    if !matches!(op, Op::Insert | Op::Update | Op::Delete) {
        return Err(corrupt("rows op"));
    }
    let mut images = [None, None];
    for image in &mut images {
        if r.array::<1>()?[0] == 1 {
            let (present, listed) = (r.len()?, r.len()?);
            *image = Some(ImageColumns::from_counts(present, listed));
        }
    }
    let n = r.len()?;
    let data = r.take(n)?.to_vec();
    let n = r.len()?;
    let at = std::str::from_utf8(r.take(n)?)
        .map_err(|_| corrupt("event position"))?
        .to_owned();
    let [before, after] = images;
    Ok(HeldRows {
        table,
        op,
        before,
        after,
        data,
        at,
    })
}

fn encode_value(w: &mut Vec<u8>, value: &Value) {
    let mut tagged = |tag: u8, bytes: &[u8]| {
        w.push(tag);
        w.extend_from_slice(bytes);
    };
    match value {
        Value::Null => tagged(0, &[]),
        Value::Boolean(b) => tagged(1, &[u8::from(*b)]),
        Value::Int(v) => tagged(2, &v.to_le_bytes()),
        Value::UInt(v) => tagged(3, &v.to_le_bytes()),
        Value::Float(v) => tagged(4, &v.to_bits().to_le_bytes()),
        Value::Decimal(v) => tagged(5, &v.to_le_bytes()),
        Value::Decimal256(v) => tagged(6, &v[..]),
        Value::Text(s) => {
            tagged(7, &(s.len() as u64).to_le_bytes());
            w.extend_from_slice(s.as_bytes());
        }
        Value::Bytes(b) => {
            tagged(8, &(b.len() as u64).to_le_bytes());
            w.extend_from_slice(b);
        }
        Value::Date(v) => tagged(9, &v.to_le_bytes()),
        Value::Time(v) => tagged(10, &v.to_le_bytes()),
        Value::Timestamp(v) => tagged(11, &v.to_le_bytes()),
        Value::List(items) => {
            tagged(12, &(items.len() as u64).to_le_bytes());
            items.iter().for_each(|v| encode_value(w, v));
        }
    }
}

/// One spill record being decoded.
struct Record<'a> {
    data: &'a [u8],
    at: usize,
}

impl Record<'_> {
    fn take(&mut self, n: usize) -> io::Result<&[u8]> {
        let end = self
            .at
            .checked_add(n)
            .filter(|end| *end <= self.data.len())
            .ok_or_else(|| corrupt("a record shorter than its fields"))?;
        let out = &self.data[self.at..end];
        self.at = end;
        Ok(out)
    }

    fn array<const N: usize>(&mut self) -> io::Result<[u8; N]> {
        Ok(self.take(N)?.try_into().expect("N bytes"))
    }

    fn len(&mut self) -> io::Result<usize> {
        usize::try_from(u64::from_le_bytes(self.array()?)).map_err(|_| corrupt("length"))
    }

    /// A table index into `tables`.
    fn table<T>(&mut self, tables: &[Arc<T>]) -> io::Result<Arc<T>> {
        let index = u32::from_le_bytes(self.array()?) as usize;
        tables
            .get(index)
            .cloned()
            .ok_or_else(|| corrupt("table index"))
    }

    fn op(&mut self) -> io::Result<Op> {
        Ok(match self.array::<1>()?[0] {
            0 => Op::Insert,
            1 => Op::Update,
            2 => Op::Delete,
            3 => Op::Snapshot,
            4 => Op::Truncate,
            5 => Op::Rebaseline,
            _ => return Err(corrupt("op")),
        })
    }
}

fn corrupt(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("spill file corrupt: {what}"),
    )
}

fn read_array<const N: usize>(r: &mut impl Read) -> io::Result<[u8; N]> {
    let mut buf = [0u8; N];
    r.read_exact(&mut buf)?;
    Ok(buf)
}

fn decode_change(r: &mut Record<'_>, tables: &[Arc<TableSchema>]) -> io::Result<RowChange> {
    let table = r.table(tables)?;
    let op = r.op()?;
    let mut images = [None, None];
    for image in &mut images {
        if r.array::<1>()?[0] == 1 {
            let n = r.len()?;
            let mut values = Vec::with_capacity(n.min(4096));
            for _ in 0..n {
                values.push(decode_value(r)?);
            }
            *image = Some(values);
        }
    }
    let mut lists = [Vec::new(), Vec::new()];
    for list in &mut lists {
        let n = r.len()?;
        for _ in 0..n {
            list.push(r.len()?);
        }
    }
    let [before, after] = images;
    let [before_unlogged, after_unlogged] = lists;
    Ok(RowChange {
        table,
        op,
        before,
        after,
        before_unlogged,
        after_unlogged,
    })
}

fn decode_value(r: &mut Record<'_>) -> io::Result<Value> {
    Ok(match r.array::<1>()?[0] {
        0 => Value::Null,
        1 => Value::Boolean(r.array::<1>()?[0] != 0),
        2 => Value::Int(i64::from_le_bytes(r.array()?)),
        3 => Value::UInt(u64::from_le_bytes(r.array()?)),
        4 => Value::Float(f64::from_bits(u64::from_le_bytes(r.array()?))),
        5 => Value::Decimal(i128::from_le_bytes(r.array()?)),
        6 => Value::Decimal256(Box::new(r.array()?)),
        7 => {
            let n = r.len()?;
            let text = std::str::from_utf8(r.take(n)?).map_err(|_| corrupt("text"))?;
            Value::Text(text.to_owned())
        }
        8 => {
            let n = r.len()?;
            Value::Bytes(r.take(n)?.to_vec())
        }
        9 => Value::Date(i32::from_le_bytes(r.array()?)),
        10 => Value::Time(i64::from_le_bytes(r.array()?)),
        11 => Value::Timestamp(i64::from_le_bytes(r.array()?)),
        12 => {
            let n = r.len()?;
            let mut items = Vec::with_capacity(n.min(4096));
            for _ in 0..n {
                items.push(decode_value(r)?);
            }
            Value::List(items)
        }
        _ => return Err(corrupt("value tag")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::change::{Column, ColumnType};
    use proptest::prelude::*;

    fn table(name: &str) -> Arc<TableSchema> {
        Arc::new(TableSchema {
            name: name.into(),
            columns: vec![Column {
                name: "id".into(),
                ty: ColumnType::Int64,
                nullable: false,
                key: true,
                source_type: "bigint".into(),
                field_metadata: Default::default(),
            }],
        })
    }

    fn insert(table: &Arc<TableSchema>, values: Vec<Value>) -> RowChange {
        RowChange {
            table: table.clone(),
            op: Op::Insert,
            before: None,
            after: Some(values),
            before_unlogged: vec![],
            after_unlogged: vec![],
        }
    }

    fn arb_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Boolean),
            any::<i64>().prop_map(Value::Int),
            any::<u64>().prop_map(Value::UInt),
            any::<f64>()
                .prop_filter("NaN != NaN", |f| !f.is_nan())
                .prop_map(Value::Float),
            any::<i128>().prop_map(Value::Decimal),
            any::<[u8; 32]>().prop_map(|v| Value::Decimal256(Box::new(v))),
            ".{0,40}".prop_map(Value::Text),
            proptest::collection::vec(any::<u8>(), 0..40).prop_map(Value::Bytes),
            any::<i32>().prop_map(Value::Date),
            any::<i64>().prop_map(Value::Time),
            any::<i64>().prop_map(Value::Timestamp),
        ];
        leaf.prop_recursive(2, 8, 4, |inner| {
            proptest::collection::vec(inner, 0..4).prop_map(Value::List)
        })
    }

    proptest! {
        #[test]
        fn spilled_rows_come_back_exactly_and_in_order(
            rows in proptest::collection::vec(proptest::collection::vec(arb_value(), 0..6), 1..40),
            cap in 0u64..2000,
        ) {
            let dir = tempfile::tempdir().unwrap();
            let (a, b) = (table("a"), table("b"));
            let mut buffer = TxnBuffer::new(dir.path().to_path_buf(), cap, u64::MAX);
            let changes: Vec<RowChange> = rows
                .into_iter()
                .enumerate()
                .map(|(i, values)| {
                    let mut c = insert(if i % 2 == 0 { &a } else { &b }, values.clone());
                    if i % 3 == 0 {
                        c.op = Op::Update;
                        c.before = Some(values);
                        c.before_unlogged = vec![i];
                    }
                    c
                })
                .collect();
            for c in &changes {
                buffer.push(c.clone()).unwrap();
            }
            let mut back = Vec::new();
            while let Some(c) = buffer.pop().unwrap() {
                back.push(change(c));
            }
            prop_assert_eq!(back.len(), changes.len());
            for (x, y) in back.iter().zip(&changes) {
                prop_assert!(Arc::ptr_eq(&x.table, &y.table));
                prop_assert_eq!(x, y);
            }
        }
    }

    #[test]
    fn memory_stays_under_the_cap_and_the_file_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        let t = table("t");
        let mut buffer = TxnBuffer::new(dir.path().to_path_buf(), 10_000, u64::MAX);
        for i in 0..1000 {
            buffer
                .push(insert(
                    &t,
                    vec![Value::Int(i), Value::Text("x".repeat(100))],
                ))
                .unwrap();
            assert!(buffer.memory_bytes <= 10_000);
        }
        assert!(buffer.spilled());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        assert_eq!(
            change(buffer.pop().unwrap().unwrap()).after.unwrap()[0],
            Value::Int(0)
        );
        buffer.clear();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        assert!(buffer.pop().unwrap().is_none());
    }

    fn change(held: Held) -> RowChange {
        match held {
            Held::Change(change) => change,
            Held::Rows(rows) => panic!("a logged rows event where a change was pushed: {rows:?}"),
        }
    }

    fn mapped(name: &str) -> Arc<MappedTable> {
        Arc::new(MappedTable {
            schema: table(name),
            columns: Vec::new(),
            types: Vec::new(),
        })
    }

    #[test]
    fn logged_rows_events_come_back_as_written_between_the_changes() {
        let dir = tempfile::tempdir().unwrap();
        let (t, a, b) = (table("t"), mapped("a"), mapped("b"));
        let mut buffer = TxnBuffer::new(dir.path().to_path_buf(), 100, u64::MAX);
        buffer.push(insert(&t, vec![Value::Int(1)])).unwrap();
        let images = |n: usize| Some(ImageColumns::from_counts(n, n + 1));
        let events = [
            (
                &a,
                Op::Insert,
                None,
                images(3),
                vec![1u8, 2, 3],
                "f.000001:400",
            ),
            (&b, Op::Update, images(2), images(4), vec![], "f.000001:500"),
            (
                &a,
                Op::Delete,
                images(5),
                None,
                vec![9; 70_000],
                "f.000002:4",
            ),
        ];
        for (i, (table, op, before, after, data, at)) in events.iter().enumerate() {
            let logged = LoggedRows {
                op: *op,
                before: *before,
                after: *after,
                data,
            };
            buffer.push_rows(table, &logged, at).unwrap();
            buffer
                .push(insert(&t, vec![Value::Int(i as i64 + 2)]))
                .unwrap();
        }
        assert!(buffer.spilled(), "rows events are kept on disk");
        assert_eq!(
            change(buffer.pop().unwrap().unwrap()).after,
            Some(vec![Value::Int(1)])
        );
        for (i, (table, op, before, after, data, at)) in events.iter().enumerate() {
            let Some(Held::Rows(rows)) = buffer.pop().unwrap() else {
                panic!("event {i} did not come back as a rows event");
            };
            assert!(Arc::ptr_eq(&rows.table, table), "event {i}");
            assert_eq!(
                (
                    rows.op,
                    rows.before,
                    rows.after,
                    &rows.data,
                    rows.at.as_str()
                ),
                (*op, *before, *after, data, *at),
                "event {i}"
            );
            let next = change(buffer.pop().unwrap().unwrap());
            assert_eq!(next.after, Some(vec![Value::Int(i as i64 + 2)]));
        }
        assert!(buffer.pop().unwrap().is_none());
    }

    #[test]
    fn logged_rows_count_toward_the_hard_limit() {
        let dir = tempfile::tempdir().unwrap();
        let a = mapped("a");
        let mut buffer = TxnBuffer::new(dir.path().to_path_buf(), 100, 10_000);
        let data = vec![0u8; 4_000];
        let logged = LoggedRows {
            op: Op::Insert,
            before: None,
            after: Some(ImageColumns::from_counts(1, 1)),
            data: &data,
        };
        buffer.push_rows(&a, &logged, "f:1").unwrap();
        buffer.push_rows(&a, &logged, "f:2").unwrap();
        let err = buffer.push_rows(&a, &logged, "f:3").unwrap_err();
        assert!(
            matches!(err, SpillError::TooLarge { limit: 10_000 }),
            "{err}"
        );
    }

    #[test]
    fn a_short_record_is_corrupt_not_a_panic() {
        let t = table("t");
        let change = insert(&t, vec![Value::Text("abc".into()), Value::Int(7)]);
        let mut buf = Vec::new();
        encode_change(&mut buf, 0, &change);
        let whole =
            decode_change(&mut Record { data: &buf, at: 0 }, std::slice::from_ref(&t)).unwrap();
        assert_eq!(whole.after, change.after);
        for cut in 0..buf.len() {
            let mut r = Record {
                data: &buf[..cut],
                at: 0,
            };
            let e = decode_change(&mut r, std::slice::from_ref(&t)).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidData, "cut at {cut}");
        }
    }

    #[test]
    fn a_transaction_past_the_hard_limit_fails() {
        let dir = tempfile::tempdir().unwrap();
        let t = table("t");
        let mut buffer = TxnBuffer::new(dir.path().to_path_buf(), 100, 5_000);
        let err = (0..1000)
            .map(|i| buffer.push(insert(&t, vec![Value::Int(i)])))
            .find_map(Result::err)
            .unwrap();
        assert!(matches!(err, SpillError::TooLarge { limit: 5_000 }));
    }
}
