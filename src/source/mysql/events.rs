//! Binlog events → what the stream needs: transaction boundaries, the captured tables'
//! shapes (from TABLE_MAP metadata) and their rows as [`RowChange`]s.
//!
//! Guarantees:
//! * MariaDB's own events are recognised by type number (mysql_common does not know
//!   them): GTID (162, parsed here: `seq_no` u64 LE, `domain_id` u32 LE, `flags2`),
//!   GTID_LIST, BINLOG_CHECKPOINT, ANNOTATE_ROWS and START_ENCRYPTION carry no rows and
//!   are skipped; **every other event type this module does not decode may carry rows
//!   (MariaDB's compressed events 165–171, anything newer) and fails the run** — a row
//!   event is never skipped because it was not understood;
//! * a captured table's TABLE_MAP must carry column names (`binlog_row_metadata=FULL`);
//!   one written under MINIMAL / NO_LOG metadata is refused naming the table and the
//!   position — rows are never mapped by column position;
//! * rows are mapped to the declared columns by name; a row image that lacks columns
//!   (a session with `binlog_row_image` other than FULL) is refused.

use std::collections::HashMap;
use std::sync::Arc;

use mysql_async::binlog::events::{
    OptionalMetaExtractor, OptionalMetadataField, RowsEventData, TableMapEvent,
};
use mysql_async::consts::ColumnType as MyType;

use super::cell::CellError;
use super::charset;
use super::forms;
use super::rows::{ImageColumns, RowError, RowImages};
use super::schema::CapturedTable;
use super::values::{BinlogColumn, Plugin, binlog_type, compatible};
use crate::change::{Column, ColumnType, Op, RowChange, TableSchema};
use crate::error::{Code, Error, Result};

/// MariaDB event type numbers.
pub mod maria {
    pub const ANNOTATE_ROWS: u8 = 160;
    pub const BINLOG_CHECKPOINT: u8 = 161;
    pub const GTID: u8 = 162;
    pub const GTID_LIST: u8 = 163;
    pub const START_ENCRYPTION: u8 = 164;
    /// 165 = compressed QUERY, 166–171 = compressed WRITE/UPDATE/DELETE rows (v1 and v2).
    pub const FIRST_COMPRESSED: u8 = 165;
    pub const LAST_COMPRESSED: u8 = 171;
}

/// What to do with an event type mysql_common does not decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnknownEvent {
    /// A MariaDB GTID event: parse it.
    Gtid,
    /// Known to carry no rows.
    Skip,
    /// May carry rows that cannot be read: fail.
    Refuse,
}

/// Classifies an event type number that mysql_common returned no data for.
pub fn classify_unknown(event_type: u8) -> UnknownEvent {
    match event_type {
        maria::GTID => UnknownEvent::Gtid,
        maria::ANNOTATE_ROWS
        | maria::BINLOG_CHECKPOINT
        | maria::GTID_LIST
        | maria::START_ENCRYPTION => UnknownEvent::Skip,
        _ => UnknownEvent::Refuse,
    }
}

/// A MariaDB GTID event: the start of an event group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MariaGtid {
    pub seq_no: u64,
    pub domain_id: u32,
    pub flags2: u8,
}

impl MariaGtid {
    /// The group is a single statement without BEGIN/COMMIT (DDL, non-transactional).
    pub const FL_STANDALONE: u8 = 1;
    /// Part of an XA transaction that is prepared (its commit comes later).
    pub const FL_PREPARED_XA: u8 = 64;
    /// Completes an XA transaction (XA COMMIT / XA ROLLBACK).
    pub const FL_COMPLETED_XA: u8 = 128;

    /// Parses the event body (after the 19-byte header, checksum removed).
    pub fn parse(body: &[u8]) -> Option<MariaGtid> {
        let seq_no = u64::from_le_bytes(body.get(0..8)?.try_into().ok()?);
        let domain_id = u32::from_le_bytes(body.get(8..12)?.try_into().ok()?);
        let flags2 = *body.get(12)?;
        Some(MariaGtid {
            seq_no,
            domain_id,
            flags2,
        })
    }

    pub fn standalone(&self) -> bool {
        self.flags2 & Self::FL_STANDALONE != 0
    }

    pub fn xa(&self) -> bool {
        self.flags2 & (Self::FL_PREPARED_XA | Self::FL_COMPLETED_XA) != 0
    }
}

