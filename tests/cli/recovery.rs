//! The recovery commands as an operator runs them (docs/operations.md, Recovery):
//! `state clear`, `lease release`, `claims list | release`, on the local store and on
//! DynamoDB, each refusing when it is unsafe and printing what it did.

use std::path::Path;
use std::time::Duration;

use crate::support::aws::{AwsTarget, runtime};
use crate::support::{Job, TestDb, read_rows, service_url};
use sluice::state::holder;
use sluice::state::{LeaseOutcome, StateStore};

/// A store of the kind the job's config names, opened as the binary opens it.
fn store_of(job: &Job) -> Box<dyn StateStore> {
    runtime().block_on(async {
        let config = sluice::job::config::load(Some(&job.config)).unwrap();
        sluice::state::open(&config).await.unwrap()
    })
}

/// The owner string of a process that has exited (on this host).
fn dead_owner() -> String {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    format!(
        "20261202T000000000Z-dead00/{}/pid-{pid}",
        holder::this_host()
    )
}

/// Makes `owner` the holder of `job`'s lease for a minute.
fn hold(store: &dyn StateStore, job: &str, owner: &str) {
    runtime().block_on(async {
        if let Some(current) = store.show(job).await.unwrap()["lease_owner"].as_str() {
            store.break_lease(job, current).await.unwrap();
        }
        match store
            .acquire_lease(job, owner, Duration::from_secs(60))
            .await
            .unwrap()
        {
            LeaseOutcome::Acquired(_) => {}
            held => panic!("{held:?}"),
        }
    });
}

fn lease_owner(store: &dyn StateStore, job: &str) -> Option<String> {
    runtime().block_on(async {
        store.show(job).await.unwrap()["lease_owner"]
            .as_str()
            .map(str::to_owned)
    })
}

/// A job whose source is never contacted (the lease and claim commands do not).
fn offline_job(state: &str, name: &str) -> Job {
    let dir = tempfile::tempdir().unwrap();
    let state = state.replace("{dir}", &dir.path().display().to_string());
    let yaml = format!(
        "job: {name}\nsource:\n  url_env: SLUICE_TEST_SOURCE_URL\n  tables: [public.t]\n  postgres: {{ slot: s_{name}, publication: p_{name} }}\n\
         destination: {{ type: local, path: {out} }}\nstate: {state}\n",
        out = dir.path().join("out").display(),
    );
    let config = dir.path().join("sluice.yaml");
    std::fs::write(&config, yaml).unwrap();
    Job {
        dir,
        config,
        url_env: (
            "SLUICE_TEST_SOURCE_URL".into(),
            "postgres://nobody@127.0.0.1:9/nothing".into(),
        ),
    }
}

fn dynamodb_state(target: &AwsTarget) -> String {
    format!(
        "{{ type: dynamodb, table: {}, endpoint_url: '{}' }}",
        target.table, target.moto
    )
}

