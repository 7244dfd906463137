//! A table's schema history: every shape its change parts have had, in stream order,
//! each with the first position written in it and what changed from the shape before.
//!
//! Guarantees: versions number a table's shapes 1, 2, 3, … in the order the stream met
//! them; a shape's `since` is the `__pos` of the first change written in it (a part never
//! mixes shapes, so it is the `first_pos` of the first part that carries the version);
//! `changes` lists, against the shape before, each column added, dropped, widened or
//! otherwise retyped, and a nullability change — a drop and an add at once is what a
//! rename looks like (the table is then re-baselined; its `rebaseline` row says so).
//! [`History::observe`] is deterministic: the same parts in the same order give the same
//! history, so a run that writes again what a crashed run wrote gives the same versions.
//! The document is a public contract (docs/output.md, Schema history), versioned by
//! `format_version` (currently 1).

use serde::{Deserialize, Serialize};

use super::columns::ManifestColumn;
use crate::error::{Code, Error, Result};

/// What changed about one column between two consecutive shapes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShapeChange {
    /// `add`, `drop`, `widen` (a type that holds every old value), `retype` (any other
    /// type change), `nullable` or `not_null`.
    pub kind: String,
    pub column: String,
    /// The old and the new sluice type (`widen`, `retype`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
}

/// One shape of a table in the stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shape {
    pub version: u32,
    /// `__pos` of the first change written in this shape.
    pub since: String,
    /// The run that first wrote it.
    pub run_id: String,
    pub columns: Vec<ManifestColumn>,
    /// Against the previous version; empty for version 1.
    pub changes: Vec<ShapeChange>,
}

/// `<table>/_schema_history.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct History {
    pub format_version: u32,
    pub table: String,
    pub shapes: Vec<Shape>,
}

/// The key of a table's schema history below the job's prefix.
pub fn history_key(table: &str) -> String {
    format!("{table}/_schema_history.json")
}

impl History {
    /// The current `format_version`.
    pub const FORMAT_VERSION: u32 = 1;

    /// A history without shapes.
    pub fn empty(table: &str) -> Self {
        History {
            format_version: Self::FORMAT_VERSION,
            table: table.to_owned(),
            shapes: Vec::new(),
        }
    }

    /// Parses a stored document.
    pub fn parse(table: &str, body: &[u8]) -> Result<Self> {
        let history: History = serde_json::from_slice(body).map_err(|e| {
            Error::new(
                Code::StateCorrupt,
                format!("{} is not a sluice schema history", history_key(table)),
            )
            .hint("restore the object from a version, or delete it: the next run starts a new history at its first change")
            .source(e)
        })?;
        if history.format_version > Self::FORMAT_VERSION {
            return Err(Error::new(
                Code::StateCorrupt,
                format!(
                    "{} has format_version {}, newer than this sluice reads ({})",
                    history_key(table),
                    history.format_version,
                    Self::FORMAT_VERSION
                ),
            )
            .hint("run the sluice release that wrote it, or a newer one"));
        }
        Ok(history)
    }

    /// The latest shape.
    pub fn current(&self) -> Option<&Shape> {
        self.shapes.last()
    }

    /// The version of a part of `columns` whose first change is at `first_pos`, written
    /// by `run_id`: the current one when the shape is unchanged, else a new version
    /// (returned second) that starts at `first_pos`.
    pub fn observe(
        &mut self,
        columns: &[ManifestColumn],
        first_pos: &str,
        run_id: &str,
    ) -> (u32, Option<Shape>) {
        if let Some(current) = self.current()
            && current.columns == columns
        {
            return (current.version, None);
        }
        let changes = self
            .current()
            .map(|c| changes(&c.columns, columns))
            .unwrap_or_default();
        let shape = Shape {
            version: self.current().map_or(1, |c| c.version + 1),
            since: first_pos.to_owned(),
            run_id: run_id.to_owned(),
            columns: columns.to_vec(),
            changes,
        };
        self.shapes.push(shape.clone());
        (shape.version, Some(shape))
    }

    /// Adds `shapes` another run recorded (an interrupted run's, settled later) that this
    /// history lacks, keeping versions in order; a shape already present is skipped.
    pub fn merge(&mut self, shapes: &[Shape]) {
        for shape in shapes {
            if self.shapes.iter().any(|s| s.version == shape.version) {
                continue;
            }
            self.shapes.push(shape.clone());
        }
        self.shapes.sort_by_key(|s| s.version);
    }

    /// The document as pretty-printed JSON.
    pub fn to_json_bytes(&self) -> Result<Vec<u8>> {
        serde_json::to_vec_pretty(self)
            .map_err(|e| Error::new(Code::Internal, "serializing _schema_history.json").source(e))
    }
}

/// The changes from `old` to `new`, in `new`'s column order, drops last.
pub fn changes(old: &[ManifestColumn], new: &[ManifestColumn]) -> Vec<ShapeChange> {
    let change = |kind: &str, column: &str, from: Option<&str>, to: Option<&str>| ShapeChange {
        kind: kind.to_owned(),
        column: column.to_owned(),
        from: from.map(str::to_owned),
        to: to.map(str::to_owned),
    };
    let mut out = Vec::new();
    for column in new {
        match old.iter().find(|c| c.name == column.name) {
            None => out.push(change("add", &column.name, None, None)),
            Some(before) => {
                if before.ty != column.ty {
                    let kind = if widens(&before.ty, &column.ty) {
                        "widen"
                    } else {
                        "retype"
                    };
                    out.push(change(
                        kind,
                        &column.name,
                        Some(&before.ty),
                        Some(&column.ty),
                    ));
                }
                if before.nullable != column.nullable {
                    let kind = if column.nullable {
                        "nullable"
                    } else {
                        "not_null"
                    };
                    out.push(change(kind, &column.name, None, None));
                }
            }
        }
    }
    for column in old.iter().filter(|c| !new.iter().any(|n| n.name == c.name)) {
        out.push(change("drop", &column.name, None, None));
    }
    out
}

