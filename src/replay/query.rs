//! The replay rule as one SQL text: a table folder's rows in, the table's current state out.
//!
//! Guarantees — the rule of docs/output.md, every clause of it, in every dialect (the
//! dialects differ only in [`Dialect`]'s few spellings):
//!
//! * **data files only**: a row counts when its file's path below the table folder ends in
//!   `.parquet` and no folder or file name on the way starts with `_` or `.` (everything
//!   sluice writes beside parts does); of the baseline folders `snapshot/<plan id>/`, only
//!   the newest complete plan's (plan ids sort in anchoring order): the newest holding a
//!   `rebaseline` row, else the oldest — never a plan still being read. Change parts count wherever
//!   they lie (`cdc-…` in the folder, or under `dt=…/` and `hr=…/` with the dated layout);
//! * **markers**: a `truncate` or `rebaseline` row drops every row of the table at or
//!   before its `(__pos, __seq)`, and is itself no row of the table;
//! * **duplicates** (at-least-once re-deliveries, byte-identical) count once;
//! * **latest**: per key, the row with the highest `(__pos, __seq)`; a key whose latest
//!   row is a `delete` is not in the state;
//! * **unlogged values**: a column a row lists in `__unlogged` takes the key's previous
//!   value — the last row since the key's last delete that logged it — or, when the key's
//!   rows since that delete start with the insert half of a key change (an `insert` right
//!   after a `delete` at the same `__pos`, `__seq` one less) and none logged it, the value
//!   the old key held just before that delete, followed back through earlier key changes
//!   (a recursive CTE; Athena stops at 10 steps). Only columns of a type a source can
//!   leave unlogged take part (fixed-width types — booleans, numbers other than
//!   decimals, dates, times, timestamps, UUIDs — are always logged);
//! * **a table without a key column** replays as a multiset instead of the two clauses
//!   above: after the newest marker (a `rebaseline` marker's own `snapshot` rows at its
//!   `__pos` included), every `snapshot` and `insert` row counts +1 and every `delete` −1
//!   per distinct row (all columns, NULLs equal), and each row is repeated that many times;
//! * the columns are the shape's, in order; metadata columns are not in the result.

use super::dialect::Dialect;
use crate::error::{Code, Error, Result};
use crate::fold::may_be_unlogged;
pub use crate::lake::shape::ShapeColumn;

/// Where the rows are read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rows {
    /// The table folder (a local path or an `s3://` URI): DuckDB and Spark read it.
    Folder(String),
    /// A catalog table over the table folder (`db.table`): Athena reads it.
    Table(String),
}

/// Everything one rendering needs.
#[derive(Debug, Clone)]
pub struct Request {
    pub dialect: Dialect,
    /// The table's folder name (`public.orders`): data files are found below `/<table>/`.
    pub table: String,
    pub columns: Vec<ShapeColumn>,
    pub rows: Rows,
    /// Render `CREATE OR REPLACE VIEW <view> AS …` instead of the bare query.
    pub view: Option<String>,
}

/// Refuses text that would need escaping inside a string literal in some dialect.
pub fn check_literal(what: &str, text: &str) -> Result<()> {
    if text.contains('\'') || text.contains('\\') {
        return Err(Error::new(
            Code::ConfigInvalid,
            format!("{what} {text:?} contains a quote or a backslash"),
        )
        .hint("sluice sql writes names and paths as plain SQL string literals; rename or move the data to a path without ' and \\"));
    }
    Ok(())
}

/// `text` as a regular expression matching itself: every character other than a letter,
/// digit or `_` becomes a one-character class (`.` → `[.]`), valid in RE2 and Java.
fn regex_literal(text: &str) -> Result<String> {
    let mut out = String::new();
    for c in text.chars() {
        if c.is_ascii_alphanumeric() || c == '_' {
            out.push(c);
        } else if matches!(c, ']' | '^' | '\\' | '[') {
            return Err(Error::new(
                Code::ConfigInvalid,
                format!("table name {text:?} contains {c:?}"),
            )
            .hint("sluice sql supports table names without [ ] ^ and \\"));
        } else {
            out.push('[');
            out.push(c);
            out.push(']');
        }
    }
    Ok(out)
}

