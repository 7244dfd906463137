//! `sluice init`: connect read-only, list the tables (key and replica identity), and
//! write a ready config per stream plus the matching Terraform module calls.
//!
//! Guarantees: the session is read-only (nothing is created on the server); the URL is
//! never written — configs name the environment variable; every stream gets distinct
//! job, slot and publication names; a table the drain would refuse (no key, `REPLICA
//! IDENTITY NOTHING`) is still written, with the drain's own message and fix as a comment
//! ([`catalog::check_identity`]).

use std::path::Path;

use crate::error::{Code, Error, Result};
use crate::source::postgres::catalog::{self, split_name};
use crate::source::postgres::connect::{self, Session, query_error};

/// A table as `init` lists it.
#[derive(Debug, Clone)]
pub struct TableInfo {
    pub name: String,
    pub replident: String,
    pub key: Vec<String>,
    /// The primary key's constraint name when it is `DEFERRABLE`.
    pub deferrable_pk: Option<String>,
}

/// One stream to write: a job and its tables.
#[derive(Debug, Clone)]
pub struct Stream {
    pub job: String,
    pub resource: String,
    pub tables: Vec<TableInfo>,
}

pub async fn run(
    source_env: &str,
    tables: &[String],
    per_table: bool,
    out: &Path,
) -> Result<serde_json::Value> {
    let url = std::env::var(source_env).map_err(|_| {
        Error::new(
            Code::ConfigSecret,
            format!("environment variable {source_env} is not set"),
        )
        .hint(format!(
            "export {source_env}=postgres://user:password@host:5432/db"
        ))
    })?;
    let timeouts = crate::config::TimeoutsConfig::default();
    let session = Session::control(&timeouts).setup(
        "starting a read-only session",
        "SET default_transaction_read_only = on",
    );
    let tls = crate::tls::TlsConfig::default();
    let client = connect::connect(&url, &tls, &timeouts, &session).await?;
    let database: String = client
        .query_one("SELECT current_database()::text", &[])
        .await
        .map_err(|e| query_error("reading the database name", e))?
        .get(0);
    let listed = list_tables(&client).await?;
    let chosen = choose(&listed, tables)?;
    let streams = plan(&database, &chosen, per_table);
    std::fs::create_dir_all(out).map_err(|e| write_error(out, e))?;
    let mut files = Vec::new();
    for stream in &streams {
        let path = out.join(format!("{}.yaml", stream.job));
        std::fs::write(
            &path,
            render_config(stream, source_env, per_table, streams.len()),
        )
        .map_err(|e| write_error(&path, e))?;
        files.push(path.display().to_string());
    }
    let tf = out.join("sluice.tf");
    std::fs::write(&tf, render_terraform(&streams)).map_err(|e| write_error(&tf, e))?;
    files.push(tf.display().to_string());
    Ok(serde_json::json!({
        "database": database,
        "streams": streams.iter().map(|s| serde_json::json!({
            "job": s.job,
            "slot": s.resource,
            "tables": s.tables.iter().map(|t| &t.name).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "files": files,
    }))
}

fn write_error(path: &Path, e: std::io::Error) -> Error {
    Error::new(
        Code::ConfigInvalid,
        format!("cannot write {}", path.display()),
    )
    .hint("pass a writable directory with --out")
    .source(e)
}

async fn list_tables(client: &tokio_postgres::Client) -> Result<Vec<TableInfo>> {
    let rows = client
        .query(
            "SELECT n.nspname::text, c.relname::text, c.relreplident::text, \
             COALESCE((SELECT array_agg(a.attname::text ORDER BY a.attnum) FROM pg_index i \
                JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) \
                WHERE i.indrelid = c.oid AND CASE WHEN c.relreplident = 'i' THEN i.indisreplident ELSE i.indisprimary END), '{}'), \
             (SELECT k.conname::text FROM pg_constraint k WHERE k.conrelid = c.oid AND k.contype = 'p' AND k.condeferrable) \
             FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition \
               AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%' \
               AND has_table_privilege(c.oid, 'SELECT') \
             ORDER BY 1, 2",
            &[],
        )
        .await
        .map_err(|e| query_error("listing tables", e))?;
    Ok(rows
        .iter()
        .map(|r| TableInfo {
            name: format!("{}.{}", r.get::<_, String>(0), r.get::<_, String>(1)),
            replident: r.get(2),
            key: r.get(3),
            deferrable_pk: r.get(4),
        })
        .collect())
}

/// The requested tables (all when none is named); an unknown name is an error.
fn choose(listed: &[TableInfo], wanted: &[String]) -> Result<Vec<TableInfo>> {
    if wanted.is_empty() {
        if listed.is_empty() {
            return Err(Error::new(
                Code::SourcePrerequisite,
                "the source user can see no tables",
            )
            .hint("grant SELECT on the tables to capture to the source user"));
        }
        return Ok(listed.to_vec());
    }
    wanted
        .iter()
        .map(|w| {
            let (schema, table) = split_name(w);
            let full = format!("{schema}.{table}");
            listed
                .iter()
                .find(|t| t.name == full)
                .cloned()
                .ok_or_else(|| {
                    Error::new(
                        Code::SourcePrerequisite,
                        format!("table {w} does not exist or is not readable"),
                    )
                    .hint("check --tables (schema.table) and the source user's SELECT grant")
                })
        })
        .collect()
}

/// `[a-z0-9_]`, for job, slot and publication names.
fn slug(text: &str) -> String {
    let mut s: String = text
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    s.truncate(50);
    s
}

/// Groups tables into streams with distinct names.
pub fn plan(database: &str, tables: &[TableInfo], per_table: bool) -> Vec<Stream> {
    let groups: Vec<(String, Vec<TableInfo>)> = if per_table {
        tables
            .iter()
            .map(|t| {
                (
                    slug(&format!(
                        "{database}_{}",
                        t.name.strip_prefix("public.").unwrap_or(&t.name)
                    )),
                    vec![t.clone()],
                )
            })
            .collect()
    } else {
        vec![(slug(database), tables.to_vec())]
    };
    let mut seen = std::collections::HashSet::new();
    groups
        .into_iter()
        .enumerate()
        .map(|(i, (mut job, tables))| {
            if !seen.insert(job.clone()) {
                job = format!("{job}_{i}");
                seen.insert(job.clone());
            }
            Stream {
                resource: format!("sluice_{job}"),
                job,
                tables,
            }
        })
        .collect()
}

/// The config of one stream, with the operator's decisions as comments.
pub fn render_config(stream: &Stream, source_env: &str, per_table: bool, streams: usize) -> String {
    let mut out = String::new();
    out.push_str("# Written by `sluice init`. Check it with `sluice validate --config <file>`,\n");
    out.push_str("# then `sluice doctor --config <file>` before the first drain.\n");
    if per_table {
        out.push_str(&format!(
            "# Decision: one stream per table ({streams} streams). Each stream has its own slot, and\n\
             # every slot decodes ALL the database's WAL: {streams} slots cost {streams}x the decoding\n\
             # and each retains WAL until its job runs. In exchange, tables are independent\n\
             # (schedules, failures, re-baselines). Omit --per-table for one shared stream.\n"
        ));
    } else {
        out.push_str(
            "# Decision: one stream for all these tables — one slot, WAL decoded once, one\n\
             # checkpoint. Its cost: the tables share a schedule, and one table's refusal (a\n\
             # schema change, a re-baseline) stops them all. Use --per-table to split them\n\
             # (each extra slot decodes all WAL again).\n",
        );
    }
    out.push_str(&format!("job: {}\nsource:\n", stream.job));
    out.push_str(&format!(
        "  url_env: {source_env}   # the URL stays in the environment, never in this file\n"
    ));
    out.push_str("  tables:\n");
    for t in &stream.tables {
        let note = match catalog::check_identity(&t.name, &t.replident, &t.key).and_then(|()| {
            catalog::check_key_immediate(&t.name, &t.replident, t.deferrable_pk.as_deref())
        }) {
            Err(e) => format!(
                "   # WARNING: the drain refuses this table: {} — fix: {}",
                e.message(),
                e.hint_text().unwrap_or_default()
            ),
            Ok(()) if t.replident == "f" => "   # REPLICA IDENTITY FULL".to_owned(),
            Ok(()) => format!("   # key: {}", t.key.join(", ")),
        };
        out.push_str(&format!("    - {}{note}\n", t.name));
    }
    out.push_str(&format!(
        "  postgres:\n    slot: {r}          # owned by this stream only (sluice claims it in the state store)\n    publication: {r}\n    create: true   # false: create them yourself; the error names the statement\n",
        r = stream.resource
    ));
    out.push_str(&format!(
        "# Decision: where parts and state go. For AWS, use the S3 destination and DynamoDB\n\
         # state; every job of one source must share ONE state store so claims can work.\n\
         destination: {{ type: local, path: ./out/{} }}\nstate: {{ type: local, path: ./state }}\n",
        stream.job
    ));
    out.push_str("# Decision: `none` captures changes from the first run on; `snapshot` baselines the\n# tables first (reads every row once).\ninitial: none\n");
    out
}

/// `module` blocks for the sluice_table Terraform module, one per stream.
pub fn render_terraform(streams: &[Stream]) -> String {
    let mut out = String::from(
        "# Written by `sluice init`: one sluice_table module call per stream. Assumes a\n\
         # `module \"stack\"` (sluice_stack), `var.package_path` and `var.source_secret_arn`\n\
         # (the Secrets Manager secret holding the source URL). Adjust the schedule.\n",
    );
    for s in streams {
        let tables = s
            .tables
            .iter()
            .map(|t| format!("\"{}\"", t.name))
            .collect::<Vec<_>>()
            .join(", ");
        out.push_str(&format!(
            "\nmodule \"{job}\" {{\n  source       = \"./modules/sluice_table\"\n  stack        = module.stack.for_tables\n  package_path = var.package_path\n\n  job        = \"{job}\"\n  engine     = \"postgres\"\n  secret_arn = var.source_secret_arn\n  tables     = [{tables}]\n  postgres = {{\n    slot        = \"{r}\"\n    publication = \"{r}\"\n  }}\n\n  schedule_expression = \"rate(5 minutes)\"\n}}\n",
            job = s.job,
            r = s.resource,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(name: &str, replident: &str, key: &[&str]) -> TableInfo {
        TableInfo {
            name: name.into(),
            replident: replident.into(),
            key: key.iter().map(|k| k.to_string()).collect(),
            deferrable_pk: None,
        }
    }

    #[test]
    fn a_deferrable_primary_key_is_flagged_with_its_fix() {
        let mut table = t("public.d", "d", &["id"]);
        table.deferrable_pk = Some("d_pkey".into());
        let stream = &plan("shop", &[table], false)[0];
        let text = render_config(stream, "SRC", true, 2);
        assert!(
            text.contains("WARNING: the drain refuses this table")
                && text.contains("DEFERRABLE")
                && text.contains("REPLICA IDENTITY FULL"),
            "{text}"
        );
    }

    #[test]
    fn streams_get_distinct_names() {
        let tables = [t("public.a", "d", &["id"]), t("app.a", "n", &["id"])];
        let one = plan("Shop", &tables, false);
        assert_eq!(one.len(), 1);
        assert_eq!(one[0].job, "shop");
        assert_eq!(one[0].resource, "sluice_shop");
        let many = plan("shop", &tables, true);
        let jobs: Vec<_> = many.iter().map(|s| s.job.as_str()).collect();
        assert_eq!(jobs, ["shop_a", "shop_app_a"]);
        let text = render_config(&many[1], "SRC", true, 2);
        assert!(
            text.contains("WARNING: the drain refuses this table"),
            "{text}"
        );
        let config = crate::job::config::parse(&text, "init").unwrap();
        assert_eq!(config.source.postgres.unwrap().slot, "sluice_shop_app_a");
        assert!(render_terraform(&many).contains("module \"shop_app_a\""));
    }
}
