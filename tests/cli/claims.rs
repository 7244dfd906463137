//! Resource claims: two jobs pointed at one replication slot or one MySQL replica
//! `server_id` (sharing one state store, local or DynamoDB) — the second is refused at
//! start, naming the first, and `doctor` says so too.

use crate::support::{Job, TestDb, TestMysqlDb, aws::AwsTarget};

#[test]
fn a_second_job_on_the_same_slot_is_refused() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "claims");
    db.sql("CREATE TABLE t (id int PRIMARY KEY)");
    let first = Job::postgres(&db, &["public.t"], "");
    first.drain();
    // Same slot and state directory, another job name.
    let text = std::fs::read_to_string(&first.config).unwrap().replacen(
        &format!("job: {}", db.name),
        "job: intruder",
        1,
    );
    let second = Job::postgres(&db, &["public.t"], "");
    let state = first.dir.path().join("state");
    let text = text.replace(
        &first.dir.path().join("out").display().to_string(),
        &second.out().display().to_string(),
    );
    assert!(text.contains(&state.display().to_string()));
    std::fs::write(&second.config, text).unwrap();

    let run = second.run(&["drain"], &[]);
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(run.error_code(), "SLUICE_CONFIG_RESOURCE_CLAIMED");
    let message = run.summary()["error"]["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        message.contains(&format!("claimed by job \"{}\"", db.name)),
        "{message}"
    );
    assert!(
        !second.out().join("public.t").exists(),
        "the refused job wrote output"
    );

    let doctor = second.run(&["doctor", "--json"], &[]);
    assert_eq!(doctor.code, 5);
    let doc = doctor.summary();
    let claim = doc["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"].as_str().unwrap().starts_with("claim pg:"))
        .unwrap();
    assert_eq!(claim["code"], "SLUICE_CONFIG_RESOURCE_CLAIMED", "{claim}");
    // The owner keeps draining.
    db.sql("INSERT INTO t VALUES (1)");
    assert_eq!(first.drain()["rows"], 1);
}

/// A MySQL job on `db` with replica `server_id`, writing to `out`, its state in `state`
/// (a YAML `state:` value).
fn mysql_job(db: &TestMysqlDb, job: &str, server_id: u32, state: &str) -> Job {
    let dir = tempfile::tempdir().unwrap();
    let yaml = format!(
        "job: {job}\nsource:\n  url_env: SLUICE_TEST_SOURCE_URL\n  tables: [orders]\n  mysql: {{ server_id: {server_id} }}\n\
         destination: {{ type: local, path: {out} }}\nstate: {state}\n",
        out = dir.path().join("out").display(),
    );
    let config = dir.path().join("sluice.yaml");
    std::fs::write(&config, yaml).unwrap();
    Job {
        dir,
        config,
        url_env: ("SLUICE_TEST_SOURCE_URL".into(), db.url.clone()),
    }
}

/// Two jobs with one replica server_id on one server: the second is refused before it
/// opens a binlog dump (which would make the server drop the first's), naming the
/// first; doctor says so; a job with its own server_id is not affected.
fn second_mysql_job_is_refused(db: &TestMysqlDb, state: &str) {
    db.sql("CREATE TABLE orders (id bigint PRIMARY KEY)");
    // Unique per process: the claims are per state store, the server is shared.
    let server_id = 3_000_000 + std::process::id();
    let first = mysql_job(db, &format!("{}_a", db.name), server_id, state);
    first.drain();
    let second = mysql_job(db, &format!("{}_b", db.name), server_id, state);
    let run = second.run(&["drain"], &[]);
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(run.error_code(), "SLUICE_CONFIG_RESOURCE_CLAIMED");
    let error = &run.summary()["error"];
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains(&format!(
            "/server_id/{server_id} is claimed by job \"{}_a\"",
            db.name
        )),
        "{message}"
    );
    assert!(
        error["hint"]
            .as_str()
            .unwrap()
            .contains("its own source.mysql.server_id"),
        "{error}"
    );
    assert!(
        !second.out().join("orders").exists(),
        "the refused job wrote output"
    );

    let doctor = second.run(&["doctor", "--json"], &[]);
    assert_eq!(doctor.code, 5);
    let doc = doctor.summary();
    // Keyed on the server's own identity (server_uuid, or MariaDB's hostname, port and
    // server_id), not the host as written.
    let suffix = format!("/server_id/{server_id}");
    let claim = doc["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| {
            let name = c["name"].as_str().unwrap();
            name.starts_with("claim mysql:")
                && name.ends_with(&suffix)
                && !name.contains("127.0.0.1")
        })
        .unwrap_or_else(|| panic!("no claim …{suffix} in {doc}"));
    assert_eq!(claim["code"], "SLUICE_CONFIG_RESOURCE_CLAIMED", "{claim}");

    let own = mysql_job(db, &format!("{}_c", db.name), server_id + 1, state);
    own.drain();
    db.sql("INSERT INTO orders VALUES (1)");
    assert_eq!(first.drain()["rows"], 1);
}

