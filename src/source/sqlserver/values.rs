//! SQL Server column types and cell values: catalog type → [`ColumnType`], and tiberius
//! [`ColumnData`] → [`Value`], as pure functions.
//!
//! Guarantees: every supported type maps to an exact output type; a cell is converted
//! exactly or refused with a message (never rounded silently, never NULL in place of a
//! value). Specifics:
//! * `money` / `smallmoney` are read through `CAST(… AS decimal(19,4) / decimal(10,4))`
//!   in the select list, because tiberius decodes money as `f64` (inexact above 2^53).
//! * `time`, `datetime2` and `datetimeoffset` carry up to 100 ns; a value with a non-zero
//!   sub-microsecond digit (possible at precision 7) is refused, not truncated.
//! * `datetime` counts 1/300 s; it is rounded to the nearest microsecond, which keeps
//!   every digit SQL Server itself prints for it (milliseconds).
//! * `datetimeoffset` is written as the UTC instant (TDS sends it in UTC plus an offset).
//! * `uniqueidentifier` is the canonical lower-case hyphenated text; `xml` its text.
//! * No column is refused for its type: `geometry` / `geography` are read as WKB
//!   (`AsBinaryZM()`, Z and M kept; the SRID is not in WKB), declared `sluice.form = wkb`;
//!   `hierarchyid` as its path text (`ToString()`), `sql_variant` as the text of its value
//!   in an exact style for its base type ([`super::queries::select_expr`]), and any other type (a CLR
//!   type, one added in a later SQL Server) as `CONVERT(nvarchar(max), …)` — all declared
//!   `sluice.form = text`.

use tiberius::ColumnData;

use crate::change::{ColumnType, Value};

/// Microseconds per day.
pub(super) const DAY_US: i64 = 86_400_000_000;
/// Days from 0001-01-01 (the `date`/`datetime2` epoch) to 1970-01-01.
pub(super) const DAYS_0001_TO_1970: i64 = 719_162;
/// Days from 1900-01-01 (the `datetime`/`smalldatetime` epoch) to 1970-01-01.
pub(super) const DAYS_1900_TO_1970: i64 = 25_567;

/// A captured column as the catalog describes it (change-table type, source nullability).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaptureColumn {
    pub name: String,
    /// The base system type name (`TYPE_NAME(system_type_id)`), e.g. `nvarchar`.
    pub type_name: String,
    /// `sys.columns.max_length` in bytes; -1 for `(max)`.
    pub max_length: i32,
    pub precision: i32,
    pub scale: i32,
    /// Computed columns are captured as NULL always.
    pub computed: bool,
    /// Position (1-based) in the capture instance's unique index (normally the primary
    /// key); `None` for a column outside it.
    pub key_ordinal: Option<i32>,
    pub nullable: bool,
    /// The source column's collation (`sys.columns.collation_name`); `None` for
    /// non-character types.
    pub collation: Option<String>,
}

#[cfg(test)]
impl CaptureColumn {
    /// A nullable, non-key, non-computed column without a collation (tests build the
    /// variants they need from it).
    pub(crate) fn sample(
        name: &str,
        type_name: &str,
        max_length: i32,
        precision: i32,
        scale: i32,
    ) -> CaptureColumn {
        CaptureColumn {
            name: name.into(),
            type_name: type_name.into(),
            max_length,
            precision,
            scale,
            computed: false,
            key_ordinal: None,
            nullable: true,
            collation: None,
        }
    }
}

/// How the CDC capture process logs a column's value in old images.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Logging {
    /// Always logged.
    Full,
    /// `text`, `ntext`, `image`: NULL in deletes (operation 1) and old images (3).
    LegacyLob,
    /// `varchar(max)`, `nvarchar(max)`, `varbinary(max)`, `xml`: NULL in old images (3)
    /// unless the column changed.
    MaxLob,
    /// Computed column: always NULL in the change table.
    Never,
}