/// What a QUERY event's statement means for framing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Statement {
    Begin,
    Commit,
    Rollback,
    /// `XA START/END/PREPARE/COMMIT/ROLLBACK`.
    Xa,
    /// `SAVEPOINT` / `ROLLBACK TO` (rows of a rolled-back savepoint are never logged).
    Savepoint,
    /// `TRUNCATE [TABLE]`.
    Truncate,
    /// INSERT/UPDATE/DELETE/REPLACE/LOAD logged as a statement (a session that set
    /// `binlog_format` to STATEMENT or MIXED).
    Dml,
    /// Anything else (DDL, grants …).
    Other,
}

/// Classifies a statement by its first words. Pure.
pub fn classify_statement(sql: &str) -> Statement {
    let sql = strip_leading_comments(sql);
    let mut words = sql
        .split_ascii_whitespace()
        .map(|w| w.trim_end_matches(';').to_ascii_uppercase());
    let first = words.next().unwrap_or_default();
    let second = words.next().unwrap_or_default();
    match first.as_str() {
        "BEGIN" => Statement::Begin,
        "START" if second == "TRANSACTION" => Statement::Begin,
        "COMMIT" => Statement::Commit,
        "ROLLBACK" if second == "TO" => Statement::Savepoint,
        "ROLLBACK" => Statement::Rollback,
        "SAVEPOINT" | "RELEASE" => Statement::Savepoint,
        "XA" => Statement::Xa,
        "TRUNCATE" => Statement::Truncate,
        "INSERT" | "UPDATE" | "DELETE" | "REPLACE" | "LOAD" => Statement::Dml,
        _ => Statement::Other,
    }
}

/// The table a `TRUNCATE [TABLE] name` statement names, as `(database, table)` with the
/// database `None` when unqualified; `None` when the statement is not exactly that (a
/// reader must then assume any table it mentions was affected). Backquoted parts are
/// unquoted (a doubled backquote is one). Pure.
pub fn truncated_table(sql: &str) -> Option<(Option<String>, String)> {
    let sql = strip_leading_comments(sql);
    let rest = strip_keyword(sql, "TRUNCATE")?;
    let rest = strip_keyword(rest, "TABLE").unwrap_or(rest);
    let (first, rest) = identifier(rest.trim_start())?;
    let (name, rest) = match rest.strip_prefix('.') {
        Some(after) => {
            let (table, rest) = identifier(after)?;
            ((Some(first), table), rest)
        }
        None => ((None, first), rest),
    };
    let rest = rest.trim_start();
    let rest = rest.strip_prefix(';').unwrap_or(rest);
    strip_leading_comments(rest).is_empty().then_some(name)
}

/// `text` after the keyword `word` (case-insensitive, ended by whitespace or the end) and
/// the whitespace after it.
fn strip_keyword<'a>(text: &'a str, word: &str) -> Option<&'a str> {
    let head = text.get(..word.len())?;
    let rest = &text[word.len()..];
    let ends = rest.is_empty() || rest.starts_with(|c: char| c.is_ascii_whitespace());
    (head.eq_ignore_ascii_case(word) && ends).then(|| rest.trim_start())
}

/// One identifier at the start of `text` — backquoted, or bare (letters, digits, `_`, `$`,
/// non-ASCII) — and the text after it.
fn identifier(text: &str) -> Option<(String, &str)> {
    if let Some(quoted) = text.strip_prefix('`') {
        let mut name = String::new();
        let mut chars = quoted.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            if c == '`' {
                if chars.peek().is_some_and(|(_, n)| *n == '`') {
                    chars.next();
                    name.push('`');
                    continue;
                }
                return (!name.is_empty()).then(|| (name, &quoted[i + 1..]));
            }
            name.push(c);
        }
        return None;
    }
    let end = text
        .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$'))
        .unwrap_or(text.len());
    (end > 0).then(|| (text[..end].to_owned(), &text[end..]))
}

