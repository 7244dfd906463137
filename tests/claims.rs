//! Resource claims: two jobs pointed at one replication slot (sharing one state store)
//! — the second is refused at start, naming the first, and `doctor` says so too.

mod support;

use support::{Job, TestDb};

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
