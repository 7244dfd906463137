//! `sluice sql --merge`: one MERGE statement that brings a **current-state table** up to
//! date from the table's Iceberg change log, and the statement that creates that table.
//!
//! The current-state table holds the table's columns plus two metadata columns,
//! `__watermark_pos` and `__watermark_rows`: NULL on every row of the table's data, set on
//! exactly one extra row — the **watermark row** (every table column NULL) — to the
//! highest `__pos` of the change log the last MERGE read and the change log's row count
//! then. The watermark lives in the table it describes so that one MERGE — one Iceberg
//! commit — moves the data and the watermark together: a failed or concurrent MERGE
//! leaves both as they were.
//!
//! Guarantees — after the statement the table's data rows are exactly the replay rule of
//! docs/output.md (keyed clauses, [`super::query::keyed`], the same text) over the change
//! log as the statement read it:
//!
//! * **incremental**: the batch is the change-log rows past the watermark; the target's
//!   rows of every key the batch names enter the rule as that key's base (a `snapshot` row
//!   before every change), so an unlogged column takes the value of the batch's last row
//!   that logged it, else the target's — also across a key change, whose old key's row is
//!   in the target or earlier in the batch. Only keys the batch names are written;
//! * **markers**: a `truncate` or `rebaseline` row in the batch drops every earlier row —
//!   the whole target included: every target key not in the new state is deleted
//!   (`WHEN MATCHED … THEN DELETE`), which Trino's MERGE (no `WHEN NOT MATCHED BY SOURCE`)
//!   can otherwise not express;
//! * **rebuild**: when there is no watermark row yet, or the change log no longer holds
//!   exactly `__watermark_rows` rows at or before `__watermark_pos` (a baseline committed
//!   its snapshot rows after later changes were merged, or a crashed run's snapshot was
//!   dropped and committed again), the batch is the whole change log and the target's
//!   rows are dropped as by a marker: the same statement is then a full rebuild;
//! * a table without a key column has no row a MERGE can match: refused with
//!   `SLUICE_REPLAY_MERGE_KEYLESS`.

use super::dialect::Dialect;
use super::query::{ShapeColumn, check_literal, keyed};
use crate::error::{Code, Error, Result};

/// The metadata column holding the watermark's position (NULL on data rows).
pub const WATERMARK_POS: &str = "__watermark_pos";
/// The metadata column holding the change log's row count at the watermark.
pub const WATERMARK_ROWS: &str = "__watermark_rows";

/// Everything one MERGE (or CREATE) rendering needs.
#[derive(Debug, Clone)]
pub struct MergeRequest {
    pub dialect: Dialect,
    /// The table as `source.tables` names it (for messages).
    pub table: String,
    pub columns: Vec<ShapeColumn>,
    /// The change log as a relation: a catalog table (`db.table`, quoted here) for
    /// Athena, the metadata file DuckDB's `iceberg_scan` reads for DuckDB.
    pub log: String,
    /// The current-state table (`db.table` or `table`).
    pub target: String,
}

/// The relation text of the change log and the quoted target name.
fn relations(req: &MergeRequest) -> Result<(String, String)> {
    let d = req.dialect;
    let dotted = |name: &str| {
        name.split('.')
            .map(|p| d.ident(p))
            .collect::<Vec<_>>()
            .join(".")
    };
    let log = match d {
        Dialect::Athena => dotted(&req.log),
        Dialect::DuckDb => {
            check_literal("metadata file", &req.log)?;
            format!("iceberg_scan('{}')", req.log)
        }
        Dialect::Spark => {
            return Err(Error::new(
                Code::ConfigInvalid,
                "sluice sql --merge renders for duckdb or athena, not spark".to_owned(),
            )
            .hint("use --dialect athena (Trino, Iceberg MERGE) or --dialect duckdb (the local recipe); Spark reads the change log with the replay query (`sluice sql --dialect spark`)"));
        }
    };
    Ok((log, dotted(&req.target)))
}