/// True for an `ALTER TABLE` that adds a column existing rows get a value for without a
/// logged change: one with a `DEFAULT`, `NOT NULL` (the type's implicit default),
/// generated (`AS (…)`, `GENERATED`), `AUTO_INCREMENT` or `SERIAL`. A nullable column
/// added without any of them (every existing row NULL) is false. Conservative: a clause
/// it cannot read counts as adding such a column. Pure.
pub fn adds_filled_column(sql: &str) -> bool {
    let sql = strip_leading_comments(sql);
    let Some(rest) = strip_keyword(sql, "ALTER") else {
        return false;
    };
    let rest = strip_keyword(rest, "ONLINE").unwrap_or(rest);
    let rest = strip_keyword(rest, "IGNORE").unwrap_or(rest);
    if strip_keyword(rest, "TABLE").is_none() {
        return false;
    }
    let words = |clause: &str| -> Vec<String> {
        clause
            .split(|c: char| c.is_ascii_whitespace() || c == '(' || c == ')')
            .filter(|w| !w.is_empty())
            .map(|w| w.to_ascii_uppercase())
            .collect()
    };
    const NOT_A_COLUMN: [&str; 11] = [
        "INDEX",
        "KEY",
        "UNIQUE",
        "CONSTRAINT",
        "PRIMARY",
        "FOREIGN",
        "FULLTEXT",
        "SPATIAL",
        "PARTITION",
        "PERIOD",
        "SYSTEM",
    ];
    const FILLS: [&str; 6] = [
        "DEFAULT",
        "AS",
        "GENERATED",
        "AUTO_INCREMENT",
        "SERIAL",
        "NOT",
    ];
    top_level_clauses(&without_literals(sql))
        .iter()
        .any(|clause| {
            let w = words(clause);
            // The first clause starts `ALTER [ONLINE] [IGNORE] TABLE name ADD …`.
            let Some(add) = w.iter().position(|x| x == "ADD") else {
                return false;
            };
            let mut def = &w[add + 1..];
            if def.first().is_some_and(|x| x == "COLUMN") {
                def = &def[1..];
            }
            if def.first().is_some_and(|x| x == "IF") {
                def = def.get(3..).unwrap_or_default();
            }
            match def.first() {
                None => true,
                Some(first) if NOT_A_COLUMN.contains(&first.as_str()) => false,
                Some(_) => def.iter().any(|x| FILLS.contains(&x.as_str())),
            }
        })
}

/// `sql` with every quoted literal and backquoted identifier replaced by `_` (so words
/// inside them are not read as keywords, and commas inside them split nothing).
fn without_literals(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut quote: Option<char> = None;
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        match quote {
            Some(q) if c == '\\' && q != '`' => {
                chars.next();
            }
            Some(q) if c == q => {
                if chars.peek() == Some(&q) {
                    chars.next();
                } else {
                    quote = None;
                    out.push('_');
                }
            }
            Some(_) => {}
            None if matches!(c, '\'' | '"' | '`') => quote = Some(c),
            None => out.push(c),
        }
    }
    out
}

