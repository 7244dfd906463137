//! Column policies and row filters (docs/privacy.md) on every engine, stream and
//! baseline: each policy kind, a hashed key through updates, key changes and deletes, rows
//! moving into and out of the filter, a policy change re-baselining its table alone — and
//! no raw value of an excluded, hashed, masked or nulled column anywhere under the
//! destination, the state or the spill directory, in any byte of any file nor in any cell
//! of any part.

use std::path::Path;

use sluice::change::{ColumnType, Value};
use sluice::config::HashOutput;
use sluice::policy::hash::Hasher;

use super::Engine;
use crate::support::{self, Job, baseline_and_changes, read_batches, render, replay};

/// The hash key's variable and value (the drains get it in their environment).
const KEY_VAR: &str = "SLUICE_TEST_POLICY_KEY";
const KEY: &str = "a test key of at least thirty-two bytes, never written";

/// A drain that must succeed, with the hash key in its environment.
fn drain(job: &Job) -> serde_json::Value {
    let run = job.run(&["drain"], &[(KEY_VAR, KEY)]);
    assert_eq!(run.code, 0, "drain failed:\n{}", run.stderr);
    run.summary()
}

/// `people`: a key, an email (hashed), an identity number (excluded), a phone (masked),
/// a birth date (nulled) and the tenant the filter keeps (7).
fn people<E: Engine>(db: &E) {
    let text = E::TEXT;
    db.create_table(
        "people",
        &format!(
            "id int PRIMARY KEY, email {text}, ssn {text}, phone {text}, born date, tenant int"
        ),
    );
    // PostgreSQL publishes a row filter only over logged columns.
    db.log_whole_rows("people");
    for i in 1..=6 {
        db.sql(&format!(
            "INSERT INTO people VALUES ({i}, '{}', '{}', '+1-555-01{i:02}', '1990-01-0{i}', {})",
            email(i),
            ssn(i),
            if i % 2 == 1 { 7 } else { 8 }
        ));
    }
}

fn email(i: u32) -> String {
    format!("user{i}.raw@example.com")
}

fn ssn(i: u32) -> String {
    format!("SSN-RAW-{i}-4242")
}

/// The distinctive raw values no file may hold.
const NEEDLES: &[&str] = &[".raw@example.com", "SSN-RAW-", "+1-555-01", "1990-01-0"];

fn policy(table: &str, filter: &str) -> String {
    format!(
        "initial: snapshot\nbaseline: {{ chunk_rows: 2 }}\npolicy:\n  hash_key: {{ env: {KEY_VAR} }}\n  tables:\n    {table}:\n      exclude: [ssn]\n      hash: [id, email]\n      mask: {{ phone: {{ keep_last: 2 }} }}\n      null: [born]\n{filter}"
    )
}

/// The source's rows the filter keeps (`tenant = 7 AND email IS NOT NULL`), with the policy applied: `id|email|phone|tenant`
/// (hashed id and email, masked phone), in hashed-id order.
fn expected<E: Engine>(db: &E, hasher: &Hasher) -> Vec<String> {
    let text = |v: Value| match v {
        Value::Text(t) => t,
        other => panic!("{other:?}"),
    };
    let mut rows: Vec<String> = db
        .sql("SELECT CONCAT(id, '|', email, '|', phone, '|', tenant) FROM people WHERE tenant = 7 AND email IS NOT NULL ORDER BY id")
        .lines()
        .filter(|l| !l.is_empty())
        .map(|line| {
            let f: Vec<&str> = line.split('|').collect();
            let id = text(hasher.hash(&ColumnType::Int32, &Value::Int(f[0].parse().unwrap())));
            let email = text(hasher.hash(&ColumnType::Utf8, &Value::Text(f[1].into())));
            let phone = format!("****{}", &f[2][f[2].len() - 2..]);
            format!("{id}|{email}|{phone}|{}", f[3])
        })
        .collect();
    rows.sort();
    rows
}