fn refuse_keyless(req: &MergeRequest) -> Result<()> {
    if req.columns.is_empty() {
        return Err(Error::new(
            Code::ReplayNoSchema,
            format!("table {} has no columns", req.table),
        )
        .hint("the table's manifests record no column: run a drain or a baseline of it first"));
    }
    if req.columns.iter().all(|c| !c.key) {
        return Err(Error::new(
            Code::ReplayMergeKeyless,
            format!("table {} has no key column: a MERGE has no row to match", req.table),
        )
        .hint("read its current state with the multiset replay query instead (`sluice sql` without --merge, or `--view NAME` for a view), or give the table a primary key"));
    }
    Ok(())
}

/// Where Athena creates the current-state table.
#[derive(Debug, Clone, Copy)]
pub enum NewTable<'a> {
    /// An Iceberg table of the Glue Data Catalog in this (empty) S3 folder; none is refused.
    At(Option<&'a str>),
    /// A table of an S3 Tables table bucket (the change log's), which places it itself.
    InTableBucket,
}

/// `CREATE TABLE IF NOT EXISTS` the current-state table, empty, with the change log's
/// column types (DuckDB; Athena: a CTAS `WITH NO DATA` into a new Iceberg table `place`
/// says where).
pub fn render_create(req: &MergeRequest, place: NewTable<'_>) -> Result<String> {
    refuse_keyless(req)?;
    let (log, target) = relations(req)?;
    let d = req.dialect;
    let cols = req
        .columns
        .iter()
        .map(|c| d.ident(&c.name))
        .collect::<Vec<_>>()
        .join(", ");
    let (text, bigint) = match d {
        Dialect::DuckDb => ("VARCHAR", "BIGINT"),
        _ => ("varchar", "bigint"),
    };
    let select = format!(
        "SELECT {cols}, CAST(NULL AS {text}) AS {WATERMARK_POS}, CAST(NULL AS {bigint}) AS {WATERMARK_ROWS}\nFROM {log}"
    );
    Ok(match (d, place) {
        (Dialect::Athena, NewTable::InTableBucket) => {
            format!(
                "CREATE TABLE {target}\nWITH (format = 'PARQUET')\nAS {select}\nWITH NO DATA;\n"
            )
        }
        (Dialect::Athena, NewTable::At(location)) => {
            let location = location.ok_or_else(|| {
                Error::new(
                    Code::ConfigInvalid,
                    format!("the Athena current-state table of {} needs a location", req.table),
                )
                .hint("pass --location s3://bucket/prefix/ (an empty folder for the new Iceberg table)")
            })?;
            check_literal("location", location)?;
            format!(
                "CREATE TABLE {target}\nWITH (table_type = 'ICEBERG', is_external = false, location = '{location}')\nAS {select}\nWITH NO DATA;\n"
            )
        }
        _ => format!("CREATE TABLE IF NOT EXISTS {target} AS\n{select}\nLIMIT 0;\n"),
    })
}