impl CaptureColumn {
    /// True for a column of the capture instance's unique index.
    pub fn is_key(&self) -> bool {
        self.key_ordinal.is_some()
    }

    /// The column's type as SQL Server declares it (`decimal(12,2)`, `nvarchar(max)`).
    pub fn declaration(&self) -> String {
        let t = self.type_name.as_str();
        let chars = |bytes_per_char: i32| match self.max_length {
            -1 => "max".to_owned(),
            n => (n / bytes_per_char).to_string(),
        };
        match t {
            "varchar" | "char" | "varbinary" | "binary" => format!("{t}({})", chars(1)),
            "nvarchar" | "nchar" => format!("{t}({})", chars(2)),
            "decimal" | "numeric" => format!("{t}({},{})", self.precision, self.scale),
            "datetime2" | "datetimeoffset" | "time" => format!("{t}({})", self.scale),
            _ => t.to_owned(),
        }
    }

    /// The output type, or why the column cannot be captured.
    pub fn column_type(&self) -> Result<ColumnType, String> {
        Ok(match self.type_name.as_str() {
            "bit" => ColumnType::Boolean,
            "tinyint" => ColumnType::UInt8,
            "smallint" => ColumnType::Int16,
            "int" => ColumnType::Int32,
            "bigint" => ColumnType::Int64,
            "real" => ColumnType::Float32,
            "float" => ColumnType::Float64,
            "decimal" | "numeric" => {
                let precision = u8::try_from(self.precision)
                    .ok()
                    .filter(|p| (1..=38).contains(p))
                    .ok_or_else(|| {
                        format!("decimal precision {} is out of range", self.precision)
                    })?;
                let scale = i8::try_from(self.scale)
                    .ok()
                    .filter(|&s| s >= 0 && s as u8 <= precision)
                    .ok_or_else(|| format!("decimal scale {} is out of range", self.scale))?;
                ColumnType::Decimal { precision, scale }
            }
            "money" => ColumnType::Decimal {
                precision: 19,
                scale: 4,
            },
            "smallmoney" => ColumnType::Decimal {
                precision: 10,
                scale: 4,
            },
            "date" => ColumnType::Date,
            // Spark and Athena read no Parquet TIME (Spark refuses the whole file): the text.
            "time" => ColumnType::Utf8,
            "datetime" | "datetime2" | "smalldatetime" => ColumnType::Timestamp,
            "datetimeoffset" => ColumnType::TimestampTz,
            "char" | "varchar" | "nchar" | "nvarchar" | "text" | "ntext" | "xml" => {
                ColumnType::Utf8
            }
            "binary" | "varbinary" | "image" | "timestamp" | "rowversion" => ColumnType::Binary,
            "uniqueidentifier" => ColumnType::Uuid,
            _ => match self.form() {
                Some(Form::Wkb) => ColumnType::Binary,
                _ => ColumnType::Utf8,
            },
        })
    }

    /// How a type without a typed mapping is read (`None` for a typed one).
    pub fn form(&self) -> Option<Form> {
        match self.type_name.as_str() {
            "bit" | "tinyint" | "smallint" | "int" | "bigint" | "real" | "float" | "decimal"
            | "numeric" | "money" | "smallmoney" | "date" | "time" | "datetime" | "datetime2"
            | "smalldatetime" | "datetimeoffset" | "char" | "varchar" | "nchar" | "nvarchar"
            | "text" | "ntext" | "xml" | "binary" | "varbinary" | "image" | "timestamp"
            | "rowversion" | "uniqueidentifier" => None,
            "geometry" | "geography" => Some(Form::Wkb),
            _ => Some(Form::Text),
        }
    }

    /// The Parquet field metadata declaring the column's form, if it has one.
    pub fn field_metadata(&self) -> std::collections::BTreeMap<String, String> {
        let form = match self.form() {
            Some(Form::Wkb) => "wkb",
            Some(Form::Text) => "text",
            None => return Default::default(),
        };
        [("sluice.form".to_owned(), form.to_owned())].into()
    }

