//! A table's policy applied to its shape and rows: the output schema ([`Plan::output`])
//! and each image mapped onto it, and the row filter's verdict turned into the change a
//! replay of the filtered table needs.
//!
//! Guarantees: every image leaves here with the policy applied — an excluded column is not
//! in it, a hashed, masked or nulled column holds only its output — so what reaches a
//! spill file, a part or a manifest is the policy's output, never the raw value; the same
//! [`Plan`] serves the change stream and the baseline of every engine. A filtered UPDATE
//! is written as the filtered table sees it: into the filter an `insert`, out of it a
//! `delete` of the row's key, within it an `update`, outside it nothing; a change whose
//! verdict depends on a value the source did not log is kept (a delete of a key the table
//! never held replays as nothing).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::filter::{Compiled, Verdict};
use super::hash::Hasher;
use crate::change::{Column, ColumnType, Op, RowChange, TableSchema, Value};

/// The Parquet field metadata key naming a column's policy.
pub const POLICY_KEY: &str = "sluice.policy";
/// The Parquet field metadata key naming the hash key's id ([`Hasher::key_id`]).
pub const KEY_ID_KEY: &str = "sluice.policy_key_id";

/// What happens to one column's values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transform {
    Keep,
    Hash,
    Mask(Mask),
    Null,
}

/// `mask`: the last characters after a fill, or a fixed value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mask {
    KeepLast { keep: usize, fill: String },
    Value(String),
}

impl Mask {
    /// The `sluice.policy` value.
    pub fn describe(&self) -> String {
        match self {
            Mask::KeepLast { keep, .. } => format!("mask:keep_last={keep}"),
            Mask::Value(_) => "mask:value".to_owned(),
        }
    }

    fn apply(&self, ty: &ColumnType, value: &Value) -> Value {
        let Some(text) = super::text::text_form(ty, value) else {
            return Value::Null;
        };
        match self {
            Mask::Value(fixed) => Value::Text(fixed.clone()),
            Mask::KeepLast { keep, fill } => {
                let count = text.chars().count();
                if count <= *keep {
                    return Value::Text(fill.clone());
                }
                let tail: String = text.chars().skip(count - keep).collect();
                Value::Text(format!("{fill}{tail}"))
            }
        }
    }
}

/// A table's policy resolved against one of its shapes.
#[derive(Debug)]
pub struct Plan {
    /// The shape written: the source's minus excluded columns, with each column's
    /// output type and `sluice.policy` metadata.
    pub output: Arc<TableSchema>,
    /// Per output column: its source column's index and what happens to its values.
    columns: Vec<(usize, Transform)>,
    /// The row filter sluice evaluates (none where the source filters).
    filter: Option<Compiled>,
    /// Nothing excluded or transformed: images pass as they are.
    identity: bool,
    hasher: Option<Arc<Hasher>>,
    source_types: Vec<ColumnType>,
}

impl Plan {
    /// The plan of `source` under `transforms` (by column name; absent: keep) without the
    /// columns `excluded` says, filtered by `filter` when sluice evaluates it.
    pub(super) fn new(
        source: &Arc<TableSchema>,
        excluded: impl Fn(&Column) -> bool,
        transforms: &BTreeMap<String, Transform>,
        filter: Option<Compiled>,
        hasher: Option<Arc<Hasher>>,
    ) -> Plan {
        let mut columns = Vec::with_capacity(source.columns.len());
        let mut out = Vec::with_capacity(source.columns.len());
        for (i, column) in source.columns.iter().enumerate() {
            if excluded(column) {
                continue;
            }
            let transform = transforms
                .get(&column.name)
                .cloned()
                .unwrap_or(Transform::Keep);
            let mut written = column.clone();
            match &transform {
                Transform::Keep => {}
                Transform::Hash => {
                    written.ty = hasher
                        .as_ref()
                        .map_or(ColumnType::Utf8, |h| h.output_type());
                    written.field_metadata =
                        [(POLICY_KEY.to_owned(), super::hash::FORMAT.to_owned())]
                            .into_iter()
                            .chain(
                                hasher
                                    .as_ref()
                                    .map(|h| (KEY_ID_KEY.to_owned(), h.key_id().to_owned())),
                            )
                            .collect();
                }
                Transform::Mask(mask) => {
                    written.ty = ColumnType::Utf8;
                    written.field_metadata = [(POLICY_KEY.to_owned(), mask.describe())].into();
                }
                Transform::Null => {
                    written.nullable = true;
                    written
                        .field_metadata
                        .insert(POLICY_KEY.to_owned(), "null".to_owned());
                }
            }
            columns.push((i, transform));
            out.push(written);
        }
        let identity = columns.len() == source.columns.len()
            && columns.iter().all(|(_, t)| *t == Transform::Keep);
        let output = if identity {
            source.clone()
        } else {
            Arc::new(TableSchema {
                name: source.name.clone(),
                columns: out,
            })
        };
        Plan {
            output,
            columns,
            filter,
            identity,
            hasher,
            source_types: source.columns.iter().map(|c| c.ty.clone()).collect(),
        }
    }

