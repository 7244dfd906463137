//! A compaction killed at every fault point, then the next one; readers and a drain
//! while a compaction is paused between its steps; two compactions of a table at once; a
//! compaction that lost its lease. After each: the folder's changes are the changes
//! before (copies byte-identical), the live parts hold each once, the replay equals the
//! source — and after the next compaction no copy and no unnamed compacted part is left.
//! Objects: database `t_compact_crash_*`.

use std::time::{Duration, Instant};

use super::postgres::source_text;
use super::{
    assert_reads, change_files, changes, clone_job, compact, live_files, replayed, rows_of,
};
use crate::support::{Job, TestDb, readers};

/// 12 one-row parts of about 2.8 KB: with a 12,000-byte target, three steps of four.
fn twelve_runs(test: &str, lease_ttl_seconds: u64) -> (TestDb, Job) {
    let admin = std::env::var("SLUICE_TEST_PG_URL").unwrap();
    let db = TestDb::new(&admin, test);
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    let job = Job::postgres(
        &db,
        &["public.t"],
        &format!(
            "compaction: {{ min_age_seconds: 0, target_bytes: 12000, lease_ttl_seconds: {lease_ttl_seconds} }}"
        ),
    );
    job.drain();
    super::postgres::small_runs(&job, &db, 1, 12);
    (db, job)
}