#[test]
fn a_second_mysql_job_with_the_same_server_id_is_refused() {
    let admin = mysql_or_skip!();
    let db = TestMysqlDb::new(&admin, "claims_my");
    let state = tempfile::tempdir().unwrap();
    second_mysql_job_is_refused(
        &db,
        &format!("{{ type: local, path: {} }}", state.path().display()),
    );
}

#[test]
fn the_server_id_claim_holds_across_jobs_sharing_a_dynamodb_table() {
    let moto = aws_or_skip!();
    let admin = mysql_or_skip!();
    let db = TestMysqlDb::new(&admin, "claims_ddb");
    let target = AwsTarget::new(&moto);
    second_mysql_job_is_refused(
        &db,
        &format!(
            "{{ type: dynamodb, table: {}, endpoint_url: '{moto}' }}",
            target.table
        ),
    );
}

/// A job without a checkpoint whose slot already exists (another state store's job, or a
/// slot created by hand) is refused with `SLUICE_SOURCE_SLOT_NOT_OURS`; the operator's
/// `source.postgres.adopt_slot: true` lets it start from the slot.
#[test]
fn a_slot_this_job_did_not_create_is_taken_only_with_adopt_slot() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "slot_not_ours");
    db.sql("CREATE TABLE t (id int PRIMARY KEY)");
    let first = Job::postgres(&db, &["public.t"], "");
    first.drain();
    // The same job with another state store: no checkpoint, no record of the slot.
    let elsewhere = Job::postgres(&db, &["public.t"], "");
    let refused = elsewhere.run(&["drain"], &[]);
    assert_eq!(refused.code, 5, "{}\n{}", refused.stdout, refused.stderr);
    assert_eq!(refused.error_code(), "SLUICE_SOURCE_SLOT_NOT_OURS");
    let hint = refused.summary()["error"]["hint"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        hint.contains("adopt_slot: true") && hint.contains("source.postgres.slot"),
        "{hint}"
    );
    assert!(!elsewhere.out().join("public.t").exists());

    let adopting = Job::postgres(&db, &["public.t"], "");
    let text = std::fs::read_to_string(&adopting.config)
        .unwrap()
        .replace("publication: p_", "adopt_slot: true, publication: p_");
    std::fs::write(&adopting.config, text).unwrap();
    db.sql("INSERT INTO t VALUES (1)");
    let adopted = adopting.run(&["drain"], &[]);
    assert_eq!(adopted.code, 0, "{}", adopted.stderr);
    assert_eq!(adopted.summary()["rows"], 1);
}

/// The intent is recorded before the slot is created: a first run that dies after
/// creating it, before any checkpoint, resumes from it on the next run.
#[test]
fn a_first_run_that_died_after_creating_the_slot_resumes() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "slot_crashed_first");
    db.sql("CREATE TABLE t (id int PRIMARY KEY)");
    let job = Job::postgres(&db, &["public.t"], "lease: { ttl_seconds: 2 }");
    let crashed = job.run(&["drain"], &[("SLUICE_FAULT", "before_checkpoint")]);
    assert_ne!(crashed.code, 0, "{}", crashed.stderr);
    assert_eq!(
        db.sql(&format!(
            "SELECT count(*) FROM pg_replication_slots WHERE slot_name = 's_{}'",
            db.name
        )),
        "1",
        "{}",
        crashed.stderr
    );
    db.sql("INSERT INTO t VALUES (1)");
    let resumed = job.drain_when_free();
    assert_eq!(resumed["status"], "drained", "{resumed}");
    assert_eq!(resumed["rows"], 1, "{resumed}");
}

