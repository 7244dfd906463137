//! The row images of a rows event, bytes → values. Pure.
//!
//! A rows event carries, per row, a before image (UPDATE, DELETE) and/or an after image
//! (WRITE, UPDATE); each image is a NULL bitmap over the columns the event says are
//! present, then the non-NULL cells back to back. [`RowImages`] walks those bytes and
//! decodes every cell through [`cell::decode_cell_as`], the fuzzed per-cell path, so the
//! drain never runs a decoder the fuzz target and property tests do not.
//!
//! Guarantees: for any bytes it yields rows or one error and then stops — never a panic,
//! never a read past the event; an image that lacks any column of the table is refused
//! (FULL row images are required), never padded; each row is decoded exactly once.

use super::cell::{self, CellError};
use super::values::BinlogColumn;
use crate::change::{ColumnType, Value};

/// Why a row image could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RowError {
    /// The image holds `present` of the table's `total` columns (not a FULL row image).
    PartialImage { present: usize, total: usize },
    /// The cell of column `column` could not be decoded or represented.
    Cell { column: usize, error: CellError },
    /// The bytes end inside a row, or the event does not match its columns.
    Malformed(String),
}

/// How many of the table's columns an image of the event carries (from the event's
/// column bitmap, counted once per event).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageColumns {
    present: usize,
    listed: usize,
}

impl ImageColumns {
    /// Columns the image carries and columns the bitmap lists.
    pub fn counts(self) -> (usize, usize) {
        (self.present, self.listed)
    }

    /// From [`ImageColumns::counts`].
    pub fn from_counts(present: usize, listed: usize) -> ImageColumns {
        ImageColumns { present, listed }
    }

    /// From the event's column bitmap, one flag per column.
    pub fn new(present: impl IntoIterator<Item = bool>) -> ImageColumns {
        present.into_iter().fold(
            ImageColumns {
                present: 0,
                listed: 0,
            },
            |n, p| ImageColumns {
                present: n.present + usize::from(p),
                listed: n.listed + 1,
            },
        )
    }

    fn check_full(self, total: usize) -> Result<(), RowError> {
        if self.listed != total || self.present != total {
            return Err(RowError::PartialImage {
                present: self.present,
                total,
            });
        }
        Ok(())
    }
}

/// One decoded row: before and after image, as the event type carries them.
pub type RowPair = (Option<Vec<Value>>, Option<Vec<Value>>);

/// Iterator over the rows of one rows event.
pub struct RowImages<'a> {
    columns: &'a [BinlogColumn],
    types: &'a [ColumnType],
    /// Which images each row carries.
    before: bool,
    after: bool,
    data: &'a [u8],
    /// Why the event cannot be decoded at all (checked once, reported at the first row).
    refused: Option<RowError>,
    failed: bool,
}

impl<'a> RowImages<'a> {
    /// Rows of `data` (the event's rows section) for a table of `columns`, decoded into
    /// `types` (the output columns' types, one per column).
    pub fn new(
        columns: &'a [BinlogColumn],
        types: &'a [ColumnType],
        before: Option<ImageColumns>,
        after: Option<ImageColumns>,
        data: &'a [u8],
    ) -> RowImages<'a> {
        let refused = if types.len() != columns.len() {
            Some(RowError::Malformed(format!(
                "{} output types for {} columns",
                types.len(),
                columns.len()
            )))
        } else if before.is_none() && after.is_none() {
            Some(RowError::Malformed("a rows event with no image".to_owned()))
        } else {
            [before, after]
                .into_iter()
                .flatten()
                .find_map(|image| image.check_full(columns.len()).err())
        };
        RowImages {
            columns,
            types,
            before: before.is_some(),
            after: after.is_some(),
            data,
            refused,
            failed: false,
        }
    }

    fn next_row(&mut self) -> Result<RowPair, RowError> {
        if let Some(refused) = self.refused.take() {
            return Err(refused);
        }
        let (columns, types) = (self.columns, self.types);
        let mut data = self.data;
        let mut decode = |carried: bool| {
            carried
                .then(|| decode_image(columns, types, &mut data))
                .transpose()
        };
        let before = decode(self.before)?;
        let after = decode(self.after)?;
        self.data = data;
        Ok((before, after))
    }
}