/// The comma-separated clauses of a statement, split only outside parentheses.
fn top_level_clauses(sql: &str) -> Vec<&str> {
    let mut clauses = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in sql.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                clauses.push(&sql[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    clauses.push(&sql[start..]);
    clauses
}

/// True for an `ALTER TABLE … {TRUNCATE | DROP | EXCHANGE | REORGANIZE} PARTITION`: it
/// removes, swaps or moves rows without logging them as row events. Pure.
pub fn rewrites_partition_rows(sql: &str) -> bool {
    let words: Vec<String> = strip_leading_comments(sql)
        .split_ascii_whitespace()
        .map(|w| w.trim_end_matches(';').to_ascii_uppercase())
        .collect();
    let alter_table =
        words.first().is_some_and(|w| w == "ALTER") && words.iter().take(4).any(|w| w == "TABLE");
    alter_table
        && words.windows(2).any(|w| {
            matches!(
                w[0].as_str(),
                "TRUNCATE" | "DROP" | "EXCHANGE" | "REORGANIZE"
            ) && w[1] == "PARTITION"
        })
}

fn strip_leading_comments(mut sql: &str) -> &str {
    loop {
        sql = sql.trim_start();
        if let Some(rest) = sql.strip_prefix("/*") {
            match rest.find("*/") {
                Some(end) => sql = &rest[end + 2..],
                None => return "",
            }
        } else if sql.starts_with("--") || sql.starts_with('#') {
            match sql.find('\n') {
                Some(end) => sql = &sql[end + 1..],
                None => return "",
            }
        } else {
            return sql;
        }
    }
}

/// True when `sql` names `table` as a whole identifier (case-insensitive, with or without
/// backquotes). Conservative: a false positive refuses a run, a false negative never
/// happens for a plain mention.
pub fn mentions_table(sql: &str, table: &str) -> bool {
    let haystack = sql.to_ascii_lowercase().replace('`', "");
    let needle = table.to_ascii_lowercase();
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '$';
    haystack.match_indices(&needle).any(|(at, _)| {
        let before = haystack[..at].chars().next_back();
        let after = haystack[at + needle.len()..].chars().next();
        !before.is_some_and(is_ident) && !after.is_some_and(is_ident)
    })
}

/// The columns of a TABLE_MAP event, with names, signedness, charsets and labels; `None`
/// when the event carries no column names (MINIMAL / NO_LOG metadata).
pub fn describe_table_map(
    tme: &TableMapEvent<'_>,
    collations: &HashMap<u16, String>,
) -> std::result::Result<Option<Vec<BinlogColumn>>, String> {
    let meta = OptionalMetaExtractor::new(tme.iter_optional_meta())
        .map_err(|e| format!("bad TABLE_MAP metadata: {e}"))?;
    let names: Vec<String> = meta
        .iter_column_name()
        .map(|n| n.map(|n| n.name().into_owned()))
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| format!("bad column names: {e}"))?;
    let count = tme.columns_count() as usize;
    if names.len() != count {
        return Ok(None);
    }
    // Labels as raw bytes in their column's character set (decoded below, per column).
    let mut enum_labels: Vec<Vec<Vec<u8>>> = Vec::new();
    let mut set_labels: Vec<Vec<Vec<u8>>> = Vec::new();
    let mut key_indexes = std::collections::BTreeSet::new();
    for field in tme.iter_optional_meta() {
        match field.map_err(|e| format!("bad TABLE_MAP metadata: {e}"))? {
            OptionalMetadataField::SimplePrimaryKey(key) => {
                for index in key.iter_indexes() {
                    key_indexes.insert(index.map_err(|e| format!("bad primary key: {e}"))?);
                }
            }
            OptionalMetadataField::PrimaryKeyWithPrefix(key) => {
                for part in key.iter_keys() {
                    let part = part.map_err(|e| format!("bad primary key: {e}"))?;
                    key_indexes.insert(part.column_index());
                }
            }
            OptionalMetadataField::EnumStrValue(values) => {
                for v in values.iter_values() {
                    let v = v.map_err(|e| format!("bad ENUM labels: {e}"))?;
                    enum_labels.push(v.values().iter().map(|s| s.value_raw().to_vec()).collect());
                }
            }
            OptionalMetadataField::SetStrValue(values) => {
                for v in values.iter_values() {
                    let v = v.map_err(|e| format!("bad SET labels: {e}"))?;
                    set_labels.push(v.values().iter().map(|s| s.value_raw().to_vec()).collect());
                }
            }
            _ => {}
        }
    }
    let (mut enums, mut sets) = (enum_labels.into_iter(), set_labels.into_iter());
    let mut signedness = meta.iter_signedness();
    let mut charsets = meta.iter_charset();
    let mut enum_set_charsets = meta.iter_enum_and_set_charset();
    let nullable = tme.null_bitmask();
    let mut columns = Vec::with_capacity(count);
    for (i, name) in names.into_iter().enumerate() {
        let raw = tme
            .get_column_type(i)
            .map_err(|e| format!("column {name}: {e}"))?
            .ok_or_else(|| format!("column {name} has no type"))?;
        let collation_name = |id: u16| {
            collations
                .get(&id)
                .cloned()
                .unwrap_or_else(|| format!("collation id {id}"))
        };
        let unsigned = raw.is_numeric_type() && signedness.next().unwrap_or(false);
        let charset = if raw.is_character_type() {
            charsets
                .next()
                .transpose()
                .map_err(|e| format!("bad charsets: {e}"))?
                .map(collation_name)
        } else if raw.is_enum_or_set_type() {
            enum_set_charsets
                .next()
                .transpose()
                .map_err(|e| format!("bad charsets: {e}"))?
                .map(collation_name)
        } else {
            None
        };
        let raw_labels = match raw {
            MyType::MYSQL_TYPE_ENUM => enums.next().unwrap_or_default(),
            MyType::MYSQL_TYPE_SET => sets.next().unwrap_or_default(),
            _ => Vec::new(),
        };
        let labels = raw_labels
            .into_iter()
            .map(|bytes| label_text(charset.as_deref(), bytes))
            .collect();
        columns.push(BinlogColumn {
            name,
            raw,
            meta: tme.get_column_metadata(i).unwrap_or_default().to_vec(),
            unsigned,
            nullable: nullable.get(i).is_some_and(|b| *b),
            charset,
            labels,
            plugin: None,
            key: key_indexes.contains(&(i as u64)),
        });
    }
    Ok(Some(columns))
}

/// What to do when a binlog cell has no form in its column's output type: the binlog
/// already holds the value, so fixing the row at the source cannot help the stream.
pub const UNREPRESENTABLE_HINT: &str = "the value is already in the binlog, so fixing the row does not help: for text bytes invalid in the column's character set, change the column to a binary type (ALTER TABLE … MODIFY … VARBINARY / BLOB); for a partial JSON diff, SET GLOBAL binlog_row_value_options = ''; then re-baseline the table (docs/operations.md#recovery)";

/// An ENUM / SET label's bytes, in its column's character set, as text: decoded by the
/// set ([`charset`]); a set without a decoding, or bytes invalid in it, as UTF-8 with
/// replacement characters (labels are DDL, not data).
fn label_text(set: Option<&str>, bytes: Vec<u8>) -> String {
    let set = set.unwrap_or("utf8mb4");
    let decoding = charset::decoding(set);
    if decoding.is_bytes() {
        return String::from_utf8_lossy(&bytes).into_owned();
    }
    charset::decode(decoding, set, bytes.clone())
        .unwrap_or_else(|_| String::from_utf8_lossy(&bytes).into_owned())
}

/// The field metadata of a column known only from the binlog (added or changed since the
/// open): the same forms [`super::schema::declared_metadata`] declares, from the binlog type.
fn binlog_metadata(col: &BinlogColumn) -> std::collections::BTreeMap<String, String> {
    match col.raw {
        MyType::MYSQL_TYPE_TIME | MyType::MYSQL_TYPE_TIME2 => {
            forms::metadata(forms::FORM_KEY, "text")
        }
        MyType::MYSQL_TYPE_GEOMETRY => forms::metadata(forms::FORM_KEY, "wkb"),
        MyType::MYSQL_TYPE_DATE | MyType::MYSQL_TYPE_NEWDATE => {
            forms::metadata(forms::ZERO_DATES_KEY, forms::ZERO_DATE_RULE)
        }
        MyType::MYSQL_TYPE_DATETIME
        | MyType::MYSQL_TYPE_DATETIME2
        | MyType::MYSQL_TYPE_TIMESTAMP
        | MyType::MYSQL_TYPE_TIMESTAMP2 => {
            forms::metadata(forms::ZERO_DATES_KEY, forms::ZERO_DATETIME_RULE)
        }
        _ => match col.charset.as_deref() {
            Some(set)
                if col.raw.is_character_type()
                    && charset::decoding(set) == charset::Decoding::Raw =>
            {
                forms::metadata(forms::CHARSET_KEY, &set.to_ascii_lowercase())
            }
            _ => Default::default(),
        },
    }
}

/// A captured table as one TABLE_MAP event describes it.
#[derive(Debug)]
pub struct MappedTable {
    pub schema: Arc<TableSchema>,
    pub columns: Vec<BinlogColumn>,
    /// The output type of each column (`schema`'s, in binlog column order).
    pub types: Vec<ColumnType>,
}

/// Builds the output schema of a TABLE_MAP event: binlog column order and names, the
/// declared type, key and source type where the binlog agrees with `information_schema`,
/// the binlog's own type where it does not (the table was altered since).
pub fn map_table(
    captured: &CapturedTable,
    columns: Vec<BinlogColumn>,
    at: &dyn std::fmt::Display,
) -> Result<MappedTable> {
    let mut columns = columns;
    for col in &mut columns {
        col.plugin = captured
            .column(&col.name)
            .and_then(|declared| Plugin::of_declared(&declared.source_type));
    }
    let mut out = Vec::with_capacity(columns.len());
    let mut unsupported = Vec::new();
    for col in &columns {
        let binlog = match binlog_type(col) {
            Ok(ty) => ty,
            Err(reason) => {
                unsupported.push(format!("{} at {at}: {reason}", col.name));
                continue;
            }
        };
        out.push(match captured.column(&col.name) {
            Some(declared) if compatible(&declared.ty, &binlog) => declared.clone(),
            Some(declared) => Column {
                ty: binlog,
                source_type: format!("{:?} (binlog)", col.raw),
                field_metadata: binlog_metadata(col),
                ..declared.clone()
            },
            None => Column {
                name: col.name.clone(),
                ty: binlog,
                nullable: col.nullable,
                // A table gone from the server has no declared key: the event's is it.
                key: captured.is_gone() && col.key,
                source_type: format!("{:?} (binlog)", col.raw),
                field_metadata: binlog_metadata(col),
            },
        });
    }
    crate::source::refuse_unsupported(
        &captured.config_name,
        &unsupported,
        "see the type table in docs/mysql.md; change each column to a supported type or stop capturing the table",
    )?;
    let schema = TableSchema {
        name: captured.config_name.clone(),
        columns: out,
    };
    let schema = if schema == *captured.shape {
        captured.shape.clone()
    } else {
        Arc::new(schema)
    };
    let types = schema.columns.iter().map(|c| c.ty.clone()).collect();
    Ok(MappedTable {
        schema,
        columns,
        types,
    })
}

/// What decoding a rows event's rows needs, as the binlog wrote it: a transaction too large
/// for memory keeps its rows events this way on disk and decodes them as it is emitted.
#[derive(Debug, Clone, Copy)]
pub struct LoggedRows<'a> {
    pub op: Op,
    pub before: Option<ImageColumns>,
    pub after: Option<ImageColumns>,
    /// The event's row images.
    pub data: &'a [u8],
}

