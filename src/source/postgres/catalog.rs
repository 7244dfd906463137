//! Reading the captured tables' definitions from the PostgreSQL catalog at open.
//!
//! Guarantees: every configured table exists, every captured column resolves to an output
//! type ([`resolve`](super::resolve); none is refused for its type), and the table can
//! publish updates and deletes (a primary key, a replica-identity index, or `REPLICA
//! IDENTITY FULL`) — publishing a table without one would make the application's own
//! UPDATEs fail. The captured columns are the ones pgoutput publishes, so baseline and
//! stream carry the same: every stored column, and from PostgreSQL 18 on the stored
//! generated ones too (the publication has `publish_generated_columns = stored`,
//! [`super::slot::ensure_publication`]); before 18 generated columns, and virtual generated
//! columns (18) always, are left out.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use tokio_postgres::Client;

use super::connect::query_error;
use super::resolve;
use super::types::Decode;
use crate::change::{Column, TableSchema};
use crate::config::TextColumns;
use crate::error::{Code, Error, Result};

/// A captured table as the catalog describes it.
#[derive(Debug, Clone)]
pub struct CapturedTable {
    /// Name as configured (the output directory).
    pub config_name: String,
    pub schema: String,
    pub table: String,
    /// Names of the key columns (primary key, or the replica-identity index).
    pub key: Vec<String>,
    /// Source type name per column (`numeric(12,2)`).
    pub type_names: HashMap<String, String>,
    /// Type OID per column, in column order.
    pub type_oids: Vec<u32>,
    /// How each column's cells are read, in column order.
    pub decodes: Vec<Decode>,
    /// The table as of the open.
    pub shape: Arc<TableSchema>,
    /// A partitioned table (`relkind p`): captured as the parent — published with
    /// `publish_via_partition_root`, so every partition's changes arrive as the parent's,
    /// and baselined by reading the parent.
    pub partitioned: bool,
    /// `pg_class.oid` as of the open; `None` for a table that no longer exists (dropped or
    /// renamed since the checkpoint: [`CapturedTable::gone`]).
    pub oid: Option<u32>,
    /// The columns captured in their text form because a value did not fit their typed
    /// form (`source.text_columns`); a Relation message's column of that name keeps it.
    pub text_columns: BTreeSet<String>,
    /// `REPLICA IDENTITY FULL`: an UPDATE or DELETE logs the whole old row.
    pub identity_full: bool,
}

impl CapturedTable {
    /// A configured table the catalog no longer has (dropped or renamed while its changes
    /// were still in the backlog): no columns, no key, no oid. The stream learns its shape,
    /// key and cell decoding from the backlog's own Relation messages, which name it as it
    /// was, so its changes up to the drop or rename are written.
    pub fn gone(config_name: &str) -> CapturedTable {
        let (schema, table) = split_name(config_name);
        CapturedTable {
            config_name: config_name.to_owned(),
            schema,
            table,
            key: Vec::new(),
            type_names: HashMap::new(),
            type_oids: Vec::new(),
            decodes: Vec::new(),
            shape: Arc::new(TableSchema {
                name: config_name.to_owned(),
                columns: Vec::new(),
            }),
            partitioned: false,
            oid: None,
            text_columns: BTreeSet::new(),
            identity_full: false,
        }
    }

    /// `"schema"."table"`, quoted for SQL.
    pub fn quoted(&self) -> String {
        format!("{}.{}", quote_ident(&self.schema), quote_ident(&self.table))
    }
}

/// Quotes an identifier for PostgreSQL.
pub fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Quotes a string literal for PostgreSQL, whatever `standard_conforming_strings` is: a
/// text with a backslash is written in the escape form (`E'…'`, backslashes doubled).
pub fn quote_literal(text: &str) -> String {
    let quoted = text.replace('\'', "''");
    if quoted.contains('\\') {
        format!("E'{}'", quoted.replace('\\', "\\\\"))
    } else {
        format!("'{quoted}'")
    }
}