/// Renders the request as SQL text (one statement; Spark: two, the first defining the
/// rows' temporary view), ending with `;` and a newline.
pub fn render(req: &Request) -> Result<String> {
    let d = req.dialect;
    check_literal("table", &req.table)?;
    let keys: Vec<&ShapeColumn> = req.columns.iter().filter(|c| c.key).collect();
    if req.columns.is_empty() {
        return Err(Error::new(
            Code::ReplayNoSchema,
            format!("table {} has no columns", req.table),
        )
        .hint("the table's manifests record no column: run a drain or a baseline of it first"));
    }
    let q = |name: &str| d.ident(name);
    let lit = |text: &str| format!("'{text}'");
    let cols = req
        .columns
        .iter()
        .map(|c| q(&c.name))
        .collect::<Vec<_>>()
        .join(", ");

    let mut prelude = String::new();
    let from = match (&req.rows, d) {
        (Rows::Folder(path), Dialect::DuckDb) => {
            check_literal("path", path)?;
            format!(
                "read_parquet({}, union_by_name = true, filename = true, hive_partitioning = false)",
                lit(&format!("{}/**/*.parquet", path.trim_end_matches('/')))
            )
        }
        (Rows::Folder(path), Dialect::Spark) => {
            check_literal("path", path)?;
            let raw = q(&format!("sluice_rows_{}", sanitize(&req.table)));
            prelude = format!(
                "CREATE OR REPLACE TEMPORARY VIEW {raw}\nUSING parquet\nOPTIONS (path {}, recursiveFileLookup 'true', mergeSchema 'true', pathGlobFilter '*.parquet');\n\n",
                lit(path.trim_end_matches('/'))
            );
            raw
        }
        (Rows::Table(name), Dialect::Athena) => {
            name.split('.').map(&q).collect::<Vec<_>>().join(".")
        }
        (rows, d) => {
            return Err(Error::new(
                Code::ConfigInvalid,
                format!("the {d} dialect cannot read {rows:?}"),
            )
            .hint("DuckDB and Spark read a folder (a path or s3:// URI); Athena reads a catalog table (db.table)"));
        }
    };

    let table_re = regex_literal(&req.table)?;
    let mut s = String::new();
    let mut cte = |name: &str, body: String| {
        s.push_str(if s.is_empty() {
            "WITH RECURSIVE\n"
        } else {
            ",\n"
        });
        s.push_str(&format!("{name} AS (\n{body}\n)"));
    };
    // The rows, with the path of their file below the table folder.
    cte(
        "__files",
        format!(
            "  SELECT __op, __pos, __seq, __unlogged, {cols},\n    regexp_extract({path}, {re}, 1) AS __rel\n  FROM {from}",
            path = d.file_path(),
            re = lit(&format!("^.*/{table_re}/(.*)$")),
        ),
    );
    // Data files only; of the baselines, the newest complete plan's (`__current`).
    cte(
        "__data",
        format!(
            "  SELECT *, CASE WHEN __rel LIKE 'snapshot/%' THEN regexp_extract(__rel, '^snapshot/([^/]+)/', 1) END AS __plan\n  FROM __files\n  WHERE __rel LIKE '%.parquet' AND NOT {}",
            d.regex_matches("__rel", "'(^|/)[_.]'")
        ),
    );
    // The newest plan folder holding a `rebaseline` row is complete (a re-baseline's epoch
    // marker is written once every chunk is; a keyless table's one chunk holds its own);
    // without one, the oldest folder is the first baseline, complete before any
    // re-baseline was anchored. A plan still being read (or given up) is never current.
    cte(
        "__current",
        "  SELECT * FROM __data\n  WHERE __plan IS NULL OR __plan = coalesce(\n    (SELECT max(__plan) FROM __data WHERE __op = 'rebaseline' AND __plan IS NOT NULL),\n    (SELECT min(__plan) FROM __data))".into(),
    );
    if keys.is_empty() {
        keyless(&mut cte, &cols);
        return Ok(finish(req, &prelude, multiset_select(d, &cols, &s)));
    }
    let select = keyed(d, &req.columns, &mut cte);
    let query = format!("{s}\n{select}");
    Ok(finish(req, &prelude, query))
}