impl Iterator for RowImages<'_> {
    type Item = Result<RowPair, RowError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.data.is_empty() {
            return None;
        }
        let row = self.next_row();
        self.failed = row.is_err();
        Some(row)
    }
}

/// Decodes one image at the start of `data` and moves `data` past it.
fn decode_image(
    columns: &[BinlogColumn],
    types: &[ColumnType],
    data: &mut &[u8],
) -> Result<Vec<Value>, RowError> {
    let nulls_len = columns.len().div_ceil(8);
    let Some((nulls, mut rest)) = data.split_at_checked(nulls_len) else {
        return Err(RowError::Malformed(format!(
            "a row image ends inside its NULL bitmap ({} of {nulls_len} bytes)",
            data.len()
        )));
    };
    let mut values = Vec::with_capacity(columns.len());
    for (i, (col, ty)) in columns.iter().zip(types).enumerate() {
        if nulls[i / 8] & (1 << (i % 8)) != 0 {
            values.push(Value::Null);
            continue;
        }
        let (value, used) = cell::decode_cell_as(col, ty, rest)
            .map_err(|error| RowError::Cell { column: i, error })?;
        rest = &rest[used..];
        values.push(value);
    }
    *data = rest;
    Ok(values)
}

#[cfg(test)]
mod tests {
    use mysql_async::consts::ColumnType as MyType;
    use proptest::prelude::*;

    use super::*;

    fn col(name: &str, raw: MyType, meta: &[u8]) -> BinlogColumn {
        BinlogColumn {
            name: name.into(),
            raw,
            meta: meta.to_vec(),
            unsigned: false,
            nullable: true,
            charset: Some("utf8mb4".into()),
            labels: vec![],
            plugin: None,
            key: false,
        }
    }

    fn table() -> (Vec<BinlogColumn>, Vec<ColumnType>) {
        (
            vec![
                col("id", MyType::MYSQL_TYPE_LONG, &[]),
                col("v", MyType::MYSQL_TYPE_VARCHAR, &[0xff, 0]),
            ],
            vec![ColumnType::Int32, ColumnType::Utf8],
        )
    }

    fn all(n: usize) -> Option<ImageColumns> {
        Some(ImageColumns::new(std::iter::repeat_n(true, n)))
    }

    /// One image of (id, v): NULL bitmap, then the non-NULL cells.
    fn image(id: Option<i32>, v: Option<&str>) -> Vec<u8> {
        let nulls = u8::from(id.is_none()) | (u8::from(v.is_none()) << 1);
        let mut out = vec![nulls];
        if let Some(id) = id {
            out.extend_from_slice(&id.to_le_bytes());
        }
        if let Some(v) = v {
            out.push(v.len() as u8);
            out.extend_from_slice(v.as_bytes());
        }
        out
    }

    #[test]
    fn write_update_and_delete_images_decode_in_order() {
        let (columns, types) = table();
        let mut data = image(Some(1), Some("a"));
        data.extend(image(Some(2), None));
        let rows: Vec<_> = RowImages::new(&columns, &types, None, all(2), &data)
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(
            rows,
            vec![
                (None, Some(vec![Value::Int(1), Value::Text("a".into())])),
                (None, Some(vec![Value::Int(2), Value::Null])),
            ]
        );
        let mut data = image(Some(1), Some("a"));
        data.extend(image(Some(1), Some("héllo")));
        let rows: Vec<_> = RowImages::new(&columns, &types, all(2), all(2), &data)
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(
            rows,
            vec![(
                Some(vec![Value::Int(1), Value::Text("a".into())]),
                Some(vec![Value::Int(1), Value::Text("héllo".into())])
            )]
        );
        let data = image(None, None);
        let rows: Vec<_> = RowImages::new(&columns, &types, all(2), None, &data)
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(rows, vec![(Some(vec![Value::Null, Value::Null]), None)]);
    }