/// Splits `schema.table` (a bare name means `public`).
pub fn split_name(config_name: &str) -> (String, String) {
    match config_name.split_once('.') {
        Some((schema, table)) => (schema.to_owned(), table.to_owned()),
        None => ("public".to_owned(), config_name.to_owned()),
    }
}

/// Resolves every configured table.
/// Resolves the tables that exist; returns them and the names of those the catalog does
/// not have (each still a refusal where a table must exist).
pub async fn resolve_present(
    client: &Client,
    tables: &[String],
    text: &TextColumns,
) -> Result<(Vec<CapturedTable>, Vec<String>)> {
    let (mut present, mut gone) = (Vec::new(), Vec::new());
    for name in tables {
        match resolve_one(client, name, text).await? {
            Some(table) => present.push(table),
            None => gone.push(name.clone()),
        }
    }
    Ok((present, gone))
}

/// Resolves every configured table, `text` naming the columns held in their text form.
pub async fn resolve(
    client: &Client,
    tables: &[String],
    text: &TextColumns,
) -> Result<Vec<CapturedTable>> {
    let mut out = Vec::with_capacity(tables.len());
    for name in tables {
        out.push(resolve_one(client, name, text).await?.ok_or_else(|| {
            Error::new(
                Code::SourcePrerequisite,
                format!("table {name} does not exist"),
            )
            .hint("check source.tables (schema.table) and that the source user can see the table")
        })?);
    }
    Ok(out)
}

/// The table `config_name` names, or `None` when the catalog has no such relation.
async fn resolve_one(
    client: &Client,
    config_name: &str,
    text: &TextColumns,
) -> Result<Option<CapturedTable>> {
    let text_columns = text.get(config_name).cloned().unwrap_or_default();
    let (schema, table) = split_name(config_name);
    let rel = client
        .query_opt(
            "SELECT c.oid::int8, c.relreplident::text, c.relkind::text FROM pg_class c \
             JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = $2",
            &[&schema, &table],
        )
        .await
        .map_err(|e| query_error("reading pg_class", e))?;
    let Some(rel) = rel else {
        return Ok(None);
    };
    let oid: i64 = rel.get(0);
    let replident: String = rel.get(1);
    let relkind: String = rel.get(2);
    if relkind != "r" && relkind != "p" {
        return Err(Error::new(
            Code::SourcePrerequisite,
            format!("{config_name} is not an ordinary table (relkind {relkind})"),
        )
        .hint("only tables can be captured; views and materialized views have no change log"));
    }
    let rows = client
        .query(
            &format!("SELECT a.attname::text, a.atttypid::int8, a.atttypmod, format_type(a.atttypid, a.atttypmod), \
                    a.attnotnull, COALESCE(a.attnum = ANY(i.indkey), false), a.attndims::int4 \
             FROM pg_attribute a \
             LEFT JOIN pg_index i ON i.indrelid = a.attrelid \
                  AND CASE WHEN $2 = 'i' THEN i.indisreplident ELSE i.indisprimary END \
             WHERE a.attrelid = $1::int8::oid AND a.attnum > 0 AND NOT a.attisdropped AND {PUBLISHED} \
             ORDER BY a.attnum"),
            &[&oid, &replident],
        )
        .await
        .map_err(|e| query_error("reading pg_attribute", e))?;
    let mut columns = Vec::with_capacity(rows.len());
    let mut type_names = HashMap::new();
    let mut type_oids = Vec::with_capacity(rows.len());
    let mut decodes = Vec::with_capacity(rows.len());
    for row in &rows {
        let name: String = row.get(0);
        let type_oid: i64 = row.get(1);
        let typmod: i32 = row.get(2);
        let type_name: String = row.get(3);
        let resolved = resolve::column(client, type_oid as u32, typmod, row.get(6)).await?;
        let resolved = if text_columns.contains(&name) {
            resolved.in_text_form()
        } else {
            resolved
        };
        type_names.insert(name.clone(), type_name.clone());
        type_oids.push(type_oid as u32);
        decodes.push(resolved.decode);
        columns.push(Column {
            name,
            ty: resolved.ty,
            nullable: !row.get::<_, bool>(4),
            key: row.get(5),
            source_type: type_name,
            field_metadata: resolved.field_metadata,
        });
    }
    let generated = generated_columns(client, oid, &replident).await?;
    let generated_key: Vec<&str> = generated
        .iter()
        .filter(|(_, key)| *key)
        .map(|(name, _)| name.as_str())
        .collect();
    if !generated_key.is_empty() {
        return Err(Error::new(
            Code::SourcePrerequisite,
            format!(
                "{config_name}'s key includes the generated column(s) {}, which PostgreSQL does not publish",
                generated_key.join(", ")
            ),
        )
        .hint(format!(
            "a change's key would lack them, so rows could not be told apart: give {config_name} a primary key \
             (or a unique index made its identity with ALTER TABLE {config_name} REPLICA IDENTITY USING INDEX …) \
             of stored, non-generated columns"
        )));
    }
    let generated: Vec<String> = generated.into_iter().map(|(name, _)| name).collect();
    if !generated.is_empty() {
        tracing::info!(
            table = config_name,
            columns = %generated.join(", "),
            "generated columns are not captured (neither in the baseline nor in the stream: pgoutput publishes no generated column before PostgreSQL 18, and no virtual one)"
        );
    }
    let key: Vec<String> = columns
        .iter()
        .filter(|c| c.key)
        .map(|c| c.name.clone())
        .collect();
    check_identity(config_name, &replident, &key)?;
    let deferrable = client
        .query_opt(
            "SELECT c.conname::text FROM pg_constraint c \
             WHERE c.conrelid = $1::int8::oid AND c.contype = 'p' AND c.condeferrable",
            &[&oid],
        )
        .await
        .map_err(|e| query_error("reading pg_constraint", e))?
        .map(|row| row.get::<_, String>(0));
    check_key_immediate(config_name, &replident, deferrable.as_deref())?;
    Ok(Some(CapturedTable {
        config_name: config_name.to_owned(),
        schema,
        table,
        key,
        type_names,
        type_oids,
        decodes,
        shape: Arc::new(TableSchema {
            name: config_name.to_owned(),
            columns,
        }),
        partitioned: relkind == "p",
        oid: u32::try_from(oid).ok(),
        text_columns,
        identity_full: replident == "f",
    }))
}

