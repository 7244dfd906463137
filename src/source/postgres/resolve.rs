//! Resolving a column's PostgreSQL type, at open, to the output type sluice writes and
//! the way its cells are read ([`Decode`]).
//!
//! Guarantees: every type resolves — no column is refused for its type.
//! * A built-in type with a typed mapping ([`column_type`]) keeps it.
//! * A domain takes its base type's resolution, recursively (with the domain's own
//!   modifier when the column has none); an enum is a string of its label; an array of
//!   any of these is a list of it (read through the built-in array decoder, the array
//!   header naming the domain or enum).
//! * PostGIS `geometry` and `geography` (recognised by their send functions
//!   `geometry_send`/`geography_send`, whatever schema the extension lives in) are binary
//!   columns holding the type's binary send output as is — EWKB, SRID kept when it is not
//!   0 — declared `sluice.form = ewkb`. The stream's binary cells and the baseline's
//!   binary COPY both carry that send output, so both paths write the same bytes.
//!   Arrays of them and domains over them take the text form below.
//! * pgvector's `vector` and `halfvec` (recognised by their send functions
//!   `vector_send`/`halfvec_send`) are lists of Float32 (a half widens exactly), declared
//!   `sluice.form = vector` / `halfvec` and, for `vector(n)`/`halfvec(n)`,
//!   `sluice.dimensions = n`. `sparsevec` (and arrays of vectors) take the text form below.
//! * Every other type — extension types (citext, hstore, ltree), network,
//!   geometric, range and multirange types, `interval`, `money`, `timetz`, `"char"`,
//!   `xml`, text search types, a type created tomorrow — and every array declared with
//!   more than one dimension is a string holding the type's own text output
//!   ([`Decode::Text`]), declared in the field metadata (`sluice.form = text`).
//! * `date`, `timestamp` and `timestamptz` columns (and lists of them) declare
//!   `sluice.infinity = true`: `±infinity` is written as the physical type's extremes.

use std::collections::BTreeMap;

use tokio_postgres::Client;

use super::connect::query_error;
use super::types::{Decode, FORM_KEY, INFINITY_KEY, array_oid_of, column_type, oid};
use crate::change::ColumnType;
use crate::error::Result;

/// A column's output type, decoder and declared field metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub ty: ColumnType,
    pub decode: Decode,
    pub field_metadata: BTreeMap<String, String>,
}

impl Resolved {
    /// A typed column read in binary format.
    pub fn binary(ty: ColumnType, oid: u32, wire_element: Option<u32>) -> Resolved {
        let field_metadata = if holds_infinity(&ty) {
            [(INFINITY_KEY.to_owned(), "true".to_owned())].into()
        } else {
            BTreeMap::new()
        };
        Resolved {
            ty,
            decode: Decode::Binary { oid, wire_element },
            field_metadata,
        }
    }

    /// A PostGIS `geometry`/`geography` column: the send output (EWKB) as raw bytes,
    /// read like `bytea` (whose binary form is its bytes as is).
    pub fn ewkb() -> Resolved {
        Resolved {
            ty: ColumnType::Binary,
            decode: Decode::Binary {
                oid: oid::BYTEA,
                wire_element: None,
            },
            field_metadata: [(FORM_KEY.to_owned(), "ewkb".to_owned())].into(),
        }
    }

    /// A pgvector `vector` (`half: false`) or `halfvec` column of `typmod` dimensions
    /// (-1: any): a list of Float32.
    pub fn vector(half: bool, typmod: i32) -> Resolved {
        let mut field_metadata: BTreeMap<String, String> = [(
            FORM_KEY.to_owned(),
            if half { "halfvec" } else { "vector" }.to_owned(),
        )]
        .into();
        if typmod > 0 {
            field_metadata.insert(DIMENSIONS_KEY.to_owned(), typmod.to_string());
        }
        Resolved {
            ty: ColumnType::List(Box::new(ColumnType::Float32)),
            decode: Decode::Vector { half },
            field_metadata,
        }
    }

    /// A string column of the type's text output.
    pub fn text() -> Resolved {
        Resolved {
            ty: ColumnType::Utf8,
            decode: Decode::Text,
            field_metadata: [(FORM_KEY.to_owned(), "text".to_owned())].into(),
        }
    }
}

impl Resolved {
    /// The text form of a column whose values did not all fit this resolution's typed
    /// form ([`crate::change::UnfitValue`]): the type's text output, which holds every
    /// value exactly, declared with its reason. A text-form resolution stays as it is.
    pub fn in_text_form(self) -> Resolved {
        if self.decode == Decode::Text {
            return self;
        }
        Resolved::unfit_text()
    }

    /// The text form of a column moved to it because a value did not fit its typed form.
    pub fn unfit_text() -> Resolved {
        let mut text = Resolved::text();
        text.field_metadata.insert(
            crate::change::FORM_REASON_KEY.to_owned(),
            crate::change::UNFIT_VALUE.to_owned(),
        );
        text
    }
}

/// Whether `ty` is a date or timestamp type (or a list of one), where PostgreSQL has
/// `±infinity`.
fn holds_infinity(ty: &ColumnType) -> bool {
    match ty {
        ColumnType::Date | ColumnType::Timestamp | ColumnType::TimestampTz => true,
        ColumnType::List(element) => holds_infinity(element),
        _ => false,
    }
}

/// The catalog facts about one type that resolution needs.
struct TypeRow {
    /// `pg_type.typtype`: `b`ase, `d`omain, `e`num, `r`ange, `m`ultirange, `c`omposite, `p`seudo.
    typtype: String,
    /// The base type of a domain.
    basetype: u32,
    /// The modifier a domain applies to its base type (-1: none).
    typtypmod: i32,
    /// The element type of an array type (0 otherwise).
    elem: u32,
    /// `pg_type.typcategory` (`A` for arrays).
    category: String,
    /// The name of `pg_type.typsend` (unqualified).
    send: String,
}

