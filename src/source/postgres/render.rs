//! The text output of a binary cell, rendered by the server: for columns captured in
//! their text form ([`Decode::Text`](super::types::Decode::Text)) whose type has a binary
//! send function, pgoutput in binary mode sends the binary form, which only the type's
//! own code can read. sluice hands the bytes back as a binary parameter of
//! `SELECT $1::text` typed as the column's type: the server reads them with the type's
//! `typreceive` and prints them with its `typoutput` — exactly what the baseline's
//! `col::text` prints, under the same [`TEXT_OUTPUT_SETTINGS`](super::types::TEXT_OUTPUT_SETTINGS).
//!
//! Guarantees: the rendered text is the server's own, for any type (extension types
//! included); a value the server cannot read back is an error, never a guess. It costs
//! one round trip per such cell, on the stream's control connection; statements are
//! prepared once per type.

use std::collections::HashMap;
use std::error::Error as StdError;

use bytes::BytesMut;
use tokio_postgres::types::{IsNull, Kind, ToSql, Type, to_sql_checked};
use tokio_postgres::{Client, Statement};

use super::connect::query_error;
use crate::error::Result;

/// The binary form of a value, passed through unchanged as a parameter of any type.
#[derive(Debug)]
struct RawBinary<'a>(&'a [u8]);

impl ToSql for RawBinary<'_> {
    fn to_sql(
        &self,
        _ty: &Type,
        out: &mut BytesMut,
    ) -> std::result::Result<IsNull, Box<dyn StdError + Sync + Send>> {
        out.extend_from_slice(self.0);
        Ok(IsNull::No)
    }

    fn accepts(_ty: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

/// Renders binary cells as text on one connection, one prepared statement per type.
#[derive(Default)]
pub struct Renderer {
    statements: HashMap<u32, Statement>,
}

impl Renderer {
    /// The text output of `raw`, the binary form of a value of type `type_oid` in
    /// column `what` (for messages).
    pub async fn render(
        &mut self,
        client: &Client,
        type_oid: u32,
        raw: &[u8],
        what: &str,
    ) -> Result<String> {
        let statement = match self.statements.get(&type_oid) {
            Some(statement) => statement.clone(),
            None => {
                let ty = Type::new(
                    format!("oid{type_oid}"),
                    type_oid,
                    Kind::Simple,
                    "pg_catalog".into(),
                );
                let statement = client
                    .prepare_typed("SELECT $1::text", &[ty])
                    .await
                    .map_err(|e| {
                        query_error(
                            &format!("preparing the text output of type OID {type_oid}"),
                            e,
                        )
                    })?;
                self.statements.insert(type_oid, statement.clone());
                statement
            }
        };
        let row = client
            .query_one(&statement, &[&RawBinary(raw)])
            .await
            .map_err(|e| {
                query_error(
                    &format!("rendering {what} (type OID {type_oid}) as text"),
                    e,
                )
            })?;
        Ok(row.get(0))
    }
}