    /// True when the plan changes neither shape nor values nor which rows are captured.
    pub fn is_identity(&self) -> bool {
        self.identity && self.filter.is_none()
    }

    /// The filter's verdict on a source image.
    pub fn verdict(&self, image: &[Value], unlogged: &[usize]) -> Verdict {
        match &self.filter {
            None => Verdict::In,
            Some(f) => f.verdict(image, unlogged),
        }
    }

    /// A source image (positional over the plan's source shape) as the output image.
    pub fn image(&self, mut values: Vec<Value>) -> Vec<Value> {
        if self.identity {
            return values;
        }
        self.columns
            .iter()
            .map(|(i, transform)| {
                let value = values
                    .get_mut(*i)
                    .map(|v| std::mem::replace(v, Value::Null))
                    .unwrap_or(Value::Null);
                match transform {
                    Transform::Keep => value,
                    Transform::Null => Value::Null,
                    Transform::Hash => match &self.hasher {
                        Some(h) => h.hash(&self.source_types[*i], &value),
                        None => Value::Null,
                    },
                    Transform::Mask(mask) => mask.apply(&self.source_types[*i], &value),
                }
            })
            .collect()
    }

    /// The source's unlogged column indexes as output indexes (a nulled column's value is
    /// NULL whether logged or not, so it is never unlogged).
    pub fn unlogged(&self, unlogged: Vec<usize>) -> Vec<usize> {
        if self.identity || unlogged.is_empty() {
            return unlogged;
        }
        self.columns
            .iter()
            .enumerate()
            .filter(|(_, (i, t))| unlogged.contains(i) && *t != Transform::Null)
            .map(|(out, _)| out)
            .collect()
    }

    /// A source change as the filtered, transformed change it is written as; `None` when
    /// the filtered table does not see it.
    pub fn change(&self, change: RowChange) -> Option<RowChange> {
        let RowChange {
            op,
            before,
            after,
            before_unlogged,
            after_unlogged,
            ..
        } = change;
        let (op, before, after, before_unlogged, after_unlogged) = if self.filter.is_none() {
            (op, before, after, before_unlogged, after_unlogged)
        } else {
            let verdict = |image: &Option<Vec<Value>>, unlogged: &[usize]| match image {
                Some(image) => self.verdict(image, unlogged),
                None => Verdict::Unknown,
            };
            match op {
                Op::Insert => match verdict(&after, &after_unlogged) {
                    Verdict::Out => return None,
                    _ => (op, before, after, before_unlogged, after_unlogged),
                },
                Op::Delete => match verdict(&before, &before_unlogged) {
                    Verdict::Out => return None,
                    _ => (op, before, after, before_unlogged, after_unlogged),
                },
                Op::Update => {
                    let old = verdict(&before, &before_unlogged);
                    match (old, verdict(&after, &after_unlogged)) {
                        (Verdict::Out, Verdict::Out) => return None,
                        // Into the filter: the row appears.
                        (Verdict::Out, _) => (Op::Insert, None, after, vec![], after_unlogged),
                        // Out of it: the row's key disappears.
                        (_, Verdict::Out) => match before {
                            Some(before) => {
                                (Op::Delete, Some(before), None, before_unlogged, vec![])
                            }
                            None => (Op::Delete, after, None, after_unlogged, vec![]),
                        },
                        _ => (op, before, after, before_unlogged, after_unlogged),
                    }
                }
                _ => (op, before, after, before_unlogged, after_unlogged),
            }
        };
        Some(RowChange {
            table: self.output.clone(),
            op,
            before: before.map(|v| self.image(v)),
            after: after.map(|v| self.image(v)),
            before_unlogged: self.unlogged(before_unlogged),
            after_unlogged: self.unlogged(after_unlogged),
        })
    }
}
