//! A config file's relative paths are relative to the file, not to the working
//! directory: cron runs `sluice drain --config /abs/dir/sluice.yaml` from `$HOME`.

use crate::support::{Job, TestDb};

#[test]
fn a_drain_from_another_directory_finds_state_and_output_next_to_the_config() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "relpaths");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    let job = Job::postgres(&db, &["public.t"], "");
    // The same job, its paths written relative to the file.
    let text = std::fs::read_to_string(&job.config)
        .unwrap()
        .replace(&job.dir.path().join("out").display().to_string(), "out")
        .replace(
            &job.dir.path().join("state").display().to_string(),
            "./state",
        );
    assert!(
        text.contains("path: out") && text.contains("path: ./state"),
        "{text}"
    );
    std::fs::write(&job.config, text).unwrap();
    assert!(job.config.is_absolute());

    let elsewhere = tempfile::tempdir().unwrap();
    let drain = |cwd: &std::path::Path| {
        let out = job
            .command(&["drain"], &[])
            .current_dir(cwd)
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    drain(elsewhere.path());
    db.sql("INSERT INTO t VALUES (1, 'a')");
    let second = drain(elsewhere.path());
    assert_eq!(
        second["rows"], 1,
        "the second run resumed from the first's checkpoint: {second}"
    );
    assert!(
        job.dir
            .path()
            .join("state")
            .join(format!("{}.json", db.name))
            .exists(),
        "the state is next to the config"
    );
    assert_eq!(
        job.rows("public.t").len(),
        1,
        "the output is next to the config"
    );
    let strays: Vec<_> = std::fs::read_dir(elsewhere.path()).unwrap().collect();
    assert!(
        strays.is_empty(),
        "nothing written to the working directory: {strays:?}"
    );
}
