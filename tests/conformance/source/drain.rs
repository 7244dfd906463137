//! Drain cases: changes arrive in commit order with their positions, resume where the
//! last run stopped, and whatever cannot be captured exactly is refused loudly.

use super::{Engine, OldImage};
use crate::support::{self, ops, replay};

/// `orders (id, note, amount)`, the table of most cases.
fn orders<E: Engine>(db: &E) {
    db.create_table(
        "orders",
        &format!(
            "id bigint PRIMARY KEY, note {}, amount numeric(12,2)",
            E::TEXT
        ),
    );
}

pub fn insert_update_delete_are_captured_in_commit_order<E: Engine>() {
    let Some(db) = E::for_test("iud") else { return };
    orders(&db);
    let table = db.qualified("orders");
    let job = db.job(&[&table], "");
    let first = job.drain();
    assert_eq!(first["status"], "drained");
    assert_eq!(first["rows"], 0);
    db.sql("INSERT INTO orders VALUES (1, 'a', 10.50), (2, 'b', 20.00)");
    db.sql("UPDATE orders SET note = 'a2', amount = 11.25 WHERE id = 1");
    db.sql("DELETE FROM orders WHERE id = 2");
    let second = job.drain();
    assert_eq!(second["status"], "drained", "{second}");
    assert_eq!(second["rows"], 4);
    assert_eq!(second["tables"][&table]["rows"], 4);
    assert_eq!(second["from"], first["to"]);
    let rows = job.rows(&table);
    // A delete's other columns: the old row's, or null when only the key was logged.
    let deleted_note = match E::OLD_IMAGE {
        OldImage::WholeRow => Some("b".into()),
        OldImage::KeyOnly => None,
    };
    assert_eq!(
        ops(&rows, "note"),
        [
            ("insert".into(), Some("a".into())),
            ("insert".into(), Some("b".into())),
            ("update".into(), Some("a2".into())),
            ("delete".into(), deleted_note),
        ]
    );
    assert_eq!(rows[2]["amount"].as_deref(), Some("11.25"));
    assert_eq!(rows[3]["id"].as_deref(), Some("2"));
    // The insert transaction's two rows share a position and have ordinals 0, 1.
    assert_eq!(rows[0]["__pos"], rows[1]["__pos"]);
    assert_eq!(
        (rows[0]["__seq"].as_deref(), rows[1]["__seq"].as_deref()),
        (Some("0"), Some("1"))
    );
    assert!(rows[1]["__pos"] < rows[2]["__pos"] && rows[2]["__pos"] < rows[3]["__pos"]);
    E::assert_position_forms(
        rows[0]["__pos"].as_deref().unwrap(),
        second["to"].as_str().unwrap(),
    );
    assert!(rows.iter().all(|r| r["__ts"].is_some()));
    assert_eq!(replay(&rows, &["id"]).len(), 1);
    // Manifest and marker exist for the clean run.
    let manifest: serde_json::Value = serde_json::from_slice(
        &std::fs::read(job.out().join(&table).join("_manifest.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(manifest["rows"], 4);
    assert_eq!(manifest["run_id"], second["run_id"]);
    assert!(job.out().join(&table).join("_SUCCESS").exists());
}

pub fn primary_key_update_is_split_into_delete_and_insert<E: Engine>() {
    let Some(db) = E::for_test("keychange") else {
        return;
    };
    orders(&db);
    let job = db.job(&["orders"], "");
    job.drain();
    db.sql("INSERT INTO orders VALUES (1, 'a', 1)");
    db.sql("UPDATE orders SET id = 7, note = 'moved' WHERE id = 1");
    job.drain();
    let rows = job.rows("orders");
    assert_eq!(
        ops(&rows, "id"),
        [
            ("insert".into(), Some("1".into())),
            ("delete".into(), Some("1".into())),
            ("insert".into(), Some("7".into())),
        ]
    );
    assert_eq!(rows[1]["__pos"], rows[2]["__pos"]);
    assert_eq!(
        (rows[1]["__seq"].as_deref(), rows[2]["__seq"].as_deref()),
        (Some("0"), Some("1"))
    );
    match E::OLD_IMAGE {
        OldImage::WholeRow => assert_eq!(rows[1]["note"].as_deref(), Some("a"), "the full old row"),
        // The delete of a key-only old image says its other columns were not logged.
        OldImage::KeyOnly => assert!(rows[1]["__unlogged"].as_deref().unwrap().contains("note")),
    }
    let state = replay(&rows, &["id"]);
    assert_eq!(
        state.keys().cloned().collect::<Vec<_>>(),
        [vec![Some("7".to_string())]]
    );
}

pub fn resume_captures_only_new_changes_and_idle_runs_move_the_checkpoint<E: Engine>() {
    let Some(db) = E::for_test("resume") else {
        return;
    };
    orders(&db);
    db.create_table("noise", "id int PRIMARY KEY");
    let job = db.job(&["orders"], "");
    let first = job.drain();
    assert_eq!(
        (first["status"].as_str(), first["rows"].as_u64()),
        (Some("drained"), Some(0))
    );
    let idle = job.drain();
    assert_eq!(idle["rows"], 0);
    db.sql("INSERT INTO noise VALUES (1), (2)");
    let noise = job.drain();
    assert_eq!(noise["rows"], 0);
    assert_ne!(
        noise["to"], noise["from"],
        "an idle run moves past other tables' changes"
    );
    db.sql("INSERT INTO orders VALUES (1, 'a', 1)");
    let s1 = job.drain();
    db.sql("INSERT INTO orders VALUES (2, 'b', 2)");
    let s2 = job.drain();
    let s3 = job.drain();
    assert_eq!(
        (
            s1["rows"].as_u64(),
            s2["rows"].as_u64(),
            s3["rows"].as_u64()
        ),
        (Some(1), Some(1), Some(0))
    );
    assert_eq!(s2["from"], s1["to"]);
    assert_eq!(s3["from"], s2["to"]);
    let rows = job.rows("orders");
    assert_eq!(
        ops(&rows, "id"),
        [
            ("insert".into(), Some("1".into())),
            ("insert".into(), Some("2".into()))
        ]
    );
}

/// A TRUNCATE is a `truncate` row at its position and the stream goes on, replaying to
/// the source's state.
pub fn truncate_of_a_captured_table_is_an_event<E: Engine>() {
    let Some(db) = E::for_test("truncate") else {
        return;
    };
    orders(&db);
    let job = db.job(&["orders"], "");
    job.drain();
    db.sql("INSERT INTO orders VALUES (1, 'a', 1)");
    db.sql("TRUNCATE TABLE orders");
    db.sql("INSERT INTO orders VALUES (2, 'b', 2)");
    assert_eq!(job.drain()["status"], "drained");
    let rows = job.rows("orders");
    assert_eq!(
        ops(&rows, "id"),
        [
            ("insert".into(), Some("1".into())),
            ("truncate".into(), None),
            ("insert".into(), Some("2".into()))
        ]
    );
    let state = crate::support::replay(&rows, &["id"]);
    assert_eq!(state.len(), 1);
    assert!(state.contains_key(&vec![Some("2".to_owned())]));
}

/// Two unsupported columns: one refusal names both, so they are fixed in one go.
pub fn unsupported_column_type_fails_at_open_naming_the_column<E: Engine>() {
    // PostgreSQL refuses no type: `postgres::types_every` shows every type captured.
    let Some(unsupported) = E::UNSUPPORTED_TYPE else {
        return;
    };
    let Some(db) = E::for_test("unsupported") else {
        return;
    };
    db.create_table(
        "t",
        &format!("id int PRIMARY KEY, x {unsupported}, v int, y {unsupported}"),
    );
    let job = db.job(&["t"], "");
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 5, "{}", run.stderr);
    assert_eq!(run.error_code(), "SLUICE_SOURCE_UNSUPPORTED_TYPE");
    assert!(
        run.stderr.contains("t.x") && run.stderr.contains("t.y"),
        "both columns are named: {}",
        run.stderr
    );
}

/// A value with no form in its column's typed output stops nothing and is never written
/// as NULL: the column moves to its text form and the table is re-baselined in that form.
pub fn an_unrepresentable_value_moves_its_column_to_text_never_null<E: Engine>() {
    let Some((column_type, insert, text)) = E::unrepresentable() else {
        return;
    };
    let Some(db) = E::for_test("unrepresentable") else {
        return;
    };
    db.create_table("t", &format!("id int PRIMARY KEY, v {column_type}"));
    let job = db.job(&["t"], "");
    job.drain();
    db.sql(insert);
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let summary = run.summary();
    assert_eq!(summary["rebaselined"]["t"]["baseline"], "done", "{summary}");
    assert!(
        run.stderr.contains("SLUICE_SOURCE_TABLE_REBASELINED") && run.stderr.contains("t.v"),
        "{}",
        run.stderr
    );
    assert_eq!(
        support::replayed_text(&job.out().join("t"), &["id"]),
        format!("1={text}")
    );
}

pub fn lease_held_by_another_run_is_skipped_with_exit_zero<E: Engine>() {
    let Some(db) = E::for_test("lease") else {
        return;
    };
    orders(&db);
    let job = db.job(&["orders"], "");
    job.drain();
    db.sql("INSERT INTO orders VALUES (1, 'a', 1)");
    // Hold the lease: a run paused before its checkpoint.
    let mut holder = job
        .command(
            &["drain"],
            &[("SLUICE_FAULT", "before_checkpoint:pause=3000")],
        )
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    support::wait_for_line(holder.stderr.take().unwrap(), "fault injected: pausing");
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let skipped = run.summary();
    assert_eq!(skipped["status"], "skipped");
    assert!(skipped["lease_holder"].as_str().unwrap().contains("pid-"));
    assert!(holder.wait().unwrap().success());
}