/// The job's output replayed (baseline and changes): `id|email|phone|tenant` per row,
/// sorted; every `born` is NULL and no `ssn` column exists.
fn replayed(job: &Job, table: &str) -> Vec<String> {
    let rows = baseline_and_changes(&job.out().join(table));
    assert!(
        rows.iter().all(|r| !r.contains_key("ssn")),
        "ssn is excluded"
    );
    let mut out: Vec<String> = replay(&rows, &["id"])
        .values()
        .map(|r| {
            assert_eq!(r["born"], None, "born is nulled");
            let f = |c: &str| r[c].clone().unwrap_or_else(|| "NULL".into());
            format!("{}|{}|{}|{}", f("id"), f("email"), f("phone"), f("tenant"))
        })
        .collect();
    out.sort();
    out
}

/// Every file under `dir`: none holds a needle in its bytes, and no cell of a Parquet
/// file holds one (compression could hide the bytes).
fn assert_no_raw_value(dir: &Path) {
    let mut stack = vec![dir.to_owned()];
    while let Some(path) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&path) else {
            continue;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let bytes = std::fs::read(&path).unwrap();
            for needle in NEEDLES {
                assert!(
                    !bytes.windows(needle.len()).any(|w| w == needle.as_bytes()),
                    "{} holds the raw {needle:?}",
                    path.display()
                );
            }
            if path.extension().is_some_and(|e| e == "parquet") {
                for batch in read_batches(&path) {
                    for row in render(&batch) {
                        for cell in row.values().flatten() {
                            assert!(
                                !NEEDLES.iter().any(|n| cell.contains(n)),
                                "{} has the cell {cell:?}",
                                path.display()
                            );
                        }
                    }
                }
            }
        }
    }
}