    /// How the capture process logs this column in old images.
    pub fn logging(&self) -> Logging {
        if self.computed {
            return Logging::Never;
        }
        match self.type_name.as_str() {
            "text" | "ntext" | "image" => Logging::LegacyLob,
            "xml" => Logging::MaxLob,
            "varchar" | "nvarchar" | "varbinary" if self.max_length == -1 => Logging::MaxLob,
            _ => Logging::Full,
        }
    }
}

/// How a column of a type without a typed mapping is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// OGC WKB bytes (`geometry`, `geography`).
    Wkb,
    /// The value's text.
    Text,
}

/// Converts one cell to the column's output type. The error says why, without naming the
/// column (the caller adds table, column and position).
pub fn convert(ty: &ColumnType, data: ColumnData<'static>) -> Result<Value, String> {
    use ColumnData as D;
    let mismatch = |what: &str| Err(format!("the server sent {what} for a {ty:?} column"));
    Ok(match (ty, data) {
        (_, D::U8(None) | D::I16(None) | D::I32(None) | D::I64(None)) => Value::Null,
        (_, D::F32(None) | D::F64(None) | D::Bit(None) | D::String(None)) => Value::Null,
        (_, D::Guid(None) | D::Binary(None) | D::Numeric(None) | D::Xml(None)) => Value::Null,
        (_, D::DateTime(None) | D::SmallDateTime(None) | D::Time(None)) => Value::Null,
        (_, D::Date(None) | D::DateTime2(None) | D::DateTimeOffset(None)) => Value::Null,
        (ColumnType::Boolean, D::Bit(Some(v))) => Value::Boolean(v),
        (ColumnType::UInt8, D::U8(Some(v))) => Value::UInt(u64::from(v)),
        (ColumnType::Int16 | ColumnType::Int32 | ColumnType::Int64, D::U8(Some(v))) => {
            Value::Int(i64::from(v))
        }
        (ColumnType::Int16 | ColumnType::Int32 | ColumnType::Int64, D::I16(Some(v))) => {
            Value::Int(i64::from(v))
        }
        (ColumnType::Int32 | ColumnType::Int64, D::I32(Some(v))) => Value::Int(i64::from(v)),
        (ColumnType::Int64, D::I64(Some(v))) => Value::Int(v),
        (ColumnType::Float32, D::F32(Some(v))) => Value::Float(f64::from(v)),
        (ColumnType::Float64, D::F64(Some(v))) => Value::Float(v),
        (ColumnType::Float64, D::F32(Some(v))) => Value::Float(f64::from(v)),
        (ColumnType::Decimal { scale, .. }, D::Numeric(Some(n))) => {
            Value::Decimal(rescale(n.value(), i32::from(n.scale()), i32::from(*scale))?)
        }
        (ColumnType::Utf8, D::String(Some(s))) => Value::Text(s.into_owned()),
        (ColumnType::Utf8, D::Xml(Some(x))) => Value::Text(x.into_owned().into_string()),
        (ColumnType::Binary, D::Binary(Some(b))) => Value::Bytes(b.into_owned()),
        (ColumnType::Uuid, D::Guid(Some(g))) => Value::Text(g.hyphenated().to_string()),
        (ColumnType::Date, D::Date(Some(d))) => Value::Date(date_days(d.days())?),
        (ColumnType::Utf8, D::Time(Some(t))) => Value::Text(time_text(t.increments(), t.scale())?),
        (ColumnType::Timestamp, D::DateTime2(Some(dt))) => Value::Timestamp(datetime2_us(dt)?),
        (ColumnType::TimestampTz, D::DateTimeOffset(Some(dto))) => {
            // TDS carries the UTC date and time plus the offset; the UTC part is the instant.
            Value::Timestamp(datetime2_us(dto.datetime2())?)
        }
        (ColumnType::Timestamp, D::DateTime(Some(dt))) => {
            Value::Timestamp(datetime_us(dt.days(), dt.seconds_fragments()))
        }
        (ColumnType::Timestamp, D::SmallDateTime(Some(dt))) => {
            // tiberius names the field `seconds_fragments`; on the wire it is minutes.
            Value::Timestamp(smalldatetime_us(dt.days(), dt.seconds_fragments()))
        }
        (_, other) => return mismatch(&format!("{other:?}")),
    })
}