/// A second job's config in `first`'s state directory, naming the same slot through
/// `url` (another spelling of the same server).
fn same_slot_other_job(first: &Job, db: &TestDb, url: &str) -> Job {
    let second = Job::postgres(db, &["public.t"], "");
    let text = std::fs::read_to_string(&first.config)
        .unwrap()
        .replacen(&format!("job: {}", db.name), "job: intruder", 1)
        .replace(
            &first.dir.path().join("out").display().to_string(),
            &second.out().display().to_string(),
        );
    std::fs::write(&second.config, text).unwrap();
    Job {
        url_env: (second.url_env.0.clone(), url.to_owned()),
        ..second
    }
}

/// Claims are keyed on the server's identity, not the host as written: a second job
/// naming the slot through `localhost` where the first used `127.0.0.1` is refused.
#[test]
fn a_second_job_naming_the_slot_through_another_host_spelling_is_refused() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "claims_host");
    db.sql("CREATE TABLE t (id int PRIMARY KEY)");
    let first = Job::postgres(&db, &["public.t"], "");
    first.drain();
    let url = &first.url_env.1;
    let other = if url.contains("127.0.0.1") {
        url.replace("127.0.0.1", "localhost")
    } else {
        url.replace("localhost", "127.0.0.1")
    };
    assert_ne!(
        &other, url,
        "the test URL names neither localhost nor 127.0.0.1"
    );
    let second = same_slot_other_job(&first, &db, &other);
    let run = second.run(&["drain"], &[]);
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(run.error_code(), "SLUICE_CONFIG_RESOURCE_CLAIMED");
    assert!(!second.out().join("public.t").exists());
}

/// A claim written by an earlier version (host-based name) still counts: its own job keeps
/// running, another job is refused.
#[test]
fn a_host_based_claim_of_an_earlier_version_is_still_honoured() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "claims_legacy");
    db.sql("CREATE TABLE t (id int PRIMARY KEY)");
    let first = Job::postgres(&db, &["public.t"], "");
    first.drain();
    // Rewrite the store's claims as an earlier version wrote them.
    let file = first.dir.path().join("state/claims/claims.json");
    let mut doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    let legacy = format!(
        "{}/slot/s_{}",
        sluice::claims::pg_server(&first.url_env.1).unwrap(),
        db.name
    );
    let claims = doc["claims"].as_object_mut().unwrap();
    let current: Vec<String> = claims
        .keys()
        .filter(|k| k.ends_with(&format!("/slot/s_{}", db.name)))
        .cloned()
        .collect();
    assert_eq!(current.len(), 1, "{claims:?}");
    let mut claim = claims.remove(&current[0]).unwrap();
    claim["resource"] = legacy.clone().into();
    claims.insert(legacy, claim);
    std::fs::write(&file, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();

    let second = same_slot_other_job(&first, &db, &first.url_env.1.clone());
    let run = second.run(&["drain"], &[]);
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(run.error_code(), "SLUICE_CONFIG_RESOURCE_CLAIMED");
    db.sql("INSERT INTO t VALUES (1)");
    assert_eq!(first.drain()["rows"], 1);
}

/// MySQL/MariaDB claims are keyed on the server's identity too: a second job with the
/// same replica server_id through `localhost` instead of `127.0.0.1` is refused.
#[test]
fn a_second_mysql_job_through_another_host_spelling_is_refused() {
    let admin = mysql_or_skip!();
    let db = TestMysqlDb::new(&admin, "claims_my_host");
    db.sql("CREATE TABLE orders (id bigint PRIMARY KEY)");
    let state_dir = tempfile::tempdir().unwrap();
    let state = format!("{{ type: local, path: {} }}", state_dir.path().display());
    let server_id = 4_000_000 + std::process::id();
    let first = mysql_job(&db, &format!("{}_a", db.name), server_id, &state);
    first.drain();
    let second = mysql_job(&db, &format!("{}_b", db.name), server_id, &state);
    let other = second.url_env.1.replace("127.0.0.1", "localhost");
    assert_ne!(
        other, second.url_env.1,
        "the test URL does not name 127.0.0.1"
    );
    let second = Job {
        url_env: (second.url_env.0.clone(), other),
        ..second
    };
    let run = second.run(&["drain"], &[]);
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(run.error_code(), "SLUICE_CONFIG_RESOURCE_CLAIMED");
    assert!(!second.out().join("orders").exists());
}