    #[test]
    fn a_partial_image_is_refused_not_padded() {
        let (columns, types) = table();
        let data = image(Some(1), None);
        let present = Some(ImageColumns::new([true, false]));
        let err = RowImages::new(&columns, &types, None, present, &data)
            .next()
            .unwrap()
            .unwrap_err();
        assert_eq!(
            err,
            RowError::PartialImage {
                present: 1,
                total: 2
            }
        );
    }

    #[test]
    fn a_truncated_row_is_malformed_and_ends_the_walk() {
        let (columns, types) = table();
        let mut data = image(Some(1), Some("abc"));
        data.truncate(data.len() - 1);
        let mut rows = RowImages::new(&columns, &types, None, all(2), &data);
        assert!(matches!(
            rows.next(),
            Some(Err(RowError::Cell {
                column: 1,
                error: CellError::Malformed(_)
            }))
        ));
        assert_eq!(rows.next(), None);
    }

    #[test]
    fn an_unrepresentable_cell_names_its_column() {
        let columns = vec![
            col("id", MyType::MYSQL_TYPE_LONG, &[]),
            col("e", MyType::MYSQL_TYPE_ENUM, &[247, 1]),
        ];
        let types = vec![ColumnType::Int32, ColumnType::Utf8];
        // id = 7, e = index 3 of an ENUM whose labels the TABLE_MAP did not carry.
        let data = [0u8, 7, 0, 0, 0, 3];
        let err = RowImages::new(&columns, &types, None, all(2), &data)
            .next()
            .unwrap()
            .unwrap_err();
        assert!(
            matches!(&err, RowError::Cell { column: 1, error: CellError::Unrepresentable(r) } if r.contains("no label")),
            "{err:?}"
        );
    }

    #[test]
    fn a_negative_time_is_its_text_not_a_stop() {
        let columns = vec![
            col("id", MyType::MYSQL_TYPE_LONG, &[]),
            col("t", MyType::MYSQL_TYPE_TIME2, &[2]),
        ];
        let types = vec![ColumnType::Int32, ColumnType::Utf8];
        // id = 7, t = -00:00:01.50
        let data = [0u8, 7, 0, 0, 0, 0x7f, 0xff, 0xfe, 0xce];
        let row = RowImages::new(&columns, &types, None, all(2), &data)
            .next()
            .unwrap()
            .unwrap();
        assert_eq!(
            row.1,
            Some(vec![Value::Int(7), Value::Text("-00:00:01.50".into())])
        );
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..64), before in any::<bool>()) {
            let (columns, types) = table();
            let images = if before { (all(2), all(2)) } else { (None, all(2)) };
            let mut consumed = 0;
            for row in RowImages::new(&columns, &types, images.0, images.1, &data) {
                consumed += 1;
                prop_assert!(consumed <= data.len(), "more rows than bytes");
                if row.is_err() {
                    break;
                }
            }
        }

        #[test]
        fn encoded_rows_decode_to_themselves(rows in proptest::collection::vec((any::<Option<i32>>(), proptest::option::of("\\PC{0,20}")), 1..20)) {
            let (columns, types) = table();
            let data: Vec<u8> = rows.iter().flat_map(|(id, v)| image(*id, v.as_deref())).collect();
            let decoded: Vec<_> = RowImages::new(&columns, &types, None, all(2), &data)
                .collect::<Result<_, _>>()
                .unwrap();
            let expected: Vec<RowPair> = rows
                .iter()
                .map(|(id, v)| {
                    (None, Some(vec![
                        id.map_or(Value::Null, |i| Value::Int(i.into())),
                        v.clone().map_or(Value::Null, Value::Text),
                    ]))
                })
                .collect();
            prop_assert_eq!(decoded, expected);
        }
    }
}