/// The keyed rule (clauses 1–4 of docs/output.md) over a CTE `__current` of rows with
/// `__op, __pos, __seq, __unlogged`, the table's columns and `__rel` (the file a row was
/// read from; copies of one change in different files count once): adds its CTEs through
/// `cte` and returns the final `SELECT` — one row per key of the current state, the
/// table's columns in order.
pub(super) fn keyed(
    d: Dialect,
    columns: &[ShapeColumn],
    cte: &mut dyn FnMut(&str, String),
) -> String {
    let q = |name: &str| d.ident(name);
    let lit = |text: &str| format!("'{text}'");
    let k = columns
        .iter()
        .filter(|c| c.key)
        .map(|c| q(&c.name))
        .collect::<Vec<_>>()
        .join(", ");
    let fills: Vec<(usize, &ShapeColumn)> = columns
        .iter()
        .filter(|c| !c.key && may_be_unlogged(&c.ty))
        .enumerate()
        .collect();
    let running = "ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW";
    // The last marker: it and every row at or before it are gone.
    cte(
        "__marker",
        "  SELECT __pos AS __m_pos, __seq AS __m_seq FROM __current\n  WHERE __op IN ('truncate', 'rebaseline')\n  ORDER BY __pos DESC, __seq DESC\n  LIMIT 1".into(),
    );
    cte(
        "__live",
        "  SELECT c.* FROM __current c LEFT JOIN __marker m ON 1 = 1\n  WHERE c.__op NOT IN ('truncate', 'rebaseline')\n    AND (m.__m_pos IS NULL OR c.__pos > m.__m_pos OR (c.__pos = m.__m_pos AND c.__seq > m.__m_seq))".into(),
    );
    // A re-delivered change counts once (a run never writes one change twice, so its
    // copies lie in different files). The "latest row" filters below compare with a
    // window `max`, not `row_number() = 1`: DuckDB rewrites the latter into an aggregate
    // that turns -0.0 into 0.0.
    cte(
        "__distinct",
        format!(
            "  SELECT * FROM (\n    SELECT *, min(__rel) OVER (PARTITION BY {k}, __pos, __seq) AS __first FROM __live\n  ) t WHERE __rel = __first"
        ),
    );
    // Per key: an ordinal, and segments — the rows from an insert (or the baseline) up to
    // the key's next delete. A segment that starts with the insert half of a key change
    // (right after a delete at the same position) carries values from the deleted row's.
    cte(
        "__ordered",
        format!(
            "  SELECT *,\n    row_number() OVER (PARTITION BY {k} ORDER BY __pos, __seq) AS __ord,\n    CASE WHEN coalesce(lag(__op) OVER (PARTITION BY {k} ORDER BY __pos, __seq), 'delete') = 'delete' THEN 1 ELSE 0 END AS __starts,\n    CASE WHEN __op = 'insert' AND lag(__op) OVER (PARTITION BY __pos ORDER BY __seq) = 'delete' AND lag(__seq) OVER (PARTITION BY __pos ORDER BY __seq) = __seq - 1 THEN true ELSE false END AS __key_change\n  FROM __distinct"
        ),
    );
    cte(
        "__segmented",
        format!(
            "  SELECT *, sum(__starts) OVER (PARTITION BY {k} ORDER BY __ord {running}) AS __seg\n  FROM __ordered"
        ),
    );
    cte(
        "__started",
        ["__pos", "__seq", "__key_change"]
            .iter()
            .map(|m| {
                format!(
                    "first_value({m}) OVER (PARTITION BY {k}, __seg ORDER BY __ord {running}) AS __s{m}"
                )
            })
            .fold("  SELECT *".to_owned(), |acc, w| format!("{acc},\n    {w}"))
            + "\n  FROM __segmented",
    );
    // Per fill column: the ordinal of the segment's last row that logged it (up to this
    // row), then that row's value.
    let unlogged = |c: &ShapeColumn| {
        format!(
            "coalesce({}, false)",
            d.array_contains("__unlogged", &lit(&c.name))
        )
    };
    cte(
        "__logged",
        fills
            .iter()
            .map(|(i, c)| {
                format!(
                    "max(CASE WHEN __op <> 'delete' AND NOT {} THEN __ord END) OVER (PARTITION BY {k}, __seg ORDER BY __ord {running}) AS __lo_{i}",
                    unlogged(c)
                )
            })
            .fold("  SELECT *".to_owned(), |acc, w| format!("{acc},\n    {w}"))
            + "\n  FROM __started",
    );
    cte(
        "__filled",
        fills
            .iter()
            .map(|(i, c)| {
                format!(
                    "CASE WHEN __lo_{i} IS NOT NULL THEN first_value({}) OVER (PARTITION BY {k}, __seg, __lo_{i} ORDER BY __ord {running}) END AS __v_{i}",
                    q(&c.name)
                )
            })
            .fold("  SELECT *".to_owned(), |acc, w| format!("{acc},\n    {w}"))
            + "\n  FROM __logged",
    );
    // A segment's end: each fill column's value just before the delete, and where the
    // segment itself came from.
    let per = |f: &dyn Fn(usize) -> String| -> String {
        fills
            .iter()
            .map(|(i, _)| f(*i))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let hv = |i: usize| format!("(__lo_{i} IS NOT NULL) AS __h_{i}, __v_{i}");
    cte(
        "__ends",
        format!(
            "  SELECT __pos AS __e_pos, __seq AS __e_seq,\n    CASE WHEN __s__key_change THEN __s__pos END AS __e_link_pos, __s__seq - 1 AS __e_link_seq{}\n  FROM __filled WHERE __op = 'delete'",
            if fills.is_empty() {
                String::new()
            } else {
                format!(",\n    {}", per(&hv))
            }
        ),
    );
    // Follow key changes back until every fill column found its value.
    let carry_cols = format!(
        "__x_pos, __x_seq, __at_pos, __at_seq, __depth{}",
        if fills.is_empty() {
            String::new()
        } else {
            format!(
                ", {}, {}",
                per(&|i| format!("__h_{i}")),
                per(&|i| format!("__v_{i}"))
            )
        }
    );
    let opt = |text: String| {
        if fills.is_empty() {
            String::new()
        } else {
            format!(",\n    {text}")
        }
    };
    let all_found = if fills.is_empty() {
        "true".to_owned()
    } else {
        fills
            .iter()
            .map(|(i, _)| format!("c.__h_{i}"))
            .collect::<Vec<_>>()
            .join(" AND ")
    };
    cte(
        &format!("__carry({carry_cols})"),
        format!(
            "  SELECT f.__s__pos, f.__s__seq, e.__e_link_pos, e.__e_link_seq, 1{base}\n  FROM (SELECT DISTINCT __s__pos, __s__seq FROM __filled WHERE __s__key_change) f\n  JOIN __ends e ON e.__e_pos = f.__s__pos AND e.__e_seq = f.__s__seq - 1\n  UNION ALL\n  SELECT c.__x_pos, c.__x_seq, e.__e_link_pos, e.__e_link_seq, c.__depth + 1{step}\n  FROM __carry c JOIN __ends e ON e.__e_pos = c.__at_pos AND e.__e_seq = c.__at_seq\n  WHERE NOT ({all_found})",
            base = opt(format!(
                "{}, {}",
                per(&|i| format!("e.__h_{i}")),
                per(&|i| format!("e.__v_{i}"))
            )),
            step = opt(format!(
                "{}, {}",
                per(&|i| format!("(c.__h_{i} OR e.__h_{i})")),
                per(&|i| format!("CASE WHEN c.__h_{i} THEN c.__v_{i} ELSE e.__v_{i} END"))
            )),
        ),
    );
    cte(
        "__carried",
        "  SELECT * FROM (\n    SELECT c.*, max(__depth) OVER (PARTITION BY __x_pos, __x_seq) AS __deepest FROM __carry c\n  ) t WHERE __depth = __deepest".into(),
    );
    cte(
        "__latest",
        format!(
            "  SELECT * FROM (\n    SELECT f.*, max(__ord) OVER (PARTITION BY {k}) AS __last FROM __filled f\n  ) t WHERE __ord = __last AND __op <> 'delete'"
        ),
    );
    let select = columns
        .iter()
        .map(|c| match fills.iter().find(|(_, f)| f.name == c.name) {
            Some((i, _)) => format!(
                "CASE WHEN l.__lo_{i} IS NOT NULL THEN l.__v_{i} ELSE c.__v_{i} END AS {}",
                q(&c.name)
            ),
            None => format!("l.{}", q(&c.name)),
        })
        .collect::<Vec<_>>()
        .join(",\n  ");
    format!(
        "SELECT\n  {select}\nFROM __latest l\nLEFT JOIN __carried c ON l.__s__key_change AND c.__x_pos = l.__s__pos AND c.__x_seq = l.__s__seq"
    )
}

/// The statement: the query, or the view over it, after the dialect's prelude.
fn finish(req: &Request, prelude: &str, query: String) -> String {
    let d = req.dialect;
    let statement = match &req.view {
        None => query,
        Some(view) => {
            let name = view
                .split('.')
                .map(|p| d.ident(p))
                .collect::<Vec<_>>()
                .join(".");
            let kind = if d == Dialect::Spark {
                "TEMPORARY VIEW"
            } else {
                "VIEW"
            };
            format!("CREATE OR REPLACE {kind} {name} AS\n{query}")
        }
    };
    format!("{prelude}{statement};\n")
}

/// The multiset rule of a table without a key, after `__current`: the rows after the last
/// marker — a `rebaseline` marker's own snapshot rows (at its `__pos`) included — with
/// re-delivered changes once; per distinct row (every column, NULLs equal), inserts and
/// snapshot rows count +1 and deletes −1.
fn keyless(cte: &mut dyn FnMut(&str, String), cols: &str) {
    cte(
        "__marker",
        "  SELECT __op AS __m_op, __pos AS __m_pos, __seq AS __m_seq FROM __current\n  WHERE __op IN ('truncate', 'rebaseline')\n  ORDER BY __pos DESC, __seq DESC\n  LIMIT 1".into(),
    );
    cte(
        "__live",
        "  SELECT c.* FROM __current c LEFT JOIN __marker m ON 1 = 1\n  WHERE (c.__op = 'snapshot' AND (m.__m_pos IS NULL OR (m.__m_op = 'rebaseline' AND c.__pos = m.__m_pos)))\n    OR (c.__op IN ('insert', 'delete') AND (m.__m_pos IS NULL OR c.__pos > m.__m_pos OR (c.__pos = m.__m_pos AND c.__seq > m.__m_seq)))".into(),
    );
    // A re-delivered change counts once; snapshot rows are each a row (identical rows
    // of the table are identical snapshot rows, and a chunk's part is written once).
    cte(
        "__distinct",
        "  SELECT * FROM (\n    SELECT *, min(__rel) OVER (PARTITION BY __pos, __seq) AS __first FROM __live\n  ) t WHERE __op = 'snapshot' OR __rel = __first".into(),
    );
    cte(
        "__counted",
        format!(
            "  SELECT {cols}, CAST(sum(CASE WHEN __op = 'delete' THEN -1 ELSE 1 END) AS BIGINT) AS __n\n  FROM __distinct\n  GROUP BY {cols}"
        ),
    );
}

/// Each row of `__counted` as many times as it counts.
fn multiset_select(d: Dialect, cols: &str, ctes: &str) -> String {
    format!(
        "{ctes}\nSELECT {cols}\nFROM (SELECT * FROM __counted WHERE __n > 0) __c\n{}",
        d.repeat_by("__n", "__i")
    )
}

/// `text` with every character other than a letter, digit or `_` replaced by `_`.
pub fn sanitize(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape() -> Vec<ShapeColumn> {
        let col = |name: &str, ty: &str, key: bool| ShapeColumn {
            name: name.into(),
            ty: ty.into(),
            key,
        };
        vec![
            col("id", "int64", true),
            col("note", "utf8", false),
            col("amount", "decimal(12,2)", false),
            col("at", "timestamp_tz", false),
        ]
    }

    fn request(dialect: Dialect) -> Request {
        Request {
            dialect,
            table: "public.orders".into(),
            columns: shape(),
            rows: match dialect {
                Dialect::Athena => Rows::Table("lake.public_orders".into()),
                _ => Rows::Folder("s3://b/p/public.orders/".into()),
            },
            view: None,
        }
    }

    /// Removes the spellings [`Dialect`] owns, so what is left must be equal.
    fn neutral(sql: &str, d: Dialect) -> String {
        let body = match d {
            Dialect::Spark => sql.split_once(";\n\n").unwrap().1,
            _ => sql,
        };
        let from_line = body
            .lines()
            .map(|l| {
                if l.trim_start().starts_with("FROM ")
                    && (l.contains("read_parquet")
                        || l.contains("lake")
                        || l.contains("sluice_rows"))
                {
                    "  FROM <rows>".to_owned()
                } else {
                    l.to_owned()
                }
            })
            .collect::<Vec<_>>()
            .join("\n");
        from_line
            .replace('`', "\"")
            .replace("list_contains(", "contains(")
            .replace("array_contains(", "contains(")
            .replace("regexp_matches(", "regexp_like(")
            .replace(
                "(__rel RLIKE '(^|/)[_.]')",
                "regexp_like(__rel, '(^|/)[_.]')",
            )
            .replace("\"$path\"", "filename")
            .replace("input_file_name()", "filename")
    }

    #[test]
    fn every_dialect_renders_the_same_rule() {
        let duck = render(&request(Dialect::DuckDb)).unwrap();
        for d in [Dialect::Athena, Dialect::Spark] {
            let other = render(&request(d)).unwrap();
            assert_eq!(neutral(&other, d), neutral(&duck, Dialect::DuckDb), "{d}");
        }
    }

    #[test]
    fn rows_come_from_the_dialects_reader() {
        let duck = render(&request(Dialect::DuckDb)).unwrap();
        assert!(duck.contains(
            "FROM read_parquet('s3://b/p/public.orders/**/*.parquet', union_by_name = true, filename = true, hive_partitioning = false)"
        ), "{duck}");
        let athena = render(&request(Dialect::Athena)).unwrap();
        assert!(
            athena.contains("FROM \"lake\".\"public_orders\""),
            "{athena}"
        );
        assert!(athena.contains("regexp_extract(\"$path\", '^.*/public[.]orders/(.*)$', 1)"));
        let spark = render(&request(Dialect::Spark)).unwrap();
        assert!(spark.starts_with(
            "CREATE OR REPLACE TEMPORARY VIEW `sluice_rows_public_orders`\nUSING parquet\nOPTIONS (path 's3://b/p/public.orders', recursiveFileLookup 'true'"
        ), "{spark}");
    }

    #[test]
    fn only_variable_length_columns_are_filled() {
        let duck = render(&request(Dialect::DuckDb)).unwrap();
        assert!(duck.contains("list_contains(__unlogged, 'note')"));
        assert!(duck.contains("list_contains(__unlogged, 'amount')"));
        assert!(!duck.contains("'at'"));
        assert!(duck.contains("l.\"at\""));
        assert!(duck.contains("l.\"id\""));
    }

    #[test]
    fn markers_and_views() {
        let mut req = request(Dialect::Athena);
        req.view = Some("lake.orders_current".into());
        let sql = render(&req).unwrap();
        assert!(sql.starts_with(
            "CREATE OR REPLACE VIEW \"lake\".\"orders_current\" AS\nWITH RECURSIVE\n"
        ));
        assert!(sql.contains("__op IN ('truncate', 'rebaseline')"));
        let mut req = request(Dialect::Spark);
        req.view = Some("orders_current".into());
        assert!(
            render(&req)
                .unwrap()
                .contains("CREATE OR REPLACE TEMPORARY VIEW `orders_current` AS\n")
        );
    }

    #[test]
    fn a_table_without_fill_columns_still_renders() {
        let mut req = request(Dialect::DuckDb);
        req.columns.retain(|c| c.key || c.ty == "timestamp_tz");
        let sql = render(&req).unwrap();
        assert!(sql.contains("__carry(__x_pos, __x_seq, __at_pos, __at_seq, __depth)"));
        assert!(sql.contains("WHERE NOT (true)"));
    }

    #[test]
    fn a_table_without_a_key_renders_the_multiset_rule_in_every_dialect() {
        for d in Dialect::ALL {
            let mut req = request(d);
            req.columns.iter_mut().for_each(|c| c.key = false);
            let sql = render(&req).unwrap();
            assert!(
                sql.contains(
                    "CAST(sum(CASE WHEN __op = 'delete' THEN -1 ELSE 1 END) AS BIGINT) AS __n"
                ),
                "{sql}"
            );
            assert!(sql.contains(&d.repeat_by("__n", "__i")), "{sql}");
            assert!(!sql.contains("__carry"), "{sql}");
        }
    }

    #[test]
    fn refusals() {
        let mut req = request(Dialect::DuckDb);
        req.columns.clear();
        assert_eq!(render(&req).unwrap_err().code(), Code::ReplayNoSchema);
        let mut req = request(Dialect::DuckDb);
        req.rows = Rows::Folder("/tmp/it's".into());
        assert_eq!(render(&req).unwrap_err().code(), Code::ConfigInvalid);
        let mut req = request(Dialect::Athena);
        req.rows = Rows::Folder("/tmp/x".into());
        assert_eq!(render(&req).unwrap_err().code(), Code::ConfigInvalid);
        assert_eq!(regex_literal("public.my-t$").unwrap(), "public[.]my[-]t[$]");
    }
}