/// Every policy kind and a row filter, baseline then stream: updates in and out of the
/// filter, a hashed key changed and deleted; the replay — sluice's rule and `sluice sql`
/// through DuckDB — is the policy-applied source, and no raw value is anywhere.
pub fn every_policy_kind_and_a_row_filter_replay_the_policy_applied_source<E: Engine>() {
    let Some(db) = E::for_test("policy_kinds") else {
        return;
    };
    people(&db);
    let table = db.qualified("people");
    let spill = tempfile::tempdir().unwrap();
    let extra = format!(
        "{}output: {{ spill_dir: {} }}\n",
        policy(
            &table,
            "      filter: \"tenant = 7 AND email IS NOT NULL\"\n"
        ),
        spill.path().display()
    );
    let job = db.job(&[&table], &extra);
    // Refused before anything is read: a key excluded, and a column the table lacks.
    let yaml = std::fs::read_to_string(&job.config).unwrap();
    for (policy, needle) in [
        ("exclude: [ssn, id]", "key column id would be excluded"),
        ("exclude: [sssn]", "sssn"),
    ] {
        let edited = yaml
            .replace("exclude: [ssn]", policy)
            .replace("hash: [id, email]", "hash: [email]");
        std::fs::write(&job.config, edited).unwrap();
        let run = job.run(&["drain"], &[(KEY_VAR, KEY)]);
        assert_eq!(run.code, 1, "{}", run.stderr);
        assert_eq!(run.error_code(), "SLUICE_CONFIG_POLICY", "{}", run.stderr);
        assert!(run.stderr.contains(needle), "{}", run.stderr);
    }
    std::fs::write(&job.config, &yaml).unwrap();

    std::fs::write(&job.config, &yaml).unwrap();
    // doctor says what the policy does, and names the key by its id.
    let hasher = Hasher::new(KEY.as_bytes(), HashOutput::Hex).unwrap();
    let run = job.run(&["doctor", "--json"], &[(KEY_VAR, KEY)]);
    let doc: serde_json::Value = serde_json::from_str(&run.stdout).unwrap_or_default();
    let row = |name: &str| {
        doc["checks"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no {name} row: {}{}", run.stdout, run.stderr))
    };
    let table_row = row(&format!("table {table} policy"));
    assert_eq!(table_row["status"], "ok", "{table_row}");
    let detail = table_row["detail"].as_str().unwrap();
    assert!(
        detail.contains("excludes ssn") && detail.contains("hashes email, id"),
        "{detail}"
    );
    assert!(
        row("policy")["detail"]
            .as_str()
            .unwrap()
            .contains(hasher.key_id())
    );
    let first = drain(&job);
    assert_eq!(first["status"], "drained", "{first}");
    assert_eq!(
        replayed(&job, &table),
        expected(&db, &hasher),
        "the baseline"
    );
    assert_eq!(expected(&db, &hasher).len(), 3);

    db.sql("INSERT INTO people VALUES (7, 'user7.raw@example.com', 'SSN-RAW-7-4242', '+1-555-0107', '1990-01-07', 7)");
    db.sql("INSERT INTO people VALUES (8, 'user8.raw@example.com', 'SSN-RAW-8-4242', '+1-555-0108', '1990-01-08', 8)");
    db.sql("UPDATE people SET email = 'user1b.raw@example.com' WHERE id = 1");
    db.sql("UPDATE people SET tenant = 8 WHERE id = 3"); // out of the filter
    db.sql("UPDATE people SET tenant = 7 WHERE id = 2"); // into it
    db.sql("UPDATE people SET id = 50 WHERE id = 5"); // a hashed key changes
    db.sql("UPDATE people SET phone = '+1-555-0199' WHERE id = 50");
    db.sql("DELETE FROM people WHERE id = 1");
    db.sql("DELETE FROM people WHERE id = 4"); // outside the filter
    db.sql("UPDATE people SET email = NULL WHERE id = 7"); // out by its second term
    let second = drain(&job);
    assert_eq!(second["status"], "drained", "{second}");
    let want = expected(&db, &hasher);
    assert_eq!(replayed(&job, &table), want, "the stream");
    assert_eq!(want.len(), 2, "2 and 50, nothing else: {want:?}");
    // No row outside the filter was ever written: tenant 8 appears nowhere but in deletes.
    for row in support::read_rows(&job.out().join(&table), "cdc-") {
        if row["__op"].as_deref() != Some("delete") {
            assert_eq!(row["tenant"].as_deref(), Some("7"), "{row:?}");
        }
    }

    // The parts say what was done to each column, and name the key without it.
    let part = support::part_files(&job.out().join(&table), "cdc-")
        .into_iter()
        .next()
        .expect("a change part");
    let file = std::fs::File::open(&part).unwrap();
    let builder =
        parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file).unwrap();
    let schema = builder.schema();
    let policy_of = |c: &str| {
        schema
            .field_with_name(c)
            .unwrap()
            .metadata()
            .get("sluice.policy")
            .cloned()
    };
    assert_eq!(policy_of("id").as_deref(), Some("hash-hmac-sha256:v1"));
    assert_eq!(policy_of("email").as_deref(), Some("hash-hmac-sha256:v1"));
    assert_eq!(policy_of("phone").as_deref(), Some("mask:keep_last=2"));
    assert_eq!(policy_of("born").as_deref(), Some("null"));
    assert_eq!(policy_of("tenant"), None);
    assert!(schema.field_with_name("ssn").is_err());
    assert_eq!(
        schema.field_with_name("id").unwrap().metadata()["sluice.policy_key_id"],
        hasher.key_id()
    );
    for manifest in ["_manifest.json", "snapshot/_manifest.json"] {
        let body = std::fs::read(job.out().join(&table).join(manifest)).unwrap();
        let m: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            m["policy"]["exclude"],
            serde_json::json!(["ssn"]),
            "{manifest}"
        );
        assert_eq!(m["policy"]["key_id"], hasher.key_id(), "{manifest}");
        assert_eq!(m["policy"]["filter"], "tenant = 7 AND email IS NOT NULL");
        assert!(
            m["policy"]["fingerprint"]
                .as_str()
                .unwrap()
                .starts_with("sha256:")
        );
    }
    // The chunk plan's key bounds are sealed: its raw ids are not in the destination.
    let plans: Vec<String> = walk(&job.out().join(&table))
        .into_iter()
        .filter(|p| p.ends_with("_plan.json"))
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    assert!(!plans.is_empty());
    assert!(plans.iter().any(|p| p.contains("sealed:v1:")), "{plans:?}");

    assert_no_raw_value(&job.out());
    assert_no_raw_value(&job.dir.path().join("state"));
    assert_no_raw_value(spill.path());
    let text = std::fs::read_to_string(&job.config).unwrap();
    assert!(!text.contains(KEY));

    // `sluice sql` through DuckDB replays the same rows.
    if let Some(duck) =
        crate::support::readers::sluice_sql_replayed(&job, &table, "id", "email", "=")
    {
        let mut want: Vec<String> = want
            .iter()
            .map(|r| {
                let f: Vec<&str> = r.split('|').collect();
                format!("{}={}", f[0], f[1])
            })
            .collect();
        want.sort();
        assert_eq!(duck, want.join(","));
    }
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(path) = stack.pop() {
        for entry in std::fs::read_dir(&path).into_iter().flatten() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.push(path);
            }
        }
    }
    out
}