/// The condition on `pg_attribute a` of a column pgoutput publishes (with
/// `publish_generated_columns = stored` on PostgreSQL 18): a stored column, or from 18 on a
/// stored generated one (`attgenerated` `s`).
pub const PUBLISHED: &str = "(a.attgenerated = '' OR (a.attgenerated = 's' \
     AND current_setting('server_version_num')::int >= 180000))";

/// The table's generated columns sluice does not capture — every generated column before
/// PostgreSQL 18, the virtual ones from 18 on: pgoutput leaves them out of the stream, so
/// the baseline leaves them out too, and baseline and stream carry the same columns.
/// Each with whether it is part of the key (the primary key, or the replica-identity
/// index under `replident` `i`).
async fn generated_columns(
    client: &Client,
    oid: i64,
    replident: &str,
) -> Result<Vec<(String, bool)>> {
    let rows = client
        .query(
            &format!("SELECT a.attname::text, COALESCE(a.attnum = ANY(i.indkey), false) FROM pg_attribute a \
             LEFT JOIN pg_index i ON i.indrelid = a.attrelid \
                  AND CASE WHEN $2 = 'i' THEN i.indisreplident ELSE i.indisprimary END \
             WHERE a.attrelid = $1::int8::oid AND a.attnum > 0 AND NOT a.attisdropped \
               AND NOT {PUBLISHED} ORDER BY a.attnum"),
            &[&oid, &replident],
        )
        .await
        .map_err(|e| query_error("reading pg_attribute", e))?;
    Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
}