fn lease_release_cases(job: &Job, name: &str) {
    let store = store_of(job);
    let run = job.run(&["lease", "release"], &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.summary()["status"], "free");

    // A live holder (this test process) is not taken.
    let live = holder::owner("20261202T000000000Z-live00", None);
    hold(store.as_ref(), name, &live);
    let run = job.run(&["lease", "release"], &[]);
    assert_eq!(run.code, 5, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(run.error_code(), "SLUICE_RECOVERY_REFUSED");
    let message = run.summary()["error"]["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        message.contains(&live) && message.contains("from now"),
        "{message}"
    );
    assert_eq!(
        lease_owner(store.as_ref(), name).as_deref(),
        Some(live.as_str())
    );

    // … unless forced, with a warning.
    let run = job.run(&["lease", "release", "--force"], &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let out = run.summary();
    assert_eq!(out["status"], "released");
    assert_eq!(out["forced"], true);
    assert_eq!(out["holder"], live.as_str());
    assert!(run.stderr.contains("not provably gone"), "{}", run.stderr);
    assert_eq!(lease_owner(store.as_ref(), name), None);

    // A holder on another host is not provably gone either.
    hold(
        store.as_ref(),
        name,
        "20261202T000000000Z-far000/another-host/pid-1",
    );
    let run = job.run(&["lease", "release"], &[]);
    assert_eq!(run.code, 5, "{}", run.stderr);
    assert!(
        run.summary()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("another host")
    );

    // A dead process on this host is.
    let dead = dead_owner();
    hold(store.as_ref(), name, &dead);
    let doctor = job.run(&["doctor", "--json"], &[]);
    let checks = doctor.summary()["checks"].as_array().unwrap().clone();
    let lease = checks.iter().find(|c| c["name"] == "lease").unwrap();
    assert!(
        lease["detail"]
            .as_str()
            .unwrap()
            .contains("held by a dead process")
            || lease["detail"]
                .as_str()
                .unwrap()
                .contains("a dead process on this host"),
        "{lease}"
    );
    let run = job.run(&["lease", "release"], &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let out = run.summary();
    assert_eq!(out["status"], "released");
    assert_eq!(out["forced"], false);
    assert!(
        out["reason"].as_str().unwrap().contains("dead process"),
        "{out}"
    );
    assert_eq!(lease_owner(store.as_ref(), name), None);
}

#[test]
fn lease_release_local() {
    let job = offline_job("{ type: local, path: {dir}/state }", "lease_local");
    lease_release_cases(&job, "lease_local");
}

#[test]
fn lease_release_dynamodb() {
    let Some(moto) = service_url("SLUICE_TEST_AWS_ENDPOINT") else {
        return;
    };
    let target = AwsTarget::new(&moto);
    let job = offline_job(&dynamodb_state(&target), "lease_ddb");
    lease_release_cases(&job, "lease_ddb");
}

fn claims_cases(job: &Job, name: &str) {
    let store = store_of(job);
    let ours = format!("pg:127.0.0.1:9/nothing/slot/s_{name}");
    let theirs = "pg:db.example.com:5432/typo/slot/s_other".to_owned();
    runtime().block_on(async {
        store.claim(&ours, name).await.unwrap();
        store.claim(&theirs, "other-job").await.unwrap();
    });
    let run = job.run(&["claims", "list"], &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let listed = run.summary()["claims"].as_array().unwrap().clone();
    assert!(
        listed
            .iter()
            .any(|c| c["resource"] == ours.as_str() && c["job"] == name),
        "{listed:?}"
    );
    assert!(
        listed
            .iter()
            .any(|c| c["resource"] == theirs.as_str() && c["job"] == "other-job")
    );

    // Another job's claim: refused, named, unless forced.
    let run = job.run(&["claims", "release", &theirs], &[]);
    assert_eq!(run.code, 5, "{}", run.stderr);
    assert_eq!(run.error_code(), "SLUICE_RECOVERY_REFUSED");
    assert!(
        run.summary()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("other-job")
    );
    let run = job.run(&["claims", "release", &theirs, "--force"], &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.summary()["forced"], true);
    assert!(run.stderr.contains("another job's claim"), "{}", run.stderr);

    // Our own: released; a second release finds nothing and says so.
    let run = job.run(&["claims", "release", &ours], &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.summary()["status"], "released");
    assert_eq!(run.summary()["forced"], false);
    let run = job.run(&["claims", "release", &ours], &[]);
    assert_eq!(run.code, 5, "{}", run.stderr);
    let left = runtime().block_on(store.list_claims()).unwrap();
    assert!(
        !left
            .iter()
            .any(|c| c.resource == ours || c.resource == theirs),
        "{left:?}"
    );
}

#[test]
fn claims_list_and_release_local() {
    let job = offline_job("{ type: local, path: {dir}/state }", "claims_local");
    claims_cases(&job, "claims_local");
}

#[test]
fn claims_list_and_release_dynamodb() {
    let Some(moto) = service_url("SLUICE_TEST_AWS_ENDPOINT") else {
        return;
    };
    let target = AwsTarget::new(&moto);
    let job = offline_job(&dynamodb_state(&target), "claims_ddb");
    claims_cases(&job, "claims_ddb");
}

/// The sequence: a baseline of `old` rows; the documented recovery (clear the
/// state, drop the slot); every row updated to `new`; the next drain re-baselines. The
/// clear refuses while a live run holds the lease and while the old `snapshot/` output
/// is in place; after both are dealt with, the new baseline holds only `new` rows.
#[test]
fn state_clear_refuses_until_safe_then_a_rebaseline_reads_the_source_as_it_is() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "stateclear");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text); INSERT INTO t SELECT g, 'old' FROM generate_series(1, 20) g");
    let job = Job::postgres(&db, &["public.t"], "initial: snapshot");
    job.drain();
    let store = store_of(&job);

    let live = holder::owner("20261202T000000000Z-live00", None);
    hold(store.as_ref(), &db.name, &live);
    let run = job.run(&["state", "clear"], &[]);
    assert_eq!(run.code, 5, "{}\n{}", run.stdout, run.stderr);
    // The snapshot output is checked first: nothing is touched while it is in place.
    assert_eq!(run.error_code(), "SLUICE_DESTINATION_EXISTS");
    let hint = run.summary()["error"]["hint"].as_str().unwrap().to_owned();
    assert!(hint.contains("public.t/_superseded/"), "{hint}");
    let snapshot = job.out().join("public.t/snapshot");
    let aside = job.out().join("public.t/_superseded/test/snapshot");
    std::fs::create_dir_all(aside.parent().unwrap()).unwrap();
    std::fs::rename(&snapshot, &aside).unwrap();

    let run = job.run(&["state", "clear"], &[]);
    assert_eq!(run.code, 5, "{}", run.stderr);
    assert_eq!(run.error_code(), "SLUICE_RECOVERY_REFUSED");
    assert!(
        run.summary()["error"]["message"]
            .as_str()
            .unwrap()
            .contains(&live)
    );
    let shown = runtime().block_on(store.show(&db.name)).unwrap();
    assert!(!shown["checkpoint"].is_null(), "nothing cleared: {shown}");

    hold(store.as_ref(), &db.name, &dead_owner());
    let run = job.run(&["state", "clear"], &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let out = run.summary();
    assert_eq!(out["status"], "cleared");
    assert!(!out["cleared"]["checkpoint"].is_null(), "{out}");
    assert_eq!(out["cleared"]["snapshots"], serde_json::json!(["public.t"]));
    assert!(
        out["lease_taken_from"]["reason"]
            .as_str()
            .unwrap()
            .contains("dead process")
    );
    let next = out["next"]["source"].as_str().unwrap();
    let slot = format!("s_{}", db.name);
    assert!(
        next.contains(&format!("pg_drop_replication_slot('{slot}')")),
        "{next}"
    );
    let shown = runtime().block_on(store.show(&db.name)).unwrap();
    assert!(
        shown["checkpoint"].is_null() && shown["lease_owner"].is_null(),
        "{shown}"
    );
    assert_eq!(shown["snapshots"], serde_json::json!({}));

    db.sql("UPDATE t SET v = 'new'");
    db.sql(&format!("SELECT pg_drop_replication_slot('{slot}')"));
    job.drain();
    let rows = read_rows(
        &crate::support::snapshot_dir(&job.out().join("public.t")),
        "part-",
    );
    assert_eq!(rows.len(), 20);
    assert!(
        rows.iter().all(|r| r["v"].as_deref() == Some("new")),
        "{rows:?}"
    );
    assert!(Path::new(&aside).exists(), "the old baseline stays aside");
}

/// `state clear` on S3 + DynamoDB: refuses while `snapshot/` objects exist, clears once
/// they are gone.
#[test]
fn state_clear_on_s3_and_dynamodb() {
    let admin = pg_or_skip!();
    let Some(moto) = service_url("SLUICE_TEST_AWS_ENDPOINT") else {
        return;
    };
    let db = TestDb::new(&admin, "stateclear_aws");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text); INSERT INTO t VALUES (1, 'a')");
    let target = AwsTarget::new(&moto);
    let job = target.job(&db, &["public.t"], "initial: snapshot");
    job.drain();
    let run = job.run(&["state", "clear"], &[]);
    assert_eq!(run.code, 5, "{}", run.stderr);
    assert_eq!(run.error_code(), "SLUICE_DESTINATION_EXISTS");
    runtime().block_on(async {
        let sdk = crate::support::aws::sdk(&moto).await;
        let s3 = crate::support::aws::s3_client(&sdk);
        for key in crate::support::aws::list_keys(&sdk, &target.bucket).await {
            if key.contains("/snapshot/") {
                s3.delete_object()
                    .bucket(&target.bucket)
                    .key(key)
                    .send()
                    .await
                    .unwrap();
            }
        }
    });
    let run = job.run(&["state", "clear"], &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let out = run.summary();
    assert_eq!(
        out["cleared"]["snapshots"],
        serde_json::json!(["public.t"]),
        "{out}"
    );
    assert!(!out["cleared"]["checkpoint"].is_null());
    let shown = runtime().block_on(store_of(&job).show(&db.name)).unwrap();
    assert!(shown["checkpoint"].is_null(), "{shown}");
}