/// A rows event reduced to [`LoggedRows`]; a partial JSON update (a diff, not the row) is
/// refused.
pub fn logged_rows<'a>(
    mapped: &MappedTable,
    rows: &'a RowsEventData<'_>,
    at: &dyn std::fmt::Display,
) -> Result<LoggedRows<'a>> {
    let op = match rows {
        RowsEventData::WriteRowsEvent(_) | RowsEventData::WriteRowsEventV1(_) => Op::Insert,
        RowsEventData::UpdateRowsEvent(_) | RowsEventData::UpdateRowsEventV1(_) => Op::Update,
        RowsEventData::DeleteRowsEvent(_) | RowsEventData::DeleteRowsEventV1(_) => Op::Delete,
        RowsEventData::PartialUpdateRowsEvent(_) => {
            return Err(Error::new(
                Code::SourcePrerequisite,
                format!("{} at {at}: a partial JSON update (PARTIAL_UPDATE_ROWS_EVENT) logs a diff, not the row", mapped.schema.name),
            )
            .hint("SET GLOBAL binlog_row_value_options = '' (and in every session that set it); then re-baseline the table"));
        }
    };
    Ok(LoggedRows {
        op,
        before: rows
            .columns_before_image()
            .map(|bits| ImageColumns::new(bits.iter().by_vals())),
        after: rows
            .columns_after_image()
            .map(|bits| ImageColumns::new(bits.iter().by_vals())),
        data: rows.rows_data(),
    })
}