/// Compacts `job` until it reports no table `held` (a killed compaction's lease on this
/// host is taken over at once; another host's would expire).
fn compact_when_free(job: &Job) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let summary = compact(job, &[]);
        if summary["tables"]["public.t"]["status"] != "held" {
            return summary;
        }
        assert!(
            Instant::now() < deadline,
            "the compaction lease was never freed"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Every compacted part in the folder is live, and the live parts are the folder's
/// change files: nothing left over.
fn assert_tidy(job: &Job) {
    let dir = job.out().join("public.t");
    let files = change_files(&dir);
    let live: Vec<String> = live_files(&job.out(), "public.t").into_iter().collect();
    assert_eq!(files, live, "the folder holds exactly the live parts");
}

#[test]
fn a_compaction_killed_at_every_fault_point_is_finished_by_the_next() {
    let _ = pg_or_skip!();
    let (db, job) = twelve_runs("compact_crash", 30);
    let dir = job.out().join("public.t");
    let expected = changes(&rows_of(&dir, &change_files(&dir)));
    let source = source_text(&db);
    for spec in [
        "mid_upload@1",
        "compact_part_durable@1",
        "mid_upload@2",
        "compact_part_durable@2",
        "compact_manifest_written@1",
        "compact_manifest_written@3",
        "compact_part_removed@1",
        "compact_part_removed@6",
        "compact_part_removed@12",
        "compact_step_done@1",
        "compact_step_done@3",
    ] {
        let crashed = clone_job(&job);
        let run = crashed.run(&["compact"], &[("SLUICE_FAULT", spec)]);
        assert_eq!(run.code, -1, "{spec}: the fault aborts\n{}", run.stderr);
        assert!(
            run.stderr.contains("fault injected"),
            "{spec}: {}",
            run.stderr
        );
        let rows = assert_reads(&crashed.out(), "public.t", &expected);
        assert_eq!(
            replayed(&rows),
            source,
            "{spec}: the folder replays to the source"
        );

        let next = compact_when_free(&crashed);
        let table = &next["tables"]["public.t"];
        assert_eq!(table["status"], "compacted", "{spec}: {next}");
        let rows = assert_reads(&crashed.out(), "public.t", &expected);
        assert_eq!(rows.len(), expected.len(), "{spec}: no copy left");
        assert_eq!(replayed(&rows), source, "{spec}");
        assert_tidy(&crashed);
        let files = change_files(&crashed.out().join("public.t"));
        assert!(files.len() <= 3, "{spec}: {files:?}");
    }
}

#[test]
fn readers_and_a_drain_beside_a_paused_compaction_see_every_change() {
    let _ = pg_or_skip!();
    let (db, job) = twelve_runs("compact_pause", 30);
    let dir = job.out().join("public.t");
    let expected = changes(&rows_of(&dir, &change_files(&dir)));
    let before = source_text(&db);
    // Paused with step 1's part durable and unnamed, then with its manifest written and
    // nothing removed: a reader listing the folder, one following the manifests, and
    // `sluice sql` all see the source's state.
    for pause in [
        "compact_part_durable:pause=3000",
        "compact_manifest_written:pause=3000",
    ] {
        let probe = clone_job(&job);
        let run = probe.run_interrupted(
            &["compact"],
            &[("SLUICE_FAULT", pause)],
            "fault injected: pausing",
            || {
                let rows = assert_reads(&probe.out(), "public.t", &expected);
                assert_eq!(replayed(&rows), before, "{pause}");
                if let Some(text) = readers::sluice_sql_replayed(&probe, "public.t", "id", "v", "=")
                {
                    assert_eq!(text, before, "{pause}: sluice sql mid-compaction");
                }
            },
        );
        assert_eq!(run.code, 0, "{pause}: {}", run.stderr);
        assert_reads(&probe.out(), "public.t", &expected);
        assert_tidy(&probe);
    }
    // A drain beside the compaction is never blocked and loses nothing.
    let mut drained = None;
    let run = job.run_interrupted(
        &["compact"],
        &[("SLUICE_FAULT", "compact_manifest_written:pause=4000")],
        "fault injected: pausing",
        || {
            db.sql("INSERT INTO t VALUES (500, 'beside'); UPDATE t SET v = 'beside' WHERE id = 2");
            let started = Instant::now();
            let summary = job.drain();
            assert_eq!(summary["status"], "drained", "{summary}");
            assert_eq!(summary["rows"], 2, "{summary}");
            drained = Some(started.elapsed());
        },
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let took = drained.expect("the drain ran");
    assert!(
        took < Duration::from_secs(3),
        "the drain waited for the compaction: {took:?}"
    );
    let mut expected = expected;
    let now = changes(&rows_of(&dir, &change_files(&dir)));
    assert_eq!(
        now.len(),
        expected.len() + 2,
        "the drain's changes are there"
    );
    expected = now;
    let rows = assert_reads(&job.out(), "public.t", &expected);
    assert_eq!(replayed(&rows), source_text(&db));
    assert!(
        change_files(&dir).iter().any(|f| f.starts_with("cdc-")),
        "the drain's new part is kept"
    );
    assert_tidy(&job);
}

#[test]
fn two_compactions_at_once_one_wins_and_one_that_lost_its_lease_removes_nothing() {
    let _ = pg_or_skip!();
    let (db, job) = twelve_runs("compact_twice", 2);
    let dir = job.out().join("public.t");
    let expected = changes(&rows_of(&dir, &change_files(&dir)));
    let source = source_text(&db);

    // Two at once: the second finds the table's lease held and skips it.
    let first = clone_job(&job);
    let run = first.run_interrupted(
        &["compact"],
        &[("SLUICE_FAULT", "compact_part_durable:pause=1500")],
        "fault injected: pausing",
        || {
            let second = compact(&first, &[]);
            let table = &second["tables"]["public.t"];
            assert_eq!(table["status"], "held", "{second}");
            assert!(
                table["holder"].as_str().unwrap().contains("/compact/"),
                "{second}"
            );
        },
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.summary()["tables"]["public.t"]["status"], "compacted");
    assert_reads(&first.out(), "public.t", &expected);
    assert_tidy(&first);

    // Paused past its 2 s lease: another compaction takes over and finishes; the first,
    // fenced, removes nothing.
    let run = job.run_interrupted(
        &["compact"],
        &[("SLUICE_FAULT", "compact_part_durable:pause=5000")],
        "fault injected: pausing",
        || {
            std::thread::sleep(Duration::from_millis(2300));
            let other = compact(&job, &[]);
            assert_eq!(
                other["tables"]["public.t"]["status"], "compacted",
                "{other}"
            );
        },
    );
    assert_eq!(
        run.code, 3,
        "fenced is transient: {}\n{}",
        run.stdout, run.stderr
    );
    let table = &run.summary()["tables"]["public.t"];
    assert_eq!(table["error"]["code"], "SLUICE_STATE_FENCED", "{table}");
    let rows = assert_reads(&job.out(), "public.t", &expected);
    assert_eq!(replayed(&rows), source);
    // Whatever the fenced one uploaded is removed by the next compaction.
    compact_when_free(&job);
    assert_reads(&job.out(), "public.t", &expected);
    assert_tidy(&job);
}

/// What a compaction fenced just before its manifest leaves — a manifest naming a part
/// the compaction that took over removed, its inputs replaced by that one — is withdrawn
/// by the next compaction; a manifest naming a gone part whose rows are held nowhere else
/// is refused as corrupt.
#[test]
fn a_void_manifest_is_withdrawn_and_a_gone_compacted_part_is_refused() {
    let _ = pg_or_skip!();
    let (db, job) = twelve_runs("compact_void", 30);
    let dir = job.out().join("public.t");
    let expected = changes(&rows_of(&dir, &change_files(&dir)));
    compact(&job, &[]);
    let manifests = dir.join("_compactions");
    let first = std::fs::read_dir(&manifests)
        .unwrap()
        .map(|e| e.unwrap().path())
        .min()
        .unwrap();
    let mut zombie: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&first).unwrap()).unwrap();
    zombie["compaction_id"] = "20200101T000000000Z-000000".into();
    zombie["parts"][0]["key"] =
        "public.t/compacted-20200101T000000000Z-000000-000001.parquet".into();
    let void = manifests.join("20200101T000000000Z-000000-0001.json");
    std::fs::write(&void, zombie.to_string()).unwrap();
    let summary = compact(&job, &[]);
    assert_ne!(
        summary["tables"]["public.t"]["status"], "failed",
        "{summary}"
    );
    assert!(!void.exists(), "the void manifest is withdrawn");
    let rows = assert_reads(&job.out(), "public.t", &expected);
    assert_eq!(replayed(&rows), source_text(&db));
    assert_tidy(&job);

    // A compacted part gone from under its manifest, its inputs removed: corrupt.
    let part = change_files(&dir).into_iter().next().unwrap();
    std::fs::remove_file(dir.join(&part)).unwrap();
    let run = job.run(&["compact"], &[]);
    assert_eq!(run.code, 5, "{}\n{}", run.stdout, run.stderr);
    let table = &run.summary()["tables"]["public.t"];
    assert_eq!(
        table["error"]["code"], "SLUICE_COMPACTION_PART_CORRUPT",
        "{table}"
    );
    assert!(
        table["error"]["message"].as_str().unwrap().contains(&part),
        "{table}"
    );
}
