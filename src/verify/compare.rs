//! The pure comparison of `sluice verify`: rows reduced to fingerprints — per row its key
//! (arrow's binary row form of the key columns), the key as text for the report, and one
//! hash per column — and two sets of fingerprints judged key by key.
//!
//! Guarantees: two rows of one shape get equal fingerprints exactly when their key cells
//! are equal and (up to a 64-bit hash collision per column) every column is; a column's
//! hash is of its cell in the shape's type (the type the lake holds, after the cast the
//! fold applies), so a source row is compared in the form sluice writes it. A finding
//! names the key and the columns that differ, never a value. A table without a key is a
//! multiset of whole-row hashes compared by count.

use std::collections::{BTreeMap, HashMap};

use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_cast::display::{ArrayFormatter, FormatOptions};
use arrow_row::{RowConverter, SortField};
use serde::{Deserialize, Serialize};

use crate::error::{Code, Error, Result};
use crate::fold::{self, Shape};

/// One row's fingerprint: its key as text and a hash per column of the shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Print {
    pub key: String,
    pub cells: Vec<u64>,
}

/// The fingerprints of a keyed table's rows, by key bytes.
pub type Prints = HashMap<Vec<u8>, Print>;

/// How one key differs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Difference {
    /// The source has the key, the lake does not.
    MissingInLake,
    /// The lake has the key, the source does not.
    ExtraInLake,
    /// Both have it; these columns differ.
    Different { columns: Vec<String> },
}

/// One key that differs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    pub key: String,
    #[serde(flatten)]
    pub difference: Difference,
}

/// How the source's and the lake's fingerprint of one key compare; `None` when they are
/// equal (or neither has the key).
pub fn judge(source: Option<&Print>, lake: Option<&Print>, names: &[String]) -> Option<Difference> {
    match (source, lake) {
        (None, None) => None,
        (Some(_), None) => Some(Difference::MissingInLake),
        (None, Some(_)) => Some(Difference::ExtraInLake),
        (Some(s), Some(l)) => {
            let columns: Vec<String> = names
                .iter()
                .enumerate()
                .filter(|(i, _)| s.cells.get(*i) != l.cells.get(*i))
                .map(|(_, name)| name.clone())
                .collect();
            (!columns.is_empty()).then_some(Difference::Different { columns })
        }
    }
}