/// Decodes the rows of a [`LoggedRows`] of `mapped`'s table, in order, into `sink`.
pub fn decode_logged(
    mapped: &MappedTable,
    rows: &LoggedRows<'_>,
    at: &dyn std::fmt::Display,
    mut sink: impl FnMut(RowChange) -> Result<()>,
) -> Result<()> {
    let op = rows.op;
    let images = RowImages::new(
        &mapped.columns,
        &mapped.types,
        rows.before,
        rows.after,
        rows.data,
    );
    for pair in images {
        let (before, after) = pair.map_err(|e| row_error(mapped, e, at))?;
        sink(RowChange {
            table: mapped.schema.clone(),
            op,
            before,
            after,
            before_unlogged: Vec::new(),
            after_unlogged: Vec::new(),
        })?;
    }
    Ok(())
}

/// The run's error for a row image that could not be decoded.
fn row_error(mapped: &MappedTable, error: RowError, at: &dyn std::fmt::Display) -> Error {
    let name = &mapped.schema.name;
    match error {
        RowError::PartialImage { present, total } => Error::new(
            Code::SourcePrerequisite,
            format!(
                "{name} at {at}: the row image has {present} of {total} columns (binlog_row_image is not FULL for the session that wrote it)"
            ),
        )
        .hint("SET GLOBAL binlog_row_image = 'FULL' and make sure no session overrides it; then re-baseline the table"),
        RowError::Cell { column, error } => {
            let col = &mapped.schema.columns[column];
            match error {
                CellError::Unrepresentable(reason) => Error::new(
                    Code::ValueUnrepresentable,
                    format!("{name}.{} ({}) at {at}: {reason}", col.name, col.source_type),
                )
                .hint(UNREPRESENTABLE_HINT),
                CellError::Malformed(reason) => malformed(name, at, &format!("column {}: {reason}", col.name)),
            }
        }
        RowError::Malformed(reason) => malformed(name, at, &reason),
    }
}