/// True when every value of sluice type `from` is a value of `to`: the widenings a part
/// writer continues in place ([`crate::change::ColumnType::widens_to`], on type names).
fn widens(from: &str, to: &str) -> bool {
    let bits = |t: &str, prefix: &str| -> Option<u32> { t.strip_prefix(prefix)?.parse().ok() };
    if let (Some(a), Some(b)) = (from.strip_prefix("list<"), to.strip_prefix("list<")) {
        return match (a.strip_suffix('>'), b.strip_suffix('>')) {
            (Some(a), Some(b)) => widens(a, b),
            _ => false,
        };
    }
    match (
        bits(from, "int"),
        bits(from, "uint"),
        bits(to, "int"),
        bits(to, "uint"),
    ) {
        (Some(n), _, Some(m), _) | (_, Some(n), _, Some(m)) | (_, Some(n), Some(m), _) => {
            return m > n;
        }
        _ => {}
    }
    if from == "float32" && to == "float64" {
        return true;
    }
    let decimal = |t: &str| -> Option<(i32, i32)> {
        let inner = t.strip_prefix("decimal(")?.strip_suffix(')')?;
        let (p, s) = inner.split_once(',')?;
        Some((p.trim().parse().ok()?, s.trim().parse().ok()?))
    };
    if let (Some((p1, s1)), Some((p2, s2))) = (decimal(from), decimal(to)) {
        return (p1, s1) != (p2, s2) && s2 >= s1 && p2 - s2 >= p1 - s1;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(name: &str, ty: &str, nullable: bool) -> ManifestColumn {
        ManifestColumn {
            name: name.into(),
            ty: ty.into(),
            source_type: ty.into(),
            nullable,
            key: name == "id",
            policy: None,
        }
    }

    #[test]
    fn each_kind_of_change_is_named_against_the_shape_before() {
        let old = [
            col("id", "int32", false),
            col("a", "int32", true),
            col("b", "utf8", true),
            col("c", "decimal(10,2)", true),
            col("gone", "utf8", true),
        ];
        let new = [
            col("id", "int64", false),
            col("a", "utf8", true),
            col("b", "utf8", false),
            col("c", "decimal(12,2)", true),
            col("d", "int32", true),
        ];
        let got: Vec<(String, String)> = changes(&old, &new)
            .into_iter()
            .map(|c| (c.kind, c.column))
            .collect();
        let want = [
            ("widen", "id"),
            ("retype", "a"),
            ("not_null", "b"),
            ("widen", "c"),
            ("add", "d"),
            ("drop", "gone"),
        ];
        assert_eq!(
            got,
            want.map(|(k, c)| (k.to_owned(), c.to_owned())).to_vec()
        );
        for (from, to, wider) in [
            ("decimal(12,2)", "decimal(12,3)", false),
            ("decimal(12,2)", "decimal(14,3)", true),
            ("int64", "int32", false),
            ("uint32", "int64", true),
            ("uint32", "int32", false),
            ("int8", "uint16", false),
            ("list<int32>", "list<int64>", true),
            ("list<int64>", "list<int32>", false),
            ("utf8", "int64", false),
        ] {
            assert_eq!(widens(from, to), wider, "{from} -> {to}");
        }
    }

    #[test]
    fn observing_the_same_parts_again_gives_the_same_versions() {
        let v1 = [col("id", "int32", false)];
        let v2 = [col("id", "int32", false), col("d", "int32", true)];
        let run = |h: &mut History| {
            vec![
                h.observe(&v1, "A", "r1").0,
                h.observe(&v1, "B", "r1").0,
                h.observe(&v2, "C", "r1").0,
                h.observe(&v2, "D", "r1").0,
            ]
        };
        let mut first = History::empty("t");
        assert_eq!(run(&mut first), [1, 1, 2, 2]);
        assert_eq!(first.shapes[1].since, "C");
        assert_eq!(first.shapes[1].changes[0].kind, "add");
        // A run after a crash starts from the history without the crashed run's shapes
        // and writes the same parts again: the same versions.
        let mut again = History::empty("t");
        assert_eq!(run(&mut again), [1, 1, 2, 2]);
        assert_eq!(again, first);
        // Merging the crashed run's shapes into a history that has them changes nothing.
        let mut merged = first.clone();
        merged.merge(&again.shapes);
        assert_eq!(merged, first);
        let mut late = History::empty("t");
        late.merge(&first.shapes[1..]);
        late.merge(&first.shapes[..1]);
        assert_eq!(late, first);
    }

    #[test]
    fn a_document_from_a_newer_sluice_or_not_json_is_refused_with_a_code() {
        let mut h = History::empty("t");
        h.format_version = 9;
        let body = h.to_json_bytes().unwrap();
        let e = History::parse("t", &body).unwrap_err();
        assert_eq!(e.code(), Code::StateCorrupt);
        assert!(History::parse("t", b"{").is_err());
        let ok = History::empty("t").to_json_bytes().unwrap();
        assert_eq!(History::parse("t", &ok).unwrap(), History::empty("t"));
    }
}