/// Parquet field metadata key of a pgvector `vector(n)`/`halfvec(n)` column: `n`, the
/// length of every list in it.
pub const DIMENSIONS_KEY: &str = "sluice.dimensions";

/// The send functions of the PostGIS types captured as EWKB.
const SPATIAL_SEND: [&str; 2] = ["geometry_send", "geography_send"];

/// Deeper than any real domain-over-domain chain; a guard against a corrupt catalog.
const MAX_DEPTH: u32 = 32;

/// Resolves the column of type `type_oid` with modifier `typmod` declared with `ndims`
/// array dimensions (`pg_attribute.attndims`).
pub async fn column(client: &Client, type_oid: u32, typmod: i32, ndims: i32) -> Result<Resolved> {
    if ndims > 1 {
        // One List type cannot hold nested arrays of a depth the catalog does not enforce.
        return Ok(Resolved::text());
    }
    if column_type(type_oid, typmod, "").is_err()
        && let Some(row) = type_row(client, type_oid).await?
        && row.typtype == "b"
    {
        match row.send.as_str() {
            send if SPATIAL_SEND.contains(&send) => return Ok(Resolved::ewkb()),
            "vector_send" => return Ok(Resolved::vector(false, typmod)),
            "halfvec_send" => return Ok(Resolved::vector(true, typmod)),
            _ => {}
        }
    }
    Ok(match typed(client, type_oid, typmod, 0).await? {
        Some((ty, oid, wire_element)) => Resolved::binary(ty, oid, wire_element),
        None => Resolved::text(),
    })
}

/// The typed resolution `(type, built-in OID to decode as, array wire element)`, or
/// `None` for the text form.
async fn typed(
    client: &Client,
    type_oid: u32,
    typmod: i32,
    depth: u32,
) -> Result<Option<(ColumnType, u32, Option<u32>)>> {
    if let Ok(ty) = column_type(type_oid, typmod, "") {
        return Ok(Some((ty, type_oid, None)));
    }
    if depth > MAX_DEPTH {
        return Ok(None);
    }
    let Some(row) = type_row(client, type_oid).await? else {
        return Ok(None);
    };
    Ok(match row.typtype.as_str() {
        "d" => {
            let typmod = if typmod == -1 { row.typtypmod } else { typmod };
            Box::pin(typed(client, row.basetype, typmod, depth + 1)).await?
        }
        "e" => Some((ColumnType::Utf8, oid::TEXT, None)),
        _ if row.category == "A" && row.elem != 0 => {
            match Box::pin(typed(client, row.elem, typmod, depth + 1)).await? {
                Some((ty, element, None)) if !matches!(ty, ColumnType::List(_)) => {
                    array_oid_of(element)
                        .map(|array| (ColumnType::List(Box::new(ty)), array, Some(row.elem)))
                }
                _ => None,
            }
        }
        _ => None,
    })
}

async fn type_row(client: &Client, type_oid: u32) -> Result<Option<TypeRow>> {
    let row = client
        .query_opt(
            "SELECT typtype::text, typbasetype::int8, typtypmod, typelem::int8, typcategory::text, \
             (SELECT proname::text FROM pg_proc WHERE oid = typsend) \
             FROM pg_type WHERE oid = $1::int8::oid",
            &[&i64::from(type_oid)],
        )
        .await
        .map_err(|e| query_error("reading pg_type", e))?;
    Ok(row.map(|r| TypeRow {
        typtype: r.get(0),
        basetype: r.get::<_, i64>(1) as u32,
        typtypmod: r.get(2),
        elem: r.get::<_, i64>(3) as u32,
        category: r.get(4),
        send: r.get::<_, Option<String>>(5).unwrap_or_default(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_docs_type_table_names_the_postgis_form() {
        let docs = include_str!("../../../docs/postgresql.md");
        let row = docs
            .lines()
            .find(|l| l.starts_with("| ") && l.contains("`geometry`") && l.contains("`geography`"))
            .expect("PostGIS is in the type table of docs/postgresql.md");
        assert!(
            row.contains("Binary") && row.contains("sluice.form = ewkb"),
            "{row}"
        );
        assert_eq!(SPATIAL_SEND, ["geometry_send", "geography_send"]);
    }

    #[test]
    fn forms_declare_their_field_metadata() {
        let text = Resolved::text();
        assert_eq!(text.ty, ColumnType::Utf8);
        assert_eq!(text.decode, Decode::Text);
        assert_eq!(
            text.field_metadata.get(FORM_KEY).map(String::as_str),
            Some("text")
        );
        let ts = Resolved::binary(ColumnType::TimestampTz, oid::TIMESTAMPTZ, None);
        assert_eq!(
            ts.field_metadata.get(INFINITY_KEY).map(String::as_str),
            Some("true")
        );
        let dates = Resolved::binary(
            ColumnType::List(Box::new(ColumnType::Date)),
            oid::DATE_ARRAY,
            None,
        );
        assert!(dates.field_metadata.contains_key(INFINITY_KEY));
        let ewkb = Resolved::ewkb();
        assert_eq!(ewkb.ty, ColumnType::Binary);
        assert_eq!(
            ewkb.field_metadata.get(FORM_KEY).map(String::as_str),
            Some("ewkb")
        );
        assert!(
            Resolved::binary(ColumnType::Int32, oid::INT4, None)
                .field_metadata
                .is_empty()
        );
    }
}