/// A changed policy (a column newly excluded) re-baselines its table alone: the next
/// drain asks for it, the table's replay is the new policy's, and the other table is
/// neither baselined again nor touched.
pub fn a_policy_change_rebaselines_that_table_alone<E: Engine>() {
    let Some(db) = E::for_test("policy_change") else {
        return;
    };
    people(&db);
    db.create_table("other", &format!("id int PRIMARY KEY, v {}", E::TEXT));
    db.sql("INSERT INTO other VALUES (1, 'a'), (2, 'b')");
    let table = db.qualified("people");
    let other = db.qualified("other");
    let job = db.job(&[&table, &other], &policy(&table, ""));
    let hasher = Hasher::new(KEY.as_bytes(), HashOutput::Hex).unwrap();
    assert_eq!(drain(&job)["status"], "drained");
    db.sql("INSERT INTO other VALUES (3, 'c'); UPDATE people SET email = 'user2b.raw@example.com' WHERE id = 2");
    assert_eq!(drain(&job)["status"], "drained");
    let other_snapshot = support::snapshot_dir(&job.out().join(&other));
    let other_parts = walk(&job.out().join(&other));

    // The phone is now excluded too.
    let yaml = std::fs::read_to_string(&job.config).unwrap();
    let yaml = yaml
        .replace("exclude: [ssn]", "exclude: [ssn, phone]")
        .replace("      mask: { phone: { keep_last: 2 } }\n", "");
    std::fs::write(&job.config, yaml).unwrap();
    db.sql("UPDATE people SET tenant = 9 WHERE id = 1");
    let run = job.run(&["drain"], &[(KEY_VAR, KEY)]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let summary = run.summary();
    let rebaselined = summary["rebaselined"].as_object().unwrap();
    assert_eq!(
        rebaselined.keys().collect::<Vec<_>>(),
        [&table],
        "{summary}"
    );
    assert!(
        rebaselined[&table]["reason"]
            .as_str()
            .unwrap()
            .contains("policy"),
        "{summary}"
    );
    assert_eq!(rebaselined[&table]["baseline"], "done", "{summary}");
    // The other table: same baseline, same files, nothing new.
    assert_eq!(
        support::snapshot_dir(&job.out().join(&other)),
        other_snapshot
    );
    let mut now = walk(&job.out().join(&other));
    now.retain(|p| !p.to_string_lossy().contains("_manifest") && !p.ends_with("_SUCCESS"));
    let mut before = other_parts.clone();
    before.retain(|p| !p.to_string_lossy().contains("_manifest") && !p.ends_with("_SUCCESS"));
    now.sort();
    before.sort();
    assert_eq!(now, before);
    // The table replays as the source under the new policy: no phone column.
    let rows = baseline_and_changes(&job.out().join(&table));
    let state = replay(&rows, &["id"]);
    assert_eq!(state.len(), 6);
    assert!(
        state
            .values()
            .all(|r| !r.contains_key("phone") && !r.contains_key("ssn"))
    );
    let one = hasher.hash(&ColumnType::Int32, &Value::Int(1));
    let Value::Text(one) = one else { panic!() };
    assert_eq!(
        state[&vec![Some(one)]]["tenant"].as_deref(),
        Some("9"),
        "the change in the run that asked is in the new baseline"
    );
    // A later drain keeps the new policy: nothing to re-baseline.
    db.sql("UPDATE people SET tenant = 10 WHERE id = 1");
    let later = drain(&job);
    assert!(
        later["rebaselined"]
            .as_object()
            .is_none_or(|m| m.is_empty()),
        "{later}"
    );
}