/// Unscaled `value` at `from` decimal places, expressed at `to` places (exactly).
fn rescale(value: i128, from: i32, to: i32) -> Result<i128, String> {
    if from == to {
        return Ok(value);
    }
    let exact = || format!("decimal with scale {from} does not fit scale {to} exactly");
    if from < to {
        let factor = 10i128.checked_pow((to - from) as u32).ok_or_else(exact)?;
        return value.checked_mul(factor).ok_or_else(exact);
    }
    let factor = 10i128.checked_pow((from - to) as u32).ok_or_else(exact)?;
    if value % factor != 0 {
        return Err(exact());
    }
    Ok(value / factor)
}

/// `date`: days since 0001-01-01 → days since 1970-01-01.
pub fn date_days(days_since_0001: u32) -> Result<i32, String> {
    i32::try_from(i64::from(days_since_0001) - DAYS_0001_TO_1970)
        .map_err(|_| format!("date {days_since_0001} days after 0001-01-01 is out of range"))
}

/// `time(n)`: `increments` of 10^-scale s since midnight → its text as SQL Server prints
/// it, `HH:MM:SS` and `scale` fraction digits (`12:34:56.1234567` for `time(7)`, no
/// fraction for `time(0)`) — exact, the 100 ns digit included.
pub fn time_text(increments: u64, scale: u8) -> Result<String, String> {
    if scale > 7 {
        return Err(format!("time scale {scale} is invalid (0-7)"));
    }
    let per_second = 10u64.pow(u32::from(scale));
    let (secs, frac) = (increments / per_second, increments % per_second);
    if secs >= 86_400 {
        return Err(format!(
            "time value {increments}e-{scale} s is not within one day"
        ));
    }
    let mut text = format!("{:02}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60);
    if scale > 0 {
        text.push_str(&format!(".{frac:0width$}", width = usize::from(scale)));
    }
    Ok(text)
}

/// `time(n)`: `increments` of 10^-scale s since midnight → µs, refusing sub-µs digits.
pub fn time_us(increments: u64, scale: u8) -> Result<i64, String> {
    if scale > 7 {
        return Err(format!("time scale {scale} is invalid (0-7)"));
    }
    let micros = if scale <= 6 {
        increments.checked_mul(10u64.pow(u32::from(6 - scale)))
    } else if increments.is_multiple_of(10) {
        Some(increments / 10)
    } else {
        return Err(format!(
            "time value {increments}e-7 s has a 100 ns digit; microsecond output would truncate it"
        ));
    };
    micros
        .and_then(|m| i64::try_from(m).ok())
        .filter(|&m| m < DAY_US)
        .ok_or_else(|| format!("time value {increments}e-{scale} s is not within one day"))
}

fn datetime2_us(dt: tiberius::time::DateTime2) -> Result<i64, String> {
    let days = i64::from(dt.date().days()) - DAYS_0001_TO_1970;
    let time = time_us(dt.time().increments(), dt.time().scale())?;
    days.checked_mul(DAY_US)
        .and_then(|d| d.checked_add(time))
        .ok_or_else(|| "datetime2 is out of range".to_owned())
}

/// `datetime`: days since 1900-01-01 and 1/300 s ticks → µs, rounded to nearest.
pub fn datetime_us(days_since_1900: i32, ticks: u32) -> i64 {
    let micros = (i64::from(ticks) * 20_000 + 3) / 6; // ticks * 10^6 / 300, rounded
    (i64::from(days_since_1900) - DAYS_1900_TO_1970) * DAY_US + micros
}

/// `smalldatetime`: days since 1900-01-01 and minutes since midnight → µs.
pub fn smalldatetime_us(days_since_1900: u16, minutes: u16) -> i64 {
    (i64::from(days_since_1900) - DAYS_1900_TO_1970) * DAY_US + i64::from(minutes) * 60_000_000
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::borrow::Cow;
    use tiberius::numeric::Numeric;
    use tiberius::time::{Date, DateTime, DateTime2, DateTimeOffset, SmallDateTime, Time};

    fn col(type_name: &str, max_length: i32, precision: i32, scale: i32) -> CaptureColumn {
        CaptureColumn {
            name: "c".into(),
            type_name: type_name.into(),
            max_length,
            precision,
            scale,
            computed: false,
            key_ordinal: None,
            collation: None,
            nullable: true,
        }
    }

    /// 2024-03-01 as days since 0001-01-01 and since 1970-01-01.
    const D2024_0001: u32 = 738_945;
    const D2024_1970: i32 = 19_783;

    #[test]
    fn catalog_types_map_to_output_types() {
        let cases = [
            (col("tinyint", 1, 3, 0), ColumnType::UInt8, "tinyint"),
            (col("bit", 1, 1, 0), ColumnType::Boolean, "bit"),
            (col("bigint", 8, 19, 0), ColumnType::Int64, "bigint"),
            (
                col("decimal", 9, 12, 2),
                ColumnType::Decimal {
                    precision: 12,
                    scale: 2,
                },
                "decimal(12,2)",
            ),
            (
                col("money", 8, 19, 4),
                ColumnType::Decimal {
                    precision: 19,
                    scale: 4,
                },
                "money",
            ),
            (
                col("smallmoney", 4, 10, 4),
                ColumnType::Decimal {
                    precision: 10,
                    scale: 4,
                },
                "smallmoney",
            ),
            (col("real", 4, 24, 0), ColumnType::Float32, "real"),
            (col("float", 8, 53, 0), ColumnType::Float64, "float"),
            (
                col("datetime2", 8, 27, 7),
                ColumnType::Timestamp,
                "datetime2(7)",
            ),
            (
                col("datetimeoffset", 10, 34, 7),
                ColumnType::TimestampTz,
                "datetimeoffset(7)",
            ),
            (
                col("smalldatetime", 4, 16, 0),
                ColumnType::Timestamp,
                "smalldatetime",
            ),
            (col("time", 5, 16, 7), ColumnType::Utf8, "time(7)"),
            (col("nvarchar", 100, 0, 0), ColumnType::Utf8, "nvarchar(50)"),
            (col("nvarchar", -1, 0, 0), ColumnType::Utf8, "nvarchar(max)"),
            (col("ntext", 16, 0, 0), ColumnType::Utf8, "ntext"),
            (col("xml", -1, 0, 0), ColumnType::Utf8, "xml"),
            (
                col("varbinary", 16, 0, 0),
                ColumnType::Binary,
                "varbinary(16)",
            ),
            (col("image", 16, 0, 0), ColumnType::Binary, "image"),
            (
                col("uniqueidentifier", 16, 0, 0),
                ColumnType::Uuid,
                "uniqueidentifier",
            ),
        ];
        for (c, ty, decl) in cases {
            assert_eq!(c.column_type().unwrap(), ty, "{}", c.type_name);
            assert_eq!(c.declaration(), decl);
        }
        // No type is refused: spatial types are WKB, every other one its text.
        for (name, ty, form) in [
            ("geography", ColumnType::Binary, "wkb"),
            ("geometry", ColumnType::Binary, "wkb"),
            ("hierarchyid", ColumnType::Utf8, "text"),
            ("sql_variant", ColumnType::Utf8, "text"),
            ("my_clr_type", ColumnType::Utf8, "text"),
        ] {
            let c = col(name, 16, 0, 0);
            assert_eq!(c.column_type().unwrap(), ty, "{name}");
            assert_eq!(c.field_metadata()["sluice.form"], form, "{name}");
        }
        assert!(col("int", 4, 10, 0).field_metadata().is_empty());
        assert!(col("decimal", 17, 39, 0).column_type().is_err());
    }

    #[test]
    fn logging_classes() {
        assert_eq!(col("ntext", 16, 0, 0).logging(), Logging::LegacyLob);
        assert_eq!(col("varbinary", -1, 0, 0).logging(), Logging::MaxLob);
        assert_eq!(col("varbinary", 10, 0, 0).logging(), Logging::Full);
        let mut computed = col("int", 4, 10, 0);
        computed.computed = true;
        assert_eq!(computed.logging(), Logging::Never);
    }

    #[test]
    fn integers_floats_and_bits() {
        let conv = |ty, d| convert(&ty, d).unwrap();
        assert_eq!(
            conv(ColumnType::UInt8, ColumnData::U8(Some(255))),
            Value::UInt(255)
        );
        assert_eq!(
            conv(ColumnType::Int16, ColumnData::I16(Some(-5))),
            Value::Int(-5)
        );
        assert_eq!(
            conv(ColumnType::Int64, ColumnData::I64(Some(i64::MIN))),
            Value::Int(i64::MIN)
        );
        assert_eq!(
            conv(ColumnType::Boolean, ColumnData::Bit(Some(true))),
            Value::Boolean(true)
        );
        assert_eq!(
            conv(ColumnType::Float32, ColumnData::F32(Some(1.5))),
            Value::Float(1.5)
        );
        assert_eq!(conv(ColumnType::Int32, ColumnData::I32(None)), Value::Null);
        assert!(convert(&ColumnType::Int16, ColumnData::I64(Some(1))).is_err());
        assert!(convert(&ColumnType::Utf8, ColumnData::I32(Some(1))).is_err());
    }

    #[test]
    fn decimals_keep_the_column_scale_exactly() {
        let dec = ColumnType::Decimal {
            precision: 19,
            scale: 4,
        };
        let n = |v, s| ColumnData::Numeric(Some(Numeric::new_with_scale(v, s)));
        // money 922337203685477.5807 (the maximum), exact after the CAST to decimal(19,4).
        assert_eq!(
            convert(&dec, n(9_223_372_036_854_775_807, 4)).unwrap(),
            Value::Decimal(9_223_372_036_854_775_807)
        );
        assert_eq!(convert(&dec, n(-125, 2)).unwrap(), Value::Decimal(-12_500));
        assert_eq!(
            convert(&dec, n(1_234_500, 6)).unwrap(),
            Value::Decimal(12_345)
        );
        assert!(convert(&dec, n(1_234_567, 6)).is_err());
    }

    #[test]
    fn text_binary_guid_xml() {
        let guid: tiberius::Uuid = "6F9619FF-8B86-D011-B42D-00C04FC964FF".parse().unwrap();
        assert_eq!(
            convert(&ColumnType::Uuid, ColumnData::Guid(Some(guid))).unwrap(),
            Value::Text("6f9619ff-8b86-d011-b42d-00c04fc964ff".into())
        );
        assert_eq!(
            convert(
                &ColumnType::Utf8,
                ColumnData::String(Some(Cow::Borrowed("żółw")))
            )
            .unwrap(),
            Value::Text("żółw".into())
        );
        let xml = tiberius::xml::XmlData::new("<a>1</a>");
        assert_eq!(
            convert(&ColumnType::Utf8, ColumnData::Xml(Some(Cow::Owned(xml)))).unwrap(),
            Value::Text("<a>1</a>".into())
        );
        assert_eq!(
            convert(
                &ColumnType::Binary,
                ColumnData::Binary(Some(Cow::Borrowed(&[0u8, 255][..])))
            )
            .unwrap(),
            Value::Bytes(vec![0, 255])
        );
    }

    #[test]
    fn dates_and_times() {
        assert_eq!(date_days(DAYS_0001_TO_1970 as u32).unwrap(), 0);
        assert_eq!(
            convert(
                &ColumnType::Date,
                ColumnData::Date(Some(Date::new(D2024_0001)))
            )
            .unwrap(),
            Value::Date(D2024_1970)
        );
        assert_eq!(date_days(0).unwrap(), -719_162);
        // 12:34:56.123456 at scale 6 and 7 (trailing zero), 3.
        let t = 45_296_123_456i64;
        assert_eq!(time_us(t as u64, 6).unwrap(), t);
        assert_eq!(time_us(t as u64 * 10, 7).unwrap(), t);
        assert_eq!(time_us(45_296_123, 3).unwrap(), 45_296_123_000);
        assert!(
            time_us(t as u64 * 10 + 1, 7).is_err(),
            "a 100 ns digit is refused"
        );
        assert!(time_us(DAY_US as u64, 6).is_err());
        // A `time` column is its text at the column's scale, the 100 ns digit included.
        assert_eq!(
            convert(
                &ColumnType::Utf8,
                ColumnData::Time(Some(Time::new(t as u64 * 10 + 7, 7)))
            )
            .unwrap(),
            Value::Text("12:34:56.1234567".into())
        );
        assert_eq!(time_text(45_296, 0).unwrap(), "12:34:56");
        assert_eq!(time_text(45_296_120, 3).unwrap(), "12:34:56.120");
        assert_eq!(time_text(5, 1).unwrap(), "00:00:00.5");
        assert!(time_text(86_400, 0).is_err());
        assert!(time_text(1, 8).is_err());
        let dt2 = DateTime2::new(Date::new(D2024_0001), Time::new(t as u64 * 10, 7));
        let want = i64::from(D2024_1970) * DAY_US + t;
        assert_eq!(
            convert(&ColumnType::Timestamp, ColumnData::DateTime2(Some(dt2))).unwrap(),
            Value::Timestamp(want)
        );
    }

    #[test]
    fn datetimeoffset_is_the_utc_instant() {
        // 2024-03-01 10:00 UTC sent with a +05:30 offset: the instant is the UTC part.
        let utc = DateTime2::new(Date::new(D2024_0001), Time::new(36_000, 0));
        let dto = DateTimeOffset::new(utc, 330);
        assert_eq!(
            convert(
                &ColumnType::TimestampTz,
                ColumnData::DateTimeOffset(Some(dto))
            )
            .unwrap(),
            Value::Timestamp(i64::from(D2024_1970) * DAY_US + 36_000_000_000)
        );
    }

    #[test]
    fn legacy_datetimes() {
        let base = i64::from(D2024_1970) * DAY_US;
        let days_1900 = (i64::from(D2024_1970) + DAYS_1900_TO_1970) as i32;
        // .003 s is one tick (3333.3 µs → 3333), .007 two ticks (6666.7 → 6667), 1 s = 300.
        assert_eq!(datetime_us(days_1900, 1), base + 3_333);
        assert_eq!(datetime_us(days_1900, 2), base + 6_667);
        assert_eq!(datetime_us(days_1900, 300), base + 1_000_000);
        assert_eq!(
            datetime_us(-53_690, 0),
            (-53_690 - DAYS_1900_TO_1970) * DAY_US
        );
        assert_eq!(
            convert(
                &ColumnType::Timestamp,
                ColumnData::DateTime(Some(DateTime::new(days_1900, 3)))
            )
            .unwrap(),
            Value::Timestamp(base + 10_000)
        );
        let sdt = SmallDateTime::new(days_1900 as u16, 61);
        assert_eq!(
            convert(&ColumnType::Timestamp, ColumnData::SmallDateTime(Some(sdt))).unwrap(),
            Value::Timestamp(base + 3_660_000_000)
        );
    }
}
