//! Glue catalog registration (`catalog: { type: glue }`) against moto's Glue through the
//! real SDK: a drain from PostgreSQL to S3 creates the table with the part's columns and
//! types, `dt`/`hr` partition keys and partition projection; an added column and a widened
//! type update it; idle runs leave it alone (no Glue call, the same table version); a
//! Glue outage warns and loses nothing, and the next run registers the table. Objects:
//! database `t_glue_*`, Glue databases `sluice_glue_*`.

use aws_sdk_glue::types::Table;

use crate::support::aws::{AwsTarget, runtime, sdk, unique_name};
use crate::support::{Job, TestDb};

/// A Glue database name unique to this test run.
fn glue_database() -> String {
    unique_name("sluice_glue").replace('-', "_")
}

fn glue_table(moto: &str, database: &str, name: &str) -> Table {
    runtime().block_on(async {
        let client = aws_sdk_glue::Client::new(&sdk(moto).await);
        client
            .get_table()
            .database_name(database)
            .name(name)
            .send()
            .await
            .unwrap_or_else(|e| panic!("GetTable {database}.{name}: {e:?}"))
            .table
            .expect("a table")
    })
}

fn columns(table: &Table) -> Vec<String> {
    table
        .storage_descriptor()
        .unwrap()
        .columns()
        .iter()
        .map(|c| format!("{} {}", c.name(), c.r#type().unwrap()))
        .collect()
}

/// The table's version and parameters: what an update would change.
fn version(table: &Table) -> (Option<String>, Vec<String>, String) {
    let mut parameters: Vec<String> = table
        .parameters()
        .unwrap()
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    parameters.sort();
    (
        table.version_id().map(str::to_owned),
        parameters,
        format!("{:?}", table.update_time()),
    )
}

fn drain(job: &Job) -> serde_json::Value {
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let summary = run.summary();
    assert_eq!(summary["status"], "drained", "{summary}");
    summary
}

#[test]
fn glue_table_follows_the_part_shape_and_idle_runs_leave_it() {
    let admin = pg_or_skip!();
    let moto = aws_or_skip!();
    let db = TestDb::new(&admin, "glue");
    db.sql(
        "CREATE TABLE t (id bigint PRIMARY KEY, amount numeric(12,2), note text, tags text[], \
         created timestamptz, small int, raw bytea, day date)",
    );
    let target = AwsTarget::new(&moto);
    let database = glue_database();
    let job = target.job(
        &db,
        &["t"],
        &format!(
            "output: {{ layout: dated-hourly }}\n\
             catalog: {{ type: glue, database: {database}, table_prefix: raw_, endpoint_url: '{moto}' }}"
        ),
    );
    drain(&job);
    db.sql("INSERT INTO t VALUES (1, 12.50, 'a', '{x,y}', now(), 7, '\\x00ff', '2026-12-03')");
    let first = drain(&job);
    let registered = first["catalog"]["t"].clone();
    // The schema is known at open: the first run that saw it created the table.
    let created = glue_table(&moto, &database, "raw_t");
    assert_eq!(
        columns(&created),
        [
            "__op string",
            "__pos string",
            "__seq bigint",
            "__ts timestamp",
            "__unlogged array<string>",
            "id bigint",
            "amount decimal(12,2)",
            "note string",
            "tags array<string>",
            "created timestamp",
            "small int",
            "raw binary",
            "day date",
        ]
    );
    let keys: Vec<String> = created
        .partition_keys()
        .iter()
        .map(|c| format!("{} {}", c.name(), c.r#type().unwrap()))
        .collect();
    assert_eq!(keys, ["dt string", "hr string"]);
    let sd = created.storage_descriptor().unwrap();
    let location = format!("s3://{}/cdc/t/", target.bucket);
    assert_eq!(sd.location(), Some(location.as_str()));
    assert_eq!(
        sd.serde_info().unwrap().serialization_library(),
        Some("org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe")
    );
    assert_eq!(created.table_type(), Some("EXTERNAL_TABLE"));
    let p = created.parameters().unwrap();
    assert_eq!(p["projection.enabled"], "true");
    assert_eq!(p["projection.dt.type"], "date");
    assert_eq!(p["projection.dt.format"], "yyyy-MM-dd");
    let today = chrono::Utc::now().format("%Y-%m-%d").to_string();
    assert_eq!(p["projection.dt.range"], format!("{today},NOW"));
    assert_eq!(p["projection.hr.type"], "enum");
    assert_eq!(
        p["storage.location.template"],
        format!("{location}dt=${{dt}}/hr=${{hr}}/")
    );
    assert!(
        registered.is_null() || registered == "unchanged",
        "the table was created by the first drain: {first}"
    );
    // Projection reads only the dt= folders: the baseline gets a table of its own.
    let snapshot = glue_table(&moto, &database, "raw_t_snapshot");
    assert_eq!(columns(&snapshot), columns(&created));
    assert!(snapshot.partition_keys().is_empty());
    assert_eq!(
        snapshot.storage_descriptor().unwrap().location(),
        Some(format!("{location}snapshot/").as_str())
    );
    assert!(
        !snapshot
            .parameters()
            .unwrap()
            .contains_key("projection.enabled")
    );
    let keys = target.keys();
    assert!(
        keys.iter().any(|k| k == "cdc/t/_catalog.json"),
        "the marker is written: {keys:?}"
    );
    let day = chrono::Utc::now()
        .format("cdc/t/dt=%Y-%m-%d/hr=")
        .to_string();
    assert!(
        keys.iter()
            .any(|k| k.starts_with(&day) && k.ends_with(".parquet")),
        "the part lies in a dt=/hr= folder on S3: {keys:?}"
    );

    // Idle: Glue is not called, the table keeps its version.
    let idle = drain(&job);
    assert!(idle.get("catalog").is_none(), "{idle}");
    assert_eq!(
        version(&glue_table(&moto, &database, "raw_t")),
        version(&created)
    );

    // An added column and a widened type: the next run updates the table.
    db.sql("ALTER TABLE t ADD COLUMN extra int; ALTER TABLE t ALTER COLUMN small TYPE bigint");
    db.sql("INSERT INTO t (id, small, extra) VALUES (2, 8, 9)");
    let changed = drain(&job);
    assert_eq!(changed["catalog"]["t"], "updated", "{changed}");
    let updated = glue_table(&moto, &database, "raw_t");
    let cols = columns(&updated);
    assert!(cols.contains(&"small bigint".to_owned()), "{cols:?}");
    assert_eq!(cols.last().unwrap(), "extra int", "{cols:?}");
    assert_eq!(updated.partition_keys().len(), 2, "partition keys are kept");
    assert_eq!(updated.parameters().unwrap()["projection.enabled"], "true");
    assert_eq!(
        columns(&glue_table(&moto, &database, "raw_t_snapshot")),
        cols,
        "the snapshot table follows"
    );
    assert!(version(&created).0.is_some(), "moto reports table versions");
    assert_ne!(
        version(&updated).0,
        version(&created).0,
        "an update is a new version"
    );

    let idle = drain(&job);
    assert!(idle.get("catalog").is_none(), "{idle}");
    assert_eq!(
        version(&glue_table(&moto, &database, "raw_t")),
        version(&updated)
    );
    // Without the marker the run reads Glue, finds the same table and writes nothing.
    runtime().block_on(async {
        crate::support::aws::s3_client(&sdk(&moto).await)
            .delete_object()
            .bucket(&target.bucket)
            .key("cdc/t/_catalog.json")
            .send()
            .await
            .expect("delete the marker");
    });
    let checked = drain(&job);
    assert_eq!(checked["catalog"]["t"], "unchanged", "{checked}");
    assert_eq!(
        version(&glue_table(&moto, &database, "raw_t")),
        version(&updated)
    );
}

#[test]
fn a_glue_outage_warns_keeps_the_data_and_the_next_run_registers() {
    let admin = pg_or_skip!();
    let moto = aws_or_skip!();
    let db = TestDb::new(&admin, "glue_down");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    let target = AwsTarget::new(&moto);
    let database = glue_database();
    let catalog = |endpoint: &str| {
        format!("catalog: {{ type: glue, database: {database}, endpoint_url: '{endpoint}' }}")
    };
    // Nothing listens on port 9 of the loopback: Glue is unreachable.
    let job = target.job(&db, &["t"], &catalog("http://127.0.0.1:9"));
    drain_with_one_attempt(&job);
    db.sql("INSERT INTO t VALUES (1, 'kept')");
    let run = job.run(&["drain"], &[("AWS_MAX_ATTEMPTS", "1")]);
    assert_eq!(
        run.code, 0,
        "a catalog failure does not fail the run: {}",
        run.stderr
    );
    let summary = run.summary();
    assert_eq!(summary["status"], "drained");
    assert_eq!(summary["rows"], 1);
    assert_eq!(
        summary["catalog"]["t"], "failed: SLUICE_CATALOG_UNAVAILABLE",
        "{summary}"
    );
    assert!(
        run.stderr.contains("SLUICE_CATALOG_UNAVAILABLE"),
        "{}",
        run.stderr
    );
    assert!(!target.keys().iter().any(|k| k.ends_with("_catalog.json")));

    // The data is committed: the next run reads nothing again, and registers the table.
    let config = std::fs::read_to_string(&job.config).unwrap();
    std::fs::write(&job.config, config.replace("http://127.0.0.1:9", &moto)).unwrap();
    let next = drain(&job);
    assert_eq!(next["rows"], 0, "{next}");
    assert_eq!(next["catalog"]["t"], "created", "{next}");
    let table = glue_table(&moto, &database, "t");
    assert_eq!(columns(&table).last().unwrap(), "v string");
    assert!(
        table.partition_keys().is_empty(),
        "flat layout: no partitions"
    );
}

fn drain_with_one_attempt(job: &Job) {
    let run = job.run(&["drain"], &[("AWS_MAX_ATTEMPTS", "1")]);
    assert_eq!(run.code, 0, "{}", run.stderr);
}

fn doctor_catalog_row(job: &Job) -> serde_json::Value {
    let run = job.run(&["doctor", "--json"], &[("AWS_MAX_ATTEMPTS", "1")]);
    let doc = run.summary();
    doc["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "catalog")
        .unwrap_or_else(|| panic!("no catalog row in {doc}"))
        .clone()
}

#[test]
fn doctor_reports_the_glue_database() {
    let admin = pg_or_skip!();
    let moto = aws_or_skip!();
    let db = TestDb::new(&admin, "glue_doctor");
    db.sql("CREATE TABLE t (id int PRIMARY KEY)");
    let target = AwsTarget::new(&moto);
    let database = glue_database();
    let catalog = |endpoint: &str| {
        format!("catalog: {{ type: glue, database: {database}, endpoint_url: '{endpoint}' }}")
    };
    let job = target.job(&db, &["t"], &catalog(&moto));
    let missing = doctor_catalog_row(&job);
    assert_eq!(missing["status"], "warn", "{missing}");
    assert!(
        missing["fix"]
            .as_str()
            .unwrap()
            .contains("glue:CreateDatabase"),
        "{missing}"
    );
    drain(&job);
    let present = doctor_catalog_row(&job);
    assert_eq!(present["status"], "ok", "{present}");

    let down = target.job(&db, &["t"], &catalog("http://127.0.0.1:9"));
    let row = doctor_catalog_row(&down);
    assert_eq!(row["status"], "fail", "{row}");
    assert_eq!(row["code"], "SLUICE_CATALOG_UNAVAILABLE", "{row}");
}

/// Glue going silent (packets dropped, no reset) at the end of a run with a deadline: the
/// registration gives up at the run's abort instant, so the run still ends before its
/// deadline — drained, its run record written — with the catalog failure as a warning.
#[test]
fn a_silent_glue_does_not_hold_a_run_past_its_deadline() {
    let admin = pg_or_skip!();
    let moto = aws_or_skip!();
    let db = TestDb::new(&admin, "glue_silent");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    let glue = crate::support::proxy::Proxy::start(moto.trim_start_matches("http://"));
    let target = AwsTarget::new(&moto);
    let database = glue_database();
    let job = target.job(
        &db,
        &["t"],
        &format!(
            "deadline: {{ safety_margin_seconds: 4 }}\n\
             catalog: {{ type: glue, database: {database}, endpoint_url: '{}' }}",
            glue.url()
        ),
    );
    glue.stall();
    db.sql("INSERT INTO t VALUES (1, 'a')");
    let started = std::time::Instant::now();
    let run = job
        .run_within(
            &["drain", "--max-duration", "10s"],
            &[],
            std::time::Duration::from_secs(60),
        )
        .expect("the run ends on its own");
    let took = started.elapsed();
    glue.restore();
    assert_eq!(run.code, 0, "{}", run.stderr);
    let summary = run.summary();
    assert_eq!(summary["status"], "drained", "{summary}");
    assert_eq!(
        summary["catalog"]["t"], "failed: SLUICE_CATALOG_UNAVAILABLE",
        "{summary}"
    );
    assert!(
        took < std::time::Duration::from_secs(12),
        "the run ended {took:?} after its start, past its 10 s deadline"
    );
    // The next run registers the table.
    let next = drain(&job);
    assert_eq!(next["catalog"]["t"], "created", "{next}");
}