fn malformed(table: &str, at: &dyn std::fmt::Display, reason: &str) -> Error {
    Error::new(
        Code::SourceProtocol,
        format!("{table} at {at}: cannot decode a row: {reason}"),
    )
    .hint("the binlog event does not match its TABLE_MAP; report it with the run's log")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_known_only_from_the_binlog_declare_their_forms() {
        let col = |raw, charset: Option<&str>| BinlogColumn {
            name: "c".into(),
            raw,
            meta: vec![],
            unsigned: false,
            nullable: true,
            charset: charset.map(str::to_owned),
            labels: vec![],
            plugin: None,
            key: false,
        };
        let form = |raw, charset| binlog_metadata(&col(raw, charset));
        assert_eq!(form(MyType::MYSQL_TYPE_TIME2, None)["sluice.form"], "text");
        assert_eq!(
            form(MyType::MYSQL_TYPE_GEOMETRY, None)["sluice.form"],
            "wkb"
        );
        assert_eq!(
            form(MyType::MYSQL_TYPE_NEWDATE, None)["sluice.zero_dates"],
            forms::ZERO_DATE_RULE
        );
        assert_eq!(
            form(MyType::MYSQL_TYPE_TIMESTAMP2, None)["sluice.zero_dates"],
            forms::ZERO_DATETIME_RULE
        );
        assert_eq!(
            form(MyType::MYSQL_TYPE_VARCHAR, Some("keybcs2"))["sluice.charset"],
            "keybcs2"
        );
        assert!(form(MyType::MYSQL_TYPE_VARCHAR, Some("cp1250")).is_empty());
        assert!(form(MyType::MYSQL_TYPE_LONG, None).is_empty());
    }

    #[test]
    fn enum_labels_are_decoded_by_their_columns_set() {
        assert_eq!(label_text(Some("cp1250"), vec![0x9a, 0xe8]), "šč");
        assert_eq!(
            label_text(Some("utf8mb4"), "ünï".as_bytes().to_vec()),
            "ünï"
        );
        assert_eq!(label_text(Some("latin1"), vec![0xfc]), "ü");
        assert_eq!(label_text(None, b"a".to_vec()), "a");
        assert_eq!(label_text(Some("keybcs2"), b"ab".to_vec()), "ab");
    }

    #[test]
    fn maria_gtid_bodies_parse() {
        let mut body = Vec::new();
        body.extend_from_slice(&44u64.to_le_bytes());
        body.extend_from_slice(&7u32.to_le_bytes());
        body.push(MariaGtid::FL_STANDALONE | 32);
        let gtid = MariaGtid::parse(&body).unwrap();
        assert_eq!((gtid.seq_no, gtid.domain_id), (44, 7));
        assert!(gtid.standalone() && !gtid.xa());
        body[12] = 4 | MariaGtid::FL_PREPARED_XA;
        assert!(MariaGtid::parse(&body).unwrap().xa());
        assert!(MariaGtid::parse(&body[..12]).is_none());
    }

    #[test]
    fn unknown_events_that_may_carry_rows_are_refused() {
        assert_eq!(classify_unknown(162), UnknownEvent::Gtid);
        for skip in [160, 161, 163, 164] {
            assert_eq!(classify_unknown(skip), UnknownEvent::Skip, "{skip}");
        }
        for refuse in maria::FIRST_COMPRESSED..=maria::LAST_COMPRESSED {
            assert_eq!(classify_unknown(refuse), UnknownEvent::Refuse, "{refuse}");
        }
        assert_eq!(classify_unknown(200), UnknownEvent::Refuse);
    }

    #[test]
    fn partition_statements_that_move_rows_unlogged_are_recognised() {
        for sql in [
            "ALTER TABLE t TRUNCATE PARTITION p0",
            "/* app */ alter table `db`.`t` drop partition p0, p1",
            "ALTER ONLINE TABLE t EXCHANGE PARTITION p0 WITH TABLE t2",
            "ALTER TABLE t REORGANIZE PARTITION p0 INTO (PARTITION a VALUES LESS THAN (5))",
        ] {
            assert!(rewrites_partition_rows(sql), "{sql}");
        }
        for sql in [
            "ALTER TABLE t ADD PARTITION (PARTITION p9 VALUES LESS THAN (90))",
            "ALTER TABLE t DROP COLUMN partition_no",
            "TRUNCATE TABLE t",
            "CREATE TABLE t (id int) PARTITION BY HASH (id)",
        ] {
            assert!(!rewrites_partition_rows(sql), "{sql}");
        }
    }

    #[test]
    fn statements_are_classified() {
        use Statement::*;
        for (sql, want) in [
            ("BEGIN", Begin),
            ("COMMIT", Commit),
            ("ROLLBACK", Rollback),
            ("ROLLBACK TO SAVEPOINT a", Savepoint),
            ("SAVEPOINT a", Savepoint),
            ("XA END X'01'", Xa),
            ("/* app */ TRUNCATE TABLE orders", Truncate),
            ("truncate orders", Truncate),
            ("insert into t values (1)", Dml),
            ("-- c\nDELETE FROM t", Dml),
            ("CREATE TABLE t (id int)", Other),
            ("", Other),
        ] {
            assert_eq!(classify_statement(sql), want, "{sql}");
        }
    }

    #[test]
    fn table_mentions_are_whole_identifiers() {
        assert!(mentions_table("TRUNCATE TABLE `app`.`orders`", "orders"));
    }

    #[test]
    fn columns_added_with_a_value_for_existing_rows_are_told_apart() {
        for filled in [
            "ALTER TABLE t ADD COLUMN d int NOT NULL DEFAULT 7",
            "alter table `t` add d int default 7, ALGORITHM=INSTANT",
            "ALTER TABLE t ADD COLUMN d int NOT NULL",
            "ALTER TABLE t ADD COLUMN IF NOT EXISTS d int DEFAULT 1",
            "ALTER TABLE t ADD (a int, b int DEFAULT 2)",
            "ALTER TABLE t ADD COLUMN g int AS (id * 2) STORED",
            "ALTER TABLE t ADD g int GENERATED ALWAYS AS (id) VIRTUAL",
            "ALTER TABLE t ADD n bigint AUTO_INCREMENT UNIQUE",
            "ALTER TABLE t ADD s SERIAL",
            "ALTER TABLE t DROP COLUMN x, ADD COLUMN d int DEFAULT 0",
            "/* c */ ALTER ONLINE TABLE t ADD d datetime NOT NULL",
        ] {
            assert!(adds_filled_column(filled), "{filled}");
        }
        for plain in [
            "ALTER TABLE t ADD COLUMN d int",
            "ALTER TABLE t ADD COLUMN d int NULL COMMENT 'not null, as default'",
            "ALTER TABLE t ADD COLUMN `default` varchar(10)",
            "ALTER TABLE t ADD INDEX i (v)",
            "ALTER TABLE t ADD UNIQUE KEY u (v), ADD CONSTRAINT c CHECK (v <> 'x')",
            "ALTER TABLE t ADD PRIMARY KEY (id)",
            "ALTER TABLE t MODIFY v varchar(50) NOT NULL DEFAULT ''",
            "ALTER TABLE t ADD PARTITION (PARTITION p9 VALUES LESS THAN (900))",
            "CREATE TABLE t2 (id int NOT NULL DEFAULT 1)",
        ] {
            assert!(!adds_filled_column(plain), "{plain}");
        }
    }

    #[test]
    fn a_truncate_names_exactly_one_table() {
        let named = |db: Option<&str>, t: &str| Some((db.map(str::to_owned), t.to_owned()));
        assert_eq!(
            truncated_table("TRUNCATE TABLE orders"),
            named(None, "orders")
        );
        assert_eq!(truncated_table("truncate orders;"), named(None, "orders"));
        assert_eq!(
            truncated_table("/* app */ TRUNCATE TABLE `app`.`Orders` "),
            named(Some("app"), "Orders")
        );
        assert_eq!(
            truncated_table("TRUNCATE app.orders"),
            named(Some("app"), "orders")
        );
        assert_eq!(
            truncated_table("TRUNCATE TABLE `we``ird`.`t 1`"),
            named(Some("we`ird"), "t 1")
        );
        assert_eq!(truncated_table("TRUNCATE TABLE"), None);
        assert_eq!(truncated_table("TRUNCATE TABLE `open"), None);
        assert_eq!(
            truncated_table("TRUNCATE TABLE a, b"),
            None,
            "not one table: unsure"
        );
        assert_eq!(truncated_table("TRUNCATEX orders"), None);
        assert_eq!(truncated_table("ALTER TABLE t TRUNCATE PARTITION p0"), None);
        assert!(mentions_table("insert into ORDERS values (1)", "orders"));
        assert!(!mentions_table(
            "insert into orders_archive values (1)",
            "orders"
        ));
        assert!(!mentions_table(
            "insert into my_orders values (1)",
            "orders"
        ));
        assert!(mentions_table("update a, orders set x = 1", "orders"));
    }
}