/// The replica-identity rule, as a pure decision (also used by `doctor`).
pub fn check_identity(config_name: &str, replident: &str, key: &[String]) -> Result<()> {
    match replident {
        "f" => Ok(()),
        "n" => Err(Error::new(Code::SourcePrerequisite, format!("{config_name} has REPLICA IDENTITY NOTHING"))
            .hint(format!("ALTER TABLE {config_name} REPLICA IDENTITY DEFAULT (with a primary key) or FULL; updates and deletes cannot be captured otherwise"))),
        _ if key.is_empty() => Err(Error::new(Code::SourcePrerequisite, format!("{config_name} has no primary key or replica-identity index"))
            .hint(format!("add a primary key, or run ALTER TABLE {config_name} REPLICA IDENTITY FULL; publishing it as is would make its UPDATEs and DELETEs fail"))),
        _ => Ok(()),
    }
}

/// Refuses a table whose replica identity would be a `DEFERRABLE` primary key
/// (`deferrable_pk`: its constraint name). PostgreSQL uses only an immediate key as the
/// identity of `REPLICA IDENTITY DEFAULT`; with a deferrable one the table has none, and
/// once published its UPDATEs and DELETEs fail. `FULL` and `USING INDEX` (which takes
/// only an immediate index) do not use the primary key.
pub fn check_key_immediate(
    config_name: &str,
    replident: &str,
    deferrable_pk: Option<&str>,
) -> Result<()> {
    match (replident, deferrable_pk) {
        ("d", Some(constraint)) => Err(Error::new(
            Code::SourceKeyDeferrable,
            format!(
                "{config_name}'s primary key {constraint} is DEFERRABLE, which PostgreSQL cannot use as replica identity"
            ),
        )
        .hint(format!(
            "publishing {config_name} as is would make its UPDATEs and DELETEs fail, so nothing was created; run \
             ALTER TABLE {config_name} REPLICA IDENTITY FULL (the old row is then logged whole), or make the key \
             immediate (ALTER TABLE {config_name} DROP CONSTRAINT {constraint}, ADD PRIMARY KEY (…)), then run again"
        ))),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_are_quoted_for_either_string_syntax() {
        assert_eq!(quote_literal("s_job"), "'s_job'");
        assert_eq!(quote_literal("0/16B3748"), "'0/16B3748'");
        assert_eq!(quote_literal("it's"), "'it''s'");
        assert_eq!(quote_literal(r#""p\x""#), r#"E'"p\\x"'"#);
        assert_eq!(quote_literal(r"a'\"), r"E'a''\\'");
    }

    #[test]
    fn names_split_with_public_default() {
        assert_eq!(split_name("orders"), ("public".into(), "orders".into()));
        assert_eq!(split_name("app.orders"), ("app".into(), "orders".into()));
        assert_eq!(quote_ident("we\"ird"), "\"we\"\"ird\"");
    }

    #[test]
    fn a_deferrable_primary_key_is_refused_only_as_the_default_identity() {
        let err = check_key_immediate("t", "d", Some("t_pkey")).unwrap_err();
        assert_eq!(err.code(), Code::SourceKeyDeferrable);
        assert!(err.hint_text().unwrap().contains("REPLICA IDENTITY FULL"));
        check_key_immediate("t", "f", Some("t_pkey")).unwrap();
        check_key_immediate("t", "i", Some("t_pkey")).unwrap();
        check_key_immediate("t", "d", None).unwrap();
    }

    #[test]
    fn identity_rules() {
        let key = vec!["id".to_string()];
        assert!(check_identity("t", "d", &key).is_ok());
        assert!(check_identity("t", "f", &[]).is_ok());
        assert_eq!(
            check_identity("t", "d", &[]).unwrap_err().code(),
            Code::SourcePrerequisite
        );
        assert_eq!(
            check_identity("t", "n", &key).unwrap_err().code(),
            Code::SourcePrerequisite
        );
    }
}