/// The findings of `keys` (each judged against both sides), in key-text order.
pub fn findings<'a>(
    keys: impl IntoIterator<Item = &'a Vec<u8>>,
    source: &Prints,
    lake: &Prints,
    names: &[String],
) -> Vec<(Vec<u8>, Finding)> {
    let mut out: Vec<(Vec<u8>, Finding)> = keys
        .into_iter()
        .filter_map(|k| {
            let (s, l) = (source.get(k), lake.get(k));
            let key = s.or(l)?.key.clone();
            judge(s, l, names).map(|difference| (k.clone(), Finding { key, difference }))
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out.dedup_by(|a, b| a.0 == b.0);
    out
}

/// The fingerprints of a keyed table's rows in `batch` (a table's columns, perhaps with
/// sluice's metadata columns, which are not read), added to `into`.
pub fn prints(batch: &RecordBatch, shape: &Shape, into: &mut Prints) -> Result<()> {
    if batch.num_rows() == 0 {
        return Ok(());
    }
    let arrays = fold::conformed(batch, shape)?;
    let keys = encode(&shape.key, &arrays, shape)?;
    let cells = column_hashes(&arrays, shape)?;
    let texts = key_texts(&shape.key, &arrays, shape)?;
    for (row, text) in texts.into_iter().enumerate() {
        into.insert(
            keys.row(row).as_ref().to_vec(),
            Print {
                key: text,
                cells: cells.iter().map(|c| c[row]).collect(),
            },
        );
    }
    Ok(())
}

/// A keyless table's rows as a multiset: whole-row hash → count, added to `into`.
pub fn multiset(batch: &RecordBatch, shape: &Shape, into: &mut BTreeMap<u64, i64>) -> Result<()> {
    if batch.num_rows() == 0 {
        return Ok(());
    }
    let arrays = fold::conformed(batch, shape)?;
    let all: Vec<usize> = (0..shape.fields.len()).collect();
    let rows = encode(&all, &arrays, shape)?;
    for row in rows.iter() {
        *into.entry(fold::fnv1a(row.as_ref())).or_default() += 1;
    }
    Ok(())
}

/// One whole-row hash whose count differs between the source and the lake.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CountFinding {
    /// The row's hash (hex), standing in for the row: a keyless row has no key to name.
    pub row_hash: String,
    pub source: i64,
    pub lake: i64,
}

/// The rows whose counts differ, in hash order.
pub fn multiset_findings(
    source: &BTreeMap<u64, i64>,
    lake: &BTreeMap<u64, i64>,
) -> Vec<CountFinding> {
    let mut hashes: Vec<&u64> = source.keys().chain(lake.keys()).collect();
    hashes.sort();
    hashes.dedup();
    hashes
        .into_iter()
        .filter_map(|h| {
            let (s, l) = (
                source.get(h).copied().unwrap_or(0),
                lake.get(h).copied().unwrap_or(0),
            );
            (s != l).then(|| CountFinding {
                row_hash: format!("{h:016x}"),
                source: s,
                lake: l,
            })
        })
        .collect()
}

fn encode(fields: &[usize], arrays: &[ArrayRef], shape: &Shape) -> Result<arrow_row::Rows> {
    let converter = RowConverter::new(
        fields
            .iter()
            .map(|&f| SortField::new(shape.fields[f].data_type().clone()))
            .collect(),
    )
    .map_err(|e| {
        Error::new(
            Code::FoldInput,
            "the table's columns have a type rows cannot be compared by".to_owned(),
        )
        .source(e)
    })?;
    let columns: Vec<ArrayRef> = fields.iter().map(|&f| arrays[f].clone()).collect();
    converter
        .convert_columns(&columns)
        .map_err(|e| Error::new(Code::Internal, "encoding rows".to_owned()).source(e))
}

/// Per column, per row: the hash of the cell's binary row form.
fn column_hashes(arrays: &[ArrayRef], shape: &Shape) -> Result<Vec<Vec<u64>>> {
    (0..shape.fields.len())
        .map(|f| {
            let rows = encode(&[f], arrays, shape)?;
            Ok(rows.iter().map(|r| fold::fnv1a(r.as_ref())).collect())
        })
        .collect()
}

/// Each row's key as `name=value` pairs (a key names a row; it is never a column's value
/// otherwise reported).
fn key_texts(key: &[usize], arrays: &[ArrayRef], shape: &Shape) -> Result<Vec<String>> {
    let options = FormatOptions::default().with_null("NULL");
    let formatters = key
        .iter()
        .map(|&k| ArrayFormatter::try_new(arrays[k].as_ref(), &options))
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| Error::new(Code::Internal, "formatting keys".to_owned()).source(e))?;
    let rows = arrays.first().map_or(0, |a| a.len());
    Ok((0..rows)
        .map(|row| {
            key.iter()
                .zip(&formatters)
                .map(|(&k, f)| format!("{}={}", shape.fields[k].name(), f.value(row)))
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use arrow_array::{Int64Array, StringArray};
    use arrow_schema::{DataType, Field, Schema};

    fn shape(keyed: bool) -> Shape {
        Shape {
            fields: vec![
                Field::new("id", DataType::Int64, true),
                Field::new("note", DataType::Utf8, true),
            ],
            key: if keyed { vec![0] } else { vec![] },
            fillable: vec![false, true],
        }
    }

    fn batch(ids: &[i64], notes: &[&str]) -> RecordBatch {
        RecordBatch::try_new(
            Arc::new(Schema::new(vec![
                Field::new("id", DataType::Int64, true),
                Field::new("note", DataType::Utf8, true),
            ])),
            vec![
                Arc::new(Int64Array::from(ids.to_vec())),
                Arc::new(StringArray::from(notes.to_vec())),
            ],
        )
        .unwrap()
    }

    fn names() -> Vec<String> {
        vec!["id".into(), "note".into()]
    }

    #[test]
    fn each_kind_of_difference_is_named_by_key_and_column() {
        let (mut source, mut lake) = (Prints::new(), Prints::new());
        prints(
            &batch(&[1, 2, 3], &["a", "b", "c"]),
            &shape(true),
            &mut source,
        )
        .unwrap();
        prints(
            &batch(&[1, 3, 4], &["a", "x", "d"]),
            &shape(true),
            &mut lake,
        )
        .unwrap();
        let keys: Vec<Vec<u8>> = source.keys().chain(lake.keys()).cloned().collect();
        let found: Vec<Finding> = findings(&keys, &source, &lake, &names())
            .into_iter()
            .map(|(_, f)| f)
            .collect();
        assert_eq!(
            found,
            vec![
                Finding {
                    key: "id=2".into(),
                    difference: Difference::MissingInLake
                },
                Finding {
                    key: "id=3".into(),
                    difference: Difference::Different {
                        columns: vec!["note".into()]
                    }
                },
                Finding {
                    key: "id=4".into(),
                    difference: Difference::ExtraInLake
                },
            ]
        );
    }

    #[test]
    fn a_cell_in_another_stored_type_compares_in_the_shapes() {
        let mut source = Prints::new();
        let narrow = RecordBatch::try_new(
            Arc::new(Schema::new(vec![
                Field::new("id", DataType::Int32, true),
                Field::new("note", DataType::Utf8, true),
            ])),
            vec![
                Arc::new(arrow_array::Int32Array::from(vec![7])),
                Arc::new(StringArray::from(vec!["n"])),
            ],
        )
        .unwrap();
        prints(&narrow, &shape(true), &mut source).unwrap();
        let mut lake = Prints::new();
        prints(&batch(&[7], &["n"]), &shape(true), &mut lake).unwrap();
        assert_eq!(source, lake);
    }

    #[test]
    fn a_keyless_table_compares_as_a_multiset() {
        let (mut source, mut lake) = (BTreeMap::new(), BTreeMap::new());
        multiset(
            &batch(&[1, 1, 2], &["a", "a", "b"]),
            &shape(false),
            &mut source,
        )
        .unwrap();
        multiset(
            &batch(&[1, 2, 2], &["a", "b", "b"]),
            &shape(false),
            &mut lake,
        )
        .unwrap();
        let found = multiset_findings(&source, &lake);
        assert_eq!(found.len(), 2);
        let mut counts: Vec<(i64, i64)> = found.iter().map(|f| (f.source, f.lake)).collect();
        counts.sort();
        assert_eq!(counts, vec![(1, 2), (2, 1)]);
        assert!(multiset_findings(&source, &source).is_empty());
    }

    #[test]
    fn equal_rows_judge_equal() {
        let p = Print {
            key: "id=1".into(),
            cells: vec![1, 2],
        };
        assert_eq!(judge(Some(&p), Some(&p), &names()), None);
        assert_eq!(judge(None, None, &names()), None);
    }
}