/// The MERGE statement (module doc), ending with `;` and a newline.
pub fn render(req: &MergeRequest) -> Result<String> {
    refuse_keyless(req)?;
    let (log, target) = relations(req)?;
    let d = req.dialect;
    let q = |name: &str| d.ident(name);
    let names: Vec<String> = req.columns.iter().map(|c| q(&c.name)).collect();
    let cols = names.join(", ");
    let keys: Vec<String> = req
        .columns
        .iter()
        .filter(|c| c.key)
        .map(|c| q(&c.name))
        .collect();
    let same_key = |a: &str, b: &str| {
        keys.iter()
            .map(|k| format!("{a}.{k} = {b}.{k}"))
            .collect::<Vec<_>>()
            .join(" AND ")
    };
    let wm = format!("{WATERMARK_POS}, {WATERMARK_ROWS}");

    let mut s = String::new();
    let mut cte = |name: &str, body: String| {
        s.push_str(if s.is_empty() {
            "WITH RECURSIVE\n"
        } else {
            ",\n"
        });
        s.push_str(&format!("{name} AS (\n{body}\n)"));
    };
    cte(
        "__log",
        format!("  SELECT __op, __pos, __seq, __unlogged, {cols}\n  FROM {log}"),
    );
    // The watermark row (an aggregate: one row, NULLs without a watermark row).
    cte(
        "__watermark",
        format!(
            "  SELECT max({WATERMARK_POS}) AS __w_pos, max({WATERMARK_ROWS}) AS __w_rows\n  FROM {target} WHERE {WATERMARK_POS} IS NOT NULL"
        ),
    );
    // Rebuild unless the change log up to the watermark is the one the last MERGE read.
    cte(
        "__mode",
        "  SELECT CASE WHEN w.__w_pos IS NULL OR n.__n <> w.__w_rows THEN true ELSE false END AS __rebuild, w.__w_pos\n  FROM __watermark w CROSS JOIN (\n    SELECT count(*) AS __n FROM __log l CROSS JOIN __watermark w WHERE l.__pos <= w.__w_pos\n  ) n".into(),
    );
    cte(
        "__batch",
        "  SELECT l.* FROM __log l CROSS JOIN __mode m\n  WHERE m.__rebuild OR l.__pos > m.__w_pos"
            .into(),
    );
    // Every target row takes part when the batch drops them all (a marker, a rebuild).
    cte(
        "__reset",
        "  SELECT CASE WHEN m.__rebuild OR b.__markers > 0 THEN true ELSE false END AS __all, m.__rebuild\n  FROM __mode m CROSS JOIN (\n    SELECT count(*) AS __markers FROM __batch WHERE __op IN ('truncate', 'rebaseline')\n  ) b".into(),
    );
    cte(
        "__base",
        format!(
            "  SELECT t.* FROM (SELECT {cols} FROM {target} WHERE {WATERMARK_POS} IS NULL) t CROSS JOIN __reset r\n  WHERE r.__all OR EXISTS (SELECT 1 FROM __batch b WHERE {})",
            same_key("b", "t")
        ),
    );
    // The rule's input: the batch (first: its types are the union's), the base as
    // `snapshot` rows before every change (`''` sorts before every position), and on a
    // rebuild a `truncate` right after them.
    let nulls = vec!["NULL"; names.len()].join(", ");
    cte(
        "__current",
        format!(
            "  SELECT __op, __pos, __seq, __unlogged, {cols}, '' AS __rel FROM __batch\n  UNION ALL\n  SELECT 'snapshot', '', 0, NULL, {cols}, '' FROM __base\n  UNION ALL\n  SELECT 'truncate', '', 1, NULL, {nulls}, '' FROM __reset WHERE __rebuild"
        ),
    );
    let select = keyed(d, &req.columns, &mut cte);
    cte("__state", format!("  {}", select.replace('\n', "\n  ")));
    let key_or_null = req
        .columns
        .iter()
        .map(|c| {
            if c.key {
                format!("b.{}", q(&c.name))
            } else {
                "NULL".to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join(", ");
    cte(
        "__source",
        format!(
            "  SELECT 'upsert' AS __action, {cols}, CAST(NULL AS VARCHAR) AS {WATERMARK_POS}, CAST(NULL AS BIGINT) AS {WATERMARK_ROWS} FROM __state\n  UNION ALL\n  SELECT 'delete', {key_or_null}, NULL, NULL FROM __base b\n  WHERE NOT EXISTS (SELECT 1 FROM __state s WHERE {})\n  UNION ALL\n  SELECT 'watermark', {nulls}, max(__pos), count(*) FROM __log HAVING count(*) > 0",
            same_key("s", "b")
        ),
    );
    let source = format!("{s}\nSELECT * FROM __source");
    let set = names
        .iter()
        .map(|c| format!("{c} = s.{c}"))
        .chain([
            format!("{WATERMARK_POS} = s.{WATERMARK_POS}"),
            format!("{WATERMARK_ROWS} = s.{WATERMARK_ROWS}"),
        ])
        .collect::<Vec<_>>()
        .join(", ");
    let values = names
        .iter()
        .map(|c| format!("s.{c}"))
        .collect::<Vec<_>>()
        .join(", ");
    Ok(format!(
        "MERGE INTO {target} t\nUSING (\n{source}\n) s\nON ({} AND t.{WATERMARK_POS} IS NULL AND s.__action <> 'watermark')\n  OR (t.{WATERMARK_POS} IS NOT NULL AND s.__action = 'watermark')\nWHEN MATCHED AND s.__action = 'delete' THEN DELETE\nWHEN MATCHED THEN UPDATE SET {set}\nWHEN NOT MATCHED AND s.__action <> 'delete' THEN INSERT ({cols}, {wm})\n  VALUES ({values}, s.{WATERMARK_POS}, s.{WATERMARK_ROWS});\n",
        same_key("t", "s")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(dialect: Dialect) -> MergeRequest {
        let col = |name: &str, ty: &str, key: bool| ShapeColumn {
            name: name.into(),
            ty: ty.into(),
            key,
        };
        MergeRequest {
            dialect,
            table: "public.orders".into(),
            columns: vec![
                col("id", "int64", true),
                col("note", "utf8", false),
                col("amount", "decimal(12,2)", false),
                col("at", "timestamp_tz", false),
            ],
            log: match dialect {
                Dialect::Athena => "cdc.public_orders".into(),
                _ => "/tmp/m.metadata.json".into(),
            },
            target: "cdc.public_orders_current".into(),
        }
    }

    #[test]
    fn athena_names_every_column_fills_each_unloggable_one_and_reads_past_the_watermark() {
        let sql = render(&request(Dialect::Athena)).unwrap();
        assert!(
            sql.starts_with(
                "MERGE INTO \"cdc\".\"public_orders_current\" t\nUSING (\nWITH RECURSIVE\n"
            ),
            "{sql}"
        );
        assert!(sql.contains("  FROM \"cdc\".\"public_orders\"\n"), "{sql}");
        // The batch: the change log past the watermark, or all of it on a rebuild.
        assert!(
            sql.contains("WHERE m.__rebuild OR l.__pos > m.__w_pos"),
            "{sql}"
        );
        assert!(
            sql.contains("WHEN w.__w_pos IS NULL OR n.__n <> w.__w_rows THEN true"),
            "{sql}"
        );
        assert!(sql.contains("WHERE l.__pos <= w.__w_pos"), "{sql}");
        // A variable-length column is filled; a fixed-width one is taken as it is.
        for c in ["note", "amount"] {
            assert!(
                sql.contains(&format!("contains(__unlogged, '{c}')")),
                "{c}: {sql}"
            );
        }
        assert!(!sql.contains("'at'") && !sql.contains("'id'"), "{sql}");
        // The target's rows enter the rule as each key's base.
        assert!(sql.contains("SELECT 'snapshot', '', 0, NULL, \"id\", \"note\", \"amount\", \"at\", '' FROM __base"), "{sql}");
        let update = sql.split("WHEN MATCHED THEN UPDATE SET ").nth(1).unwrap();
        let update = update.split('\n').next().unwrap();
        let insert = sql.split("THEN INSERT (").nth(1).unwrap();
        for c in ["id", "note", "amount", "at"] {
            assert!(
                update.contains(&format!("\"{c}\" = s.\"{c}\"")),
                "{c}: {update}"
            );
            assert!(insert.contains(&format!("s.\"{c}\"")), "{c}: {insert}");
        }
        for c in [WATERMARK_POS, WATERMARK_ROWS] {
            assert!(update.contains(&format!("{c} = s.{c}")), "{update}");
        }
        let whens: Vec<&str> = sql.lines().filter(|l| l.starts_with("WHEN ")).collect();
        assert_eq!(
            whens[0],
            "WHEN MATCHED AND s.__action = 'delete' THEN DELETE"
        );
        assert!(whens[1].starts_with("WHEN MATCHED THEN UPDATE SET "));
        assert!(whens[2].starts_with("WHEN NOT MATCHED AND s.__action <> 'delete' THEN INSERT ("));
        assert!(sql.contains("ON (t.\"id\" = s.\"id\" AND t.__watermark_pos IS NULL AND s.__action <> 'watermark')\n  OR (t.__watermark_pos IS NOT NULL AND s.__action = 'watermark')"), "{sql}");
        assert!(sql.contains("SELECT 'watermark', NULL, NULL, NULL, NULL, max(__pos), count(*) FROM __log HAVING count(*) > 0"), "{sql}");
        assert!(sql.ends_with(";\n"));
    }

    #[test]
    fn duckdb_and_athena_differ_only_in_the_log_and_the_array_test() {
        let duck = render(&request(Dialect::DuckDb)).unwrap();
        let athena = render(&request(Dialect::Athena)).unwrap();
        assert!(
            duck.contains("FROM iceberg_scan('/tmp/m.metadata.json')\n"),
            "{duck}"
        );
        assert_eq!(
            duck.replace(
                "iceberg_scan('/tmp/m.metadata.json')",
                "\"cdc\".\"public_orders\""
            )
            .replace("list_contains(", "contains("),
            athena
        );
    }

    #[test]
    fn several_keys_match_on_all_of_them() {
        let mut req = request(Dialect::Athena);
        req.columns[3].key = true;
        let sql = render(&req).unwrap();
        assert!(
            sql.contains("WHERE b.\"id\" = t.\"id\" AND b.\"at\" = t.\"at\""),
            "{sql}"
        );
        assert!(
            sql.contains(
                "SELECT 'delete', b.\"id\", NULL, NULL, b.\"at\", NULL, NULL FROM __base b"
            ),
            "{sql}"
        );
    }

    #[test]
    fn create_statements() {
        let duck = render_create(&request(Dialect::DuckDb), NewTable::At(None)).unwrap();
        assert_eq!(
            duck,
            "CREATE TABLE IF NOT EXISTS \"cdc\".\"public_orders_current\" AS\nSELECT \"id\", \"note\", \"amount\", \"at\", CAST(NULL AS VARCHAR) AS __watermark_pos, CAST(NULL AS BIGINT) AS __watermark_rows\nFROM iceberg_scan('/tmp/m.metadata.json')\nLIMIT 0;\n"
        );
        let athena = render_create(
            &request(Dialect::Athena),
            NewTable::At(Some("s3://b/p/public.orders/_current/")),
        )
        .unwrap();
        assert!(athena.starts_with("CREATE TABLE \"cdc\".\"public_orders_current\"\nWITH (table_type = 'ICEBERG', is_external = false, location = 's3://b/p/public.orders/_current/')\nAS SELECT "), "{athena}");
        assert!(athena.ends_with("\nWITH NO DATA;\n"), "{athena}");
        assert_eq!(
            render_create(&request(Dialect::Athena), NewTable::At(None))
                .unwrap_err()
                .code(),
            Code::ConfigInvalid
        );
        // A table of the S3 Tables bucket: S3 Tables places it, every table there is Iceberg.
        let bucket = render_create(&request(Dialect::Athena), NewTable::InTableBucket).unwrap();
        assert!(
            bucket.starts_with("CREATE TABLE \"cdc\".\"public_orders_current\"\nWITH (format = 'PARQUET')\nAS SELECT "),
            "{bucket}"
        );
    }

    #[test]
    fn refusals() {
        let mut req = request(Dialect::Athena);
        req.columns.iter_mut().for_each(|c| c.key = false);
        let err = render(&req).unwrap_err();
        assert_eq!(err.code(), Code::ReplayMergeKeyless);
        assert_eq!(
            render_create(&req, NewTable::At(Some("s3://b/x/")))
                .unwrap_err()
                .code(),
            Code::ReplayMergeKeyless
        );
        let mut req = request(Dialect::Spark);
        req.log = "x".into();
        assert_eq!(render(&req).unwrap_err().code(), Code::ConfigInvalid);
        let mut req = request(Dialect::DuckDb);
        req.log = "/tmp/it's.json".into();
        assert_eq!(render(&req).unwrap_err().code(), Code::ConfigInvalid);
        let mut req = request(Dialect::DuckDb);
        req.columns.clear();
        assert_eq!(render(&req).unwrap_err().code(), Code::ReplayNoSchema);
    }
}
