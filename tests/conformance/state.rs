//! One state-store conformance suite (the `StateStore` contract in `src/state/mod.rs`),
//! run against the local file store and against DynamoDB (moto's server mode through the
//! real `aws-sdk-dynamodb` client).

use crate::support;
use std::time::Duration;

use sluice::error::Code;
use sluice::position::Position;
use sluice::state::dynamodb::DynamoStateStore;
use sluice::state::local::LocalStateStore;
use sluice::state::ops::{OpLease, OpLeaseOutcome};
use sluice::state::{
    BaselineRecord, BaselineStatus, Checkpoint, CheckpointWrite, ChunkRecord, Lease, LeaseOutcome,
    RunRecord, StateStore, now_ms,
};
use support::aws::{runtime, sdk, unique_name};

const LONG: Duration = Duration::from_secs(60);
const SHORT: Duration = Duration::from_millis(300);

/// One checkpoint advance, written as the committer writes it.
async fn advance(
    store: &dyn StateStore,
    lease: &Lease,
    ttl: Duration,
    expected_version: u64,
    position: &str,
    source_identity: &str,
    run_id: &str,
) -> sluice::error::Result<(Checkpoint, Lease)> {
    let position = Position::parse_tagged(position).expect("a tagged position");
    let write = CheckpointWrite {
        lease,
        ttl,
        expected_version,
        position: &position,
        source_identity,
        run_id,
    };
    store.advance_checkpoint(&write).await
}

async fn acquired(store: &dyn StateStore, job: &str, owner: &str, ttl: Duration) -> Lease {
    match store.acquire_lease(job, owner, ttl).await.unwrap() {
        LeaseOutcome::Acquired(lease) => lease,
        held => panic!("{owner} expected the lease, got {held:?}"),
    }
}

/// Waits out a lease's wall-clock expiry (the condition *is* the passage of time).
async fn outlive(lease: &Lease) {
    let left = lease.expires_at_ms - now_ms() + 50;
    if left > 0 {
        tokio::time::sleep(Duration::from_millis(left as u64)).await;
    }
}

async fn lease_is_exclusive_and_tokens_grow(store: &dyn StateStore, job: &str) {
    let a = acquired(store, job, "a", LONG).await;
    assert_eq!(a.job, job);
    assert!(a.token >= 1);
    assert!(a.expires_at_ms > now_ms());
    match store.acquire_lease(job, "b", LONG).await.unwrap() {
        LeaseOutcome::Held {
            owner,
            expires_at_ms,
        } => {
            assert_eq!(owner, "a");
            assert_eq!(expires_at_ms, a.expires_at_ms);
        }
        other => panic!("b got {other:?}"),
    }
    store.release_lease(&a).await.unwrap();
    let b = acquired(store, job, "b", LONG).await;
    assert!(b.token > a.token, "{} then {}", a.token, b.token);
    store.release_lease(&b).await.unwrap();
    // Releasing twice, or a lease that is not held, is harmless.
    store.release_lease(&b).await.unwrap();
    let c = acquired(store, job, "c", LONG).await;
    assert!(c.token > b.token);
}

/// Eight owners named `<prefix>-<i>` ask for `job`'s lease at once.
async fn race_for_lease(
    store: &dyn StateStore,
    job: &str,
    prefix: &str,
) -> Vec<sluice::error::Result<LeaseOutcome>> {
    let owners: Vec<String> = (0..8).map(|i| format!("{prefix}-{i}")).collect();
    futures_util::future::join_all(
        owners
            .iter()
            .map(|owner| store.acquire_lease(job, owner, LONG)),
    )
    .await
}

/// The leases granted among `outcomes`.
fn winners(outcomes: &[sluice::error::Result<LeaseOutcome>]) -> Vec<&Lease> {
    outcomes
        .iter()
        .filter_map(|o| match o.as_ref().unwrap() {
            LeaseOutcome::Acquired(lease) => Some(lease),
            LeaseOutcome::Held { .. } => None,
        })
        .collect()
}

async fn concurrent_requests_grant_one_lease(store: &dyn StateStore, job: &str) {
    let outcomes = race_for_lease(store, job, "owner").await;
    let winners = winners(&outcomes);
    assert_eq!(winners.len(), 1, "{outcomes:?}");
    for outcome in &outcomes {
        if let LeaseOutcome::Held { owner, .. } = outcome.as_ref().unwrap() {
            assert_eq!(owner, &winners[0].owner);
        }
    }
}

async fn an_expired_lease_is_taken_over_and_its_holder_fenced(store: &dyn StateStore, job: &str) {
    let a = acquired(store, job, "a", SHORT).await;
    let (_, a) = advance(store, &a, SHORT, 0, "pg:00000000/00000010", "id", "run-a")
        .await
        .unwrap();
    outlive(&a).await;
    let b = acquired(store, job, "b", LONG).await;
    assert!(b.token > a.token);
    // The zombie can neither move the checkpoint, nor renew, nor release b's lease.
    let err = advance(store, &a, LONG, 1, "pg:00000000/00000020", "id", "run-a")
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::StateFenced, "{}", err.chain());
    assert!(err.message().contains('b'), "names the holder: {err}");
    let err = store.renew_lease(&a, LONG).await.unwrap_err();
    assert_eq!(err.code(), Code::StateFenced);
    store.release_lease(&a).await.unwrap();
    match store.acquire_lease(job, "c", LONG).await.unwrap() {
        LeaseOutcome::Held { owner, .. } => assert_eq!(owner, "b"),
        other => panic!("b's lease was released by the zombie: {other:?}"),
    }
    let cp = store.load_checkpoint(job).await.unwrap().unwrap();
    assert_eq!(
        (cp.position.as_str(), cp.version),
        ("pg:00000000/00000010", 1)
    );
    // The new holder continues from the stored version.
    let (cp, _) = advance(store, &b, LONG, 1, "pg:00000000/00000030", "id", "run-b")
        .await
        .unwrap();
    assert_eq!(cp.version, 2);
}

/// The owner string of a process that ran on this host and has exited.
fn dead_owner(run_id: &str) -> String {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    format!("{run_id}/{}/pid-{pid}", sluice::state::holder::this_host())
}

async fn a_dead_holders_lease_is_taken_over_at_once_and_fenced(store: &dyn StateStore, job: &str) {
    let gone = dead_owner("run-gone");
    let dead = acquired(store, job, &gone, LONG).await;
    let (_, dead) = advance(
        store,
        &dead,
        LONG,
        0,
        "pg:00000000/00000010",
        "id",
        "run-gone",
    )
    .await
    .unwrap();
    // Unexpired, but its process is gone: taken over now, with a higher token.
    let b = acquired(store, job, "b", LONG).await;
    assert!(b.token > dead.token, "{} then {}", dead.token, b.token);
    let err = advance(
        store,
        &dead,
        LONG,
        1,
        "pg:00000000/00000020",
        "id",
        "run-gone",
    )
    .await
    .unwrap_err();
    assert_eq!(err.code(), Code::StateFenced, "{}", err.chain());
    let (cp, _) = advance(store, &b, LONG, 1, "pg:00000000/00000030", "id", "run-b")
        .await
        .unwrap();
    assert_eq!(cp.version, 2);
}

async fn concurrent_takeovers_of_a_dead_holder_grant_one_lease(store: &dyn StateStore, job: &str) {
    let gone = dead_owner("run-gone");
    let dead = acquired(store, job, &gone, LONG).await;
    let outcomes = race_for_lease(store, job, "taker").await;
    let winners = winners(&outcomes);
    assert_eq!(winners.len(), 1, "{outcomes:?}");
    assert_eq!(winners[0].token, dead.token + 1);
}

async fn a_live_or_remote_holder_is_not_taken_over(store: &dyn StateStore, job: &str) {
    // This test process is alive; a holder on another host cannot be proven gone.
    let here = sluice::state::holder::owner("run-live", None);
    let elsewhere = "run-far/some-other-host-x/pid-1".to_owned();
    for holder in [here, elsewhere] {
        let lease = acquired(store, job, &holder, LONG).await;
        match store.acquire_lease(job, "b", LONG).await.unwrap() {
            LeaseOutcome::Held { owner, .. } => assert_eq!(owner, holder),
            other => panic!("{holder} was taken over: {other:?}"),
        }
        store.release_lease(&lease).await.unwrap();
    }
}

async fn a_grant_asked_again_by_its_owner_is_the_same_lease(store: &dyn StateStore, job: &str) {
    let first = acquired(store, job, "a", LONG).await;
    let again = acquired(store, job, "a", LONG).await;
    assert_eq!(again.token, first.token, "no new token for our own lease");
    match store.acquire_lease(job, "b", LONG).await.unwrap() {
        LeaseOutcome::Held { owner, .. } => assert_eq!(owner, "a"),
        other => panic!("{other:?}"),
    }
}

async fn a_checkpoint_write_sent_again_is_recognised_as_done(store: &dyn StateStore, job: &str) {
    let lease = acquired(store, job, "a", LONG).await;
    let (first, lease) = advance(
        store,
        &lease,
        LONG,
        0,
        "pg:00000000/00000010",
        "id",
        "run-a",
    )
    .await
    .unwrap();
    // The same write again (as after a lost answer): done, not fenced.
    let (again, _) = advance(
        store,
        &lease,
        LONG,
        0,
        "pg:00000000/00000010",
        "id",
        "run-a",
    )
    .await
    .unwrap();
    assert_eq!(
        (again.version, &again.position),
        (first.version, &first.position)
    );
    // A different write with the stale version is still refused.
    let err = advance(
        store,
        &lease,
        LONG,
        0,
        "pg:00000000/00000020",
        "id",
        "run-a",
    )
    .await
    .unwrap_err();
    assert_eq!(err.code(), Code::StateFenced, "{}", err.chain());
}

async fn checkpoints_are_conditional_on_the_version(store: &dyn StateStore, job: &str) {
    let lease = acquired(store, job, "a", LONG).await;
    assert_eq!(store.load_checkpoint(job).await.unwrap(), None);
    let (cp, renewed) = advance(
        store,
        &lease,
        LONG,
        0,
        "pg:00000000/00000100",
        "sys-1",
        "run-1",
    )
    .await
    .unwrap();
    assert_eq!(cp.version, 1);
    assert_eq!(renewed.token, lease.token);
    assert!(renewed.expires_at_ms >= lease.expires_at_ms);
    // A writer that read version 0 cannot overwrite version 1.
    let err = advance(
        store,
        &lease,
        LONG,
        0,
        "pg:00000000/00000050",
        "sys-1",
        "run-1",
    )
    .await
    .unwrap_err();
    assert_eq!(err.code(), Code::StateFenced, "{}", err.chain());
    let err = advance(
        store,
        &lease,
        LONG,
        7,
        "pg:00000000/00000050",
        "sys-1",
        "run-1",
    )
    .await
    .unwrap_err();
    assert_eq!(err.code(), Code::StateFenced);
    let (cp, _) = advance(
        store,
        &lease,
        LONG,
        1,
        "pg:00000000/00000200",
        "sys-1",
        "run-2",
    )
    .await
    .unwrap();
    assert_eq!(cp.version, 2);
    let stored = store.load_checkpoint(job).await.unwrap().unwrap();
    assert_eq!(stored, cp);
    assert_eq!(stored.position, "pg:00000000/00000200");
    assert_eq!(stored.source_identity, "sys-1");
    assert_eq!(stored.run_id, "run-2");
}

async fn an_advance_extends_the_lease(store: &dyn StateStore, job: &str) {
    let lease = acquired(store, job, "a", SHORT).await;
    let (_, lease) = advance(store, &lease, LONG, 0, "pg:00000000/00000001", "id", "r")
        .await
        .unwrap();
    let renewed = store.renew_lease(&lease, LONG).await.unwrap();
    assert!(renewed.expires_at_ms >= lease.expires_at_ms);
    tokio::time::sleep(SHORT + Duration::from_millis(100)).await;
    assert!(matches!(
        store.acquire_lease(job, "b", LONG).await.unwrap(),
        LeaseOutcome::Held { .. }
    ));
}

async fn baseline_records_only_move_forward_and_the_first_chunk_record_wins(
    store: &dyn StateStore,
    job: &str,
) {
    let snapshot = BaselineRecord {
        table: "public.orders".into(),
        status: BaselineStatus::Running,
        anchor: "pg:00000000/00000abc".into(),
        run_id: "run-a".into(),
        updated_at_ms: 1,
        reason: None,
        text_columns: Default::default(),
    };
    store.put_baseline(job, &snapshot).await.unwrap();
    let chunk = ChunkRecord {
        table: "public.orders".into(),
        chunk: 3,
        rows: 1000,
        part_key: "public.orders/snapshot/part-000003.parquet".into(),
        bytes: 4096,
        checksum: "fnv1a64:00000000000000aa".into(),
        updated_at_ms: 2,
    };
    assert_eq!(store.put_chunk(job, &chunk).await.unwrap(), chunk);
    assert_eq!(
        store.load_baseline(job, "public.orders").await.unwrap(),
        Some(snapshot.clone())
    );
    assert_eq!(store.load_baseline(job, "other").await.unwrap(), None);
    assert_eq!(
        store.load_chunk(job, "public.orders", 3).await.unwrap(),
        Some(chunk.clone())
    );
    assert_eq!(
        store.load_chunk(job, "public.orders", 4).await.unwrap(),
        None
    );
    // A retried chunk does not replace the first record.
    let retry = ChunkRecord {
        rows: 999,
        part_key: "other".into(),
        ..chunk.clone()
    };
    assert_eq!(store.put_chunk(job, &retry).await.unwrap(), chunk);
    assert_eq!(
        store.load_chunk(job, "public.orders", 3).await.unwrap(),
        Some(chunk.clone())
    );
    // A record never moves back.
    let back = BaselineRecord {
        status: BaselineStatus::Anchored,
        ..snapshot.clone()
    };
    store.put_baseline(job, &back).await.unwrap();
    assert_eq!(
        store
            .load_baseline(job, "public.orders")
            .await
            .unwrap()
            .unwrap()
            .status,
        BaselineStatus::Running
    );
    let done = BaselineRecord {
        status: BaselineStatus::Done,
        ..snapshot.clone()
    };
    store.put_baseline(job, &done).await.unwrap();
    assert_eq!(
        store
            .load_baseline(job, "public.orders")
            .await
            .unwrap()
            .unwrap()
            .status,
        BaselineStatus::Done
    );
    // Reset clears the table's records and only those.
    let other = ChunkRecord {
        table: "public.other".into(),
        ..chunk.clone()
    };
    store.put_chunk(job, &other).await.unwrap();
    store.clear_baseline(job, "public.orders").await.unwrap();
    assert_eq!(
        store.load_baseline(job, "public.orders").await.unwrap(),
        None
    );
    assert_eq!(
        store.load_chunk(job, "public.orders", 3).await.unwrap(),
        None
    );
    assert_eq!(
        store.load_chunk(job, "public.other", 3).await.unwrap(),
        Some(other.clone())
    );
    // A re-baseline: `wanted` replaces a done record and drops its chunk records; an
    // earlier anchoring's late `done` does not overwrite it; a new anchoring replaces it.
    store.put_baseline(job, &done).await.unwrap();
    store.put_chunk(job, &chunk).await.unwrap();
    let wanted = BaselineRecord {
        status: BaselineStatus::Wanted,
        anchor: "pg:00000000/00000def".into(),
        reason: Some("a column was renamed".into()),
        // Kept by the store as a set, and by every later record of the table.
        text_columns: ["n".to_owned(), "a".to_owned()].into(),
        ..snapshot.clone()
    };
    store.replace_snapshot(job, &wanted).await.unwrap();
    assert_eq!(
        store.load_chunk(job, "public.orders", 3).await.unwrap(),
        None
    );
    store.put_baseline(job, &done).await.unwrap();
    assert_eq!(
        store.load_baseline(job, "public.orders").await.unwrap(),
        Some(wanted.clone())
    );
    let anchored = BaselineRecord {
        status: BaselineStatus::Anchored,
        run_id: "run-b".into(),
        ..wanted.clone()
    };
    store.replace_snapshot(job, &anchored).await.unwrap();
    assert_eq!(
        store.load_baseline(job, "public.orders").await.unwrap(),
        Some(anchored)
    );
    assert_eq!(
        store.load_chunk(job, "public.other", 3).await.unwrap(),
        Some(other)
    );
}

async fn show_reports_everything_in_one_shape(store: &dyn StateStore, job: &str) {
    let empty = store.show(job).await.unwrap();
    assert_eq!(empty["lease_token"], 0, "{empty}");
    assert!(empty["checkpoint"].is_null(), "{empty}");
    let lease = acquired(store, job, "a", LONG).await;
    advance(
        store,
        &lease,
        LONG,
        0,
        "pg:00000000/00000001",
        "id",
        "run-1",
    )
    .await
    .unwrap();
    store
        .put_baseline(
            job,
            &BaselineRecord {
                table: "t".into(),
                status: BaselineStatus::Anchored,
                anchor: "pg:00000000/00000001".into(),
                run_id: "run-1".into(),
                updated_at_ms: 5,
                reason: None,
                text_columns: Default::default(),
            },
        )
        .await
        .unwrap();
    store
        .put_chunk(
            job,
            &ChunkRecord {
                table: "t".into(),
                chunk: 12,
                rows: 3,
                part_key: "t/snapshot/part-000012.parquet".into(),
                bytes: 0,
                checksum: String::new(),
                updated_at_ms: 6,
            },
        )
        .await
        .unwrap();
    for run in ["20260101T000000000Z-000001", "20260101T000001000Z-000002"] {
        store
            .put_run(
                job,
                &RunRecord {
                    run_id: run.into(),
                    summary: serde_json::json!({ "status": "drained", "rows": 3, "run_id": run }),
                    expires_at_s: 1_900_000_000,
                },
            )
            .await
            .unwrap();
    }
    let shown = store.show(job).await.unwrap();
    assert_eq!(shown["format_version"], 1, "{shown}");
    assert_eq!(shown["lease_token"], lease.token, "{shown}");
    assert_eq!(shown["lease_owner"], "a");
    assert!(shown["lease_expires_at_ms"].as_i64().unwrap() > now_ms());
    assert_eq!(shown["checkpoint"]["position"], "pg:00000000/00000001");
    assert_eq!(shown["checkpoint"]["version"], 1);
    assert_eq!(shown["checkpoint"]["source_identity"], "id");
    assert_eq!(shown["checkpoint"]["run_id"], "run-1");
    assert_eq!(shown["snapshots"]["t"]["status"], "anchored");
    assert_eq!(shown["chunks"]["t#000012"]["rows"], 3);
    let runs = shown["runs"].as_object().unwrap();
    assert_eq!(runs.len(), 2);
    let run = &runs["20260101T000001000Z-000002"];
    assert_eq!(run["summary"]["rows"], 3);
    assert_eq!(run["expires_at_s"], 1_900_000_000);
    store.release_lease(&lease).await.unwrap();
    let released = store.show(job).await.unwrap();
    assert!(released["lease_owner"].is_null(), "{released}");
    assert_eq!(
        released["lease_token"], lease.token,
        "the token survives release"
    );
}

async fn jobs_are_independent(store: &dyn StateStore, job: &str) {
    let other = format!("{job}-other");
    let a = acquired(store, job, "a", LONG).await;
    let b = acquired(store, &other, "b", LONG).await;
    advance(store, &a, LONG, 0, "pg:00000000/00000001", "id", "r")
        .await
        .unwrap();
    assert_eq!(store.load_checkpoint(&other).await.unwrap(), None);
    // A lease of one job does not fence another.
    let err = advance(
        store,
        &Lease {
            job: other.clone(),
            ..a.clone()
        },
        LONG,
        0,
        "pg:0/1",
        "id",
        "r",
    )
    .await
    .unwrap_err();
    assert_eq!(err.code(), Code::StateFenced);
    advance(store, &b, LONG, 0, "pg:00000000/00000002", "id", "r")
        .await
        .unwrap();
}

async fn claims_are_exclusive_across_jobs(store: &dyn StateStore, job: &str) {
    use sluice::state::ClaimOutcome;
    let resource = format!("pg:127.0.0.1:5432/app/slot/{job}");
    let other = format!("{job}-other");
    assert_eq!(
        store.claim(&resource, job).await.unwrap(),
        ClaimOutcome::Ours
    );
    assert_eq!(
        store.claim(&resource, job).await.unwrap(),
        ClaimOutcome::Ours,
        "claiming again is idempotent"
    );
    assert_eq!(
        store.claim(&resource, &other).await.unwrap(),
        ClaimOutcome::HeldBy(job.to_owned())
    );
    let claims = store.list_claims().await.unwrap();
    assert!(
        claims
            .iter()
            .any(|c| c.resource == resource && c.job == job),
        "{claims:?}"
    );
}

fn snapshot_record(table: &str) -> BaselineRecord {
    BaselineRecord {
        table: table.into(),
        status: BaselineStatus::Done,
        anchor: "pg:00000000/00000abc".into(),
        run_id: "run-a".into(),
        updated_at_ms: 1,
        reason: None,
        text_columns: Default::default(),
    }
}

fn chunk_record(table: &str, chunk: u32) -> ChunkRecord {
    ChunkRecord {
        table: table.into(),
        chunk,
        rows: 10,
        part_key: format!("{table}/snapshot/part-{chunk:06}.parquet"),
        bytes: 100,
        checksum: String::new(),
        updated_at_ms: 2,
    }
}

async fn clear_removes_the_stream_state_under_the_lease(store: &dyn StateStore, job: &str) {
    let a = acquired(store, job, "a", LONG).await;
    let (checkpoint, a) = advance(store, &a, LONG, 0, "pg:00000000/00000010", "id", "run-a")
        .await
        .unwrap();
    for table in ["public.a", "public.b"] {
        store
            .put_baseline(job, &snapshot_record(table))
            .await
            .unwrap();
        for chunk in 0..2 {
            store
                .put_chunk(job, &chunk_record(table, chunk))
                .await
                .unwrap();
        }
    }
    let run = RunRecord {
        run_id: "run-a".into(),
        summary: serde_json::json!({ "status": "drained" }),
        expires_at_s: now_ms() / 1000 + 3600,
    };
    store.put_run(job, &run).await.unwrap();
    // Another job's records are not touched.
    let other = format!("{job}-other");
    store
        .put_baseline(&other, &snapshot_record("public.a"))
        .await
        .unwrap();

    // A lease that is no longer current clears nothing.
    store.release_lease(&a).await.unwrap();
    let err = store.clear_job(&a).await.unwrap_err();
    assert_eq!(err.code(), Code::StateFenced, "{}", err.chain());
    assert_eq!(
        store.load_checkpoint(job).await.unwrap(),
        Some(checkpoint.clone())
    );

    let c = acquired(store, job, "clear", LONG).await;
    let cleared = store.clear_job(&c).await.unwrap();
    assert_eq!(cleared.checkpoint, Some(checkpoint));
    assert_eq!(cleared.snapshots, ["public.a", "public.b"]);
    assert_eq!(cleared.chunks, 4);
    assert_eq!(store.load_checkpoint(job).await.unwrap(), None);
    for table in ["public.a", "public.b"] {
        assert_eq!(store.load_baseline(job, table).await.unwrap(), None);
        assert_eq!(store.load_chunk(job, table, 0).await.unwrap(), None);
    }
    let shown = store.show(job).await.unwrap();
    assert!(shown["lease_owner"].is_null(), "the lease is gone: {shown}");
    assert!(
        shown["runs"].as_object().unwrap().contains_key("run-a"),
        "run records are kept: {shown}"
    );
    assert!(
        store
            .load_baseline(&other, "public.a")
            .await
            .unwrap()
            .is_some()
    );
    // Tokens keep growing across a clear, so every earlier holder stays fenced.
    let d = acquired(store, job, "d", LONG).await;
    assert!(d.token > c.token, "{} then {}", c.token, d.token);
    let err = advance(store, &a, LONG, 0, "pg:00000000/00000020", "id", "run-a")
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::StateFenced);
}

async fn a_lease_is_broken_only_from_its_named_holder(store: &dyn StateStore, job: &str) {
    let a = acquired(store, job, "a", LONG).await;
    assert!(!store.break_lease(job, "b").await.unwrap());
    match store.acquire_lease(job, "b", LONG).await.unwrap() {
        LeaseOutcome::Held { owner, .. } => assert_eq!(owner, "a"),
        other => panic!("still a's: {other:?}"),
    }
    assert!(store.break_lease(job, "a").await.unwrap());
    assert!(!store.break_lease(job, "a").await.unwrap(), "already free");
    let b = acquired(store, job, "b", LONG).await;
    assert!(b.token > a.token);
    // The broken holder is fenced, and cannot release b's lease.
    let err = store.renew_lease(&a, LONG).await.unwrap_err();
    assert_eq!(err.code(), Code::StateFenced);
    store.release_lease(&a).await.unwrap();
    assert_eq!(store.show(job).await.unwrap()["lease_owner"], "b");
}

async fn claims_are_released_only_by_their_job(store: &dyn StateStore, job: &str) {
    use sluice::state::ClaimOutcome;
    let resource = format!("pg:127.0.0.1:5432/app/slot/{job}-release");
    let other = format!("{job}-other");
    assert!(
        !store.release_claim(&resource, job).await.unwrap(),
        "absent"
    );
    assert_eq!(
        store.claim(&resource, job).await.unwrap(),
        ClaimOutcome::Ours
    );
    assert!(!store.release_claim(&resource, &other).await.unwrap());
    assert!(
        store
            .list_claims()
            .await
            .unwrap()
            .iter()
            .any(|c| c.resource == resource && c.job == job)
    );
    assert!(store.release_claim(&resource, job).await.unwrap());
    assert!(
        !store
            .list_claims()
            .await
            .unwrap()
            .iter()
            .any(|c| c.resource == resource)
    );
    // Released, the resource can be claimed by another job.
    assert_eq!(
        store.claim(&resource, &other).await.unwrap(),
        ClaimOutcome::Ours
    );
}

async fn jobs_and_their_recent_runs_are_listed(store: &dyn StateStore, job: &str) {
    assert!(
        store.list_jobs().await.unwrap().is_empty(),
        "an empty store"
    );
    let other = format!("{job}-b");
    let lease = acquired(store, &other, "a", LONG).await;
    store.release_lease(&lease).await.unwrap();
    let lease = acquired(store, job, "a", LONG).await;
    advance(
        store,
        &lease,
        LONG,
        0,
        "pg:00000000/00000001",
        "id",
        "run-1",
    )
    .await
    .unwrap();
    // Claims and runs of a job are not jobs.
    let _ = store.claim("pg:h:5432/db/slot/s", job).await.unwrap();
    let ids = [
        "20260101T000000000Z-000001",
        "20260102T000000000Z-000002",
        "20260102T120000000Z-000003",
    ];
    for run in ids {
        let record = RunRecord {
            run_id: run.into(),
            summary: serde_json::json!({ "status": "drained", "rows": 1, "run_id": run }),
            expires_at_s: 1_900_000_000,
        };
        store.put_run(job, &record).await.unwrap();
    }
    assert_eq!(
        store.list_jobs().await.unwrap(),
        [job.to_owned(), other.clone()]
    );
    let since = |prefix: &'static str| async move {
        let runs = store.runs_since(job, prefix).await.unwrap();
        runs.into_iter().map(|r| r.run_id).collect::<Vec<_>>()
    };
    assert_eq!(
        since("20260102T000000").await,
        ids[1..],
        "oldest first, from the prefix on"
    );
    assert_eq!(
        since("20260102T000000000Z-000002").await,
        ids[1..],
        "a whole id is inclusive"
    );
    assert_eq!(since("2025").await, ids);
    assert!(since("20260103").await.is_empty());
    assert!(store.runs_since(&other, "2025").await.unwrap().is_empty());
}

async fn op_acquired(
    store: &dyn StateStore,
    job: &str,
    op: &str,
    owner: &str,
    ttl: Duration,
) -> OpLease {
    match store.acquire_op_lease(job, op, owner, ttl).await.unwrap() {
        OpLeaseOutcome::Acquired(lease) => lease,
        held => panic!("{owner} expected the lease of {op}, got {held:?}"),
    }
}

/// An operation's lease (a table's compaction) is exclusive, fenced, and apart from the
/// job's lease and from the other operations' leases.
async fn operation_leases_are_exclusive_fenced_and_apart_from_the_jobs(
    store: &dyn StateStore,
    job: &str,
) {
    assert!(store.list_ops(job).await.unwrap().is_empty());
    // The job's lease held does not keep an operation from its own, nor the other way.
    let drain = acquired(store, job, "drain", LONG).await;
    let a = op_acquired(store, job, "compact#t", "a", LONG).await;
    assert!(a.token >= 1 && a.expires_at_ms > now_ms());
    assert_eq!((a.job.as_str(), a.op.as_str()), (job, "compact#t"));
    match store
        .acquire_op_lease(job, "compact#t", "b", LONG)
        .await
        .unwrap()
    {
        OpLeaseOutcome::Held {
            owner,
            expires_at_ms,
        } => {
            assert_eq!((owner.as_str(), expires_at_ms), ("a", a.expires_at_ms));
        }
        other => panic!("b got {other:?}"),
    }
    // Another table's operation is independent.
    let other = op_acquired(store, job, "compact#u", "b", LONG).await;
    store.release_op_lease(&other).await.unwrap();
    // The drain goes on: its checkpoint and lease are untouched by the operation.
    let (cp, _) = advance(
        store,
        &drain,
        LONG,
        0,
        "pg:00000000/00000010",
        "id",
        "run-d",
    )
    .await
    .unwrap();
    assert_eq!(cp.version, 1);
    store.release_lease(&drain).await.unwrap();
    let renewed = store.renew_op_lease(&a, LONG).await.unwrap();
    assert_eq!(renewed.token, a.token);
    store
        .record_op(
            &a,
            &serde_json::json!({"status": "compacted", "files_after": 2}),
        )
        .await
        .unwrap();
    store.release_op_lease(&a).await.unwrap();
    let b = op_acquired(store, job, "compact#t", "b", SHORT).await;
    assert!(b.token > a.token, "{} then {}", a.token, b.token);
    // The old holder is fenced everywhere, and its release leaves b's lease alone.
    for err in [
        store.renew_op_lease(&a, LONG).await.unwrap_err(),
        store
            .record_op(&a, &serde_json::json!({}))
            .await
            .unwrap_err(),
    ] {
        assert_eq!(err.code(), Code::StateFenced, "{}", err.chain());
    }
    store.release_op_lease(&a).await.unwrap();
    match store
        .acquire_op_lease(job, "compact#t", "c", LONG)
        .await
        .unwrap()
    {
        OpLeaseOutcome::Held { owner, .. } => assert_eq!(owner, "b"),
        other => panic!("b's lease was released by a: {other:?}"),
    }
    // An expired operation lease is taken over with a higher token.
    tokio::time::sleep(Duration::from_millis(
        (b.expires_at_ms - now_ms() + 50).max(0) as u64,
    ))
    .await;
    let c = op_acquired(store, job, "compact#t", "c", LONG).await;
    assert!(c.token > b.token);
    assert_eq!(
        store
            .record_op(&b, &serde_json::json!({}))
            .await
            .unwrap_err()
            .code(),
        Code::StateFenced
    );
    let records = store.list_ops(job).await.unwrap();
    let ops: Vec<&str> = records.iter().map(|r| r.op.as_str()).collect();
    assert_eq!(ops, ["compact#t", "compact#u"]);
    assert_eq!(records[0].lease_owner.as_deref(), Some("c"));
    assert_eq!(records[0].lease_token, c.token);
    assert_eq!(
        records[0].last,
        Some(serde_json::json!({"status": "compacted", "files_after": 2}))
    );
    assert_eq!(
        (records[1].lease_owner.as_deref(), &records[1].last),
        (None, &None)
    );
    // Nothing of the operation shows up as a job, and the job's state is its own.
    assert_eq!(store.list_jobs().await.unwrap(), [job]);
    let cp = store.load_checkpoint(job).await.unwrap().unwrap();
    assert_eq!(cp.version, 1);
}

async fn concurrent_operation_requests_grant_one_lease(store: &dyn StateStore, job: &str) {
    let owners: Vec<String> = (0..8).map(|i| format!("op-{i}")).collect();
    let outcomes = futures_util::future::join_all(
        owners
            .iter()
            .map(|owner| store.acquire_op_lease(job, "compact#t", owner, LONG)),
    )
    .await;
    let winners: Vec<&OpLease> = outcomes
        .iter()
        .filter_map(|o| match o.as_ref().unwrap() {
            OpLeaseOutcome::Acquired(lease) => Some(lease),
            OpLeaseOutcome::Held { .. } => None,
        })
        .collect();
    assert_eq!(winners.len(), 1, "{outcomes:?}");
    // A dead holder on this host is taken over at once.
    let dead = dead_owner("20260101T000000000Z-000001");
    let zombie = OpLease {
        owner: dead.clone(),
        ..winners[0].clone()
    };
    store.release_op_lease(winners[0]).await.unwrap();
    let held = op_acquired(store, job, "compact#t", &dead, LONG).await;
    let taker = op_acquired(store, job, "compact#t", "taker", LONG).await;
    assert!(taker.token > held.token);
    assert_eq!(
        store
            .renew_op_lease(&zombie, LONG)
            .await
            .unwrap_err()
            .code(),
        Code::StateFenced
    );
}

/// Generates one test per case and backend.
macro_rules! conformance {
    ($($case:ident),* $(,)?) => {
        mod local {
            $(#[test] fn $case() { super::with_local(|s, j| Box::pin(super::$case(s, j))); })*
        }
        mod dynamodb {
            $(#[test] fn $case() { super::with_dynamodb(|s, j| Box::pin(super::$case(s, j))); })*
        }
    };
}

conformance!(
    lease_is_exclusive_and_tokens_grow,
    concurrent_requests_grant_one_lease,
    an_expired_lease_is_taken_over_and_its_holder_fenced,
    checkpoints_are_conditional_on_the_version,
    an_advance_extends_the_lease,
    baseline_records_only_move_forward_and_the_first_chunk_record_wins,
    show_reports_everything_in_one_shape,
    jobs_are_independent,
    claims_are_exclusive_across_jobs,
    clear_removes_the_stream_state_under_the_lease,
    a_lease_is_broken_only_from_its_named_holder,
    claims_are_released_only_by_their_job,
    a_dead_holders_lease_is_taken_over_at_once_and_fenced,
    a_live_or_remote_holder_is_not_taken_over,
    concurrent_takeovers_of_a_dead_holder_grant_one_lease,
    a_grant_asked_again_by_its_owner_is_the_same_lease,
    a_checkpoint_write_sent_again_is_recognised_as_done,
    jobs_and_their_recent_runs_are_listed,
    operation_leases_are_exclusive_fenced_and_apart_from_the_jobs,
    concurrent_operation_requests_grant_one_lease,
);

type Case = for<'a> fn(
    &'a dyn StateStore,
    &'a str,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + 'a>>;

fn with_local(case: Case) {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStateStore::new(dir.path()).unwrap();
    runtime().block_on(case(&store, "job-1"));
}

fn with_dynamodb(case: Case) {
    let Some(moto) = support::service_url("SLUICE_TEST_AWS_ENDPOINT") else {
        return;
    };
    runtime().block_on(async {
        let store = dynamo_store(&moto).await;
        case(&store, "job-1").await;
    });
}

async fn dynamo_store(endpoint: &str) -> DynamoStateStore {
    let sdk = sdk(endpoint).await;
    let store = DynamoStateStore::new(&sdk, &unique_name("sluice-conf")).unwrap();
    let described = store.init().await.unwrap();
    assert_eq!(described["created"], true, "{described}");
    assert_eq!(described["ttl_attribute"], "expires_at");
    store
}

#[test]
fn dynamodb_init_is_idempotent_and_sets_the_ttl() {
    let moto = aws_or_skip!();
    runtime().block_on(async {
        let sdk = sdk(&moto).await;
        let store = dynamo_store(&moto).await;
        let again = store.init().await.unwrap();
        assert_eq!(again["created"], false, "{again}");
        let client = aws_sdk_dynamodb::Client::new(&sdk);
        let ttl = client
            .describe_time_to_live()
            .table_name(store.table())
            .send()
            .await
            .unwrap();
        let ttl = ttl.time_to_live_description.unwrap();
        assert_eq!(ttl.attribute_name(), Some("expires_at"));
        let table = client
            .describe_table()
            .table_name(store.table())
            .send()
            .await
            .unwrap()
            .table
            .unwrap();
        let keys: Vec<(String, String)> = table
            .key_schema()
            .iter()
            .map(|k| {
                (
                    k.attribute_name().to_owned(),
                    k.key_type().as_str().to_owned(),
                )
            })
            .collect();
        assert_eq!(
            keys,
            vec![("pk".into(), "HASH".into()), ("sk".into(), "RANGE".into())]
        );
    });
}

#[test]
fn dynamodb_items_follow_the_documented_layout() {
    use aws_sdk_dynamodb::types::AttributeValue;
    let moto = aws_or_skip!();
    runtime().block_on(async {
        let sdk = sdk(&moto).await;
        let store = dynamo_store(&moto).await;
        let lease = acquired(&store, "orders", "run-x/pid-1", LONG).await;
        advance(
            &store,
            &lease,
            LONG,
            0,
            "pg:00000000/00000001",
            "sys",
            "run-x",
        )
        .await
        .unwrap();
        store
            .put_chunk(
                "orders",
                &ChunkRecord {
                    table: "public.orders".into(),
                    chunk: 7,
                    rows: 1,
                    part_key: "k".into(),
                    bytes: 0,
                    checksum: String::new(),
                    updated_at_ms: 1,
                },
            )
            .await
            .unwrap();
        store
            .put_run(
                "orders",
                &RunRecord {
                    run_id: "run-x".into(),
                    summary: serde_json::json!({"status": "drained"}),
                    expires_at_s: 1_900_000_000,
                },
            )
            .await
            .unwrap();
        let client = aws_sdk_dynamodb::Client::new(&sdk);
        let items = client
            .query()
            .table_name(store.table())
            .key_condition_expression("pk = :pk")
            .expression_attribute_values(":pk", AttributeValue::S("orders".into()))
            .send()
            .await
            .unwrap()
            .items
            .unwrap();
        let sks: Vec<&str> = items
            .iter()
            .map(|i| i["sk"].as_s().unwrap().as_str())
            .collect();
        assert_eq!(sks, vec!["chunk#public.orders#000007", "job", "run#run-x"]);
        let job = &items[1];
        assert_eq!(job["lease_token"].as_n().unwrap(), &lease.token.to_string());
        assert_eq!(job["lease_owner"].as_s().unwrap(), "run-x/pid-1");
        assert!(job["lease_expires_at_ms"].as_n().is_ok());
        let cp = job["checkpoint"].as_m().unwrap();
        assert_eq!(cp["position"].as_s().unwrap(), "pg:00000000/00000001");
        assert_eq!(cp["version"].as_n().unwrap(), "1");
        assert_eq!(items[2]["expires_at"].as_n().unwrap(), "1900000000");
    });
}

#[test]
fn corrupt_state_is_refused() {
    // Local: a file that is not a state document.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("j.json"), b"{not json").unwrap();
    let local = LocalStateStore::new(dir.path()).unwrap();
    let err = runtime().block_on(local.load_checkpoint("j")).unwrap_err();
    assert_eq!(err.code(), Code::StateCorrupt);
    // DynamoDB: a job item whose attributes have the wrong types.
    let Some(moto) = support::service_url("SLUICE_TEST_AWS_ENDPOINT") else {
        return;
    };
    use aws_sdk_dynamodb::types::AttributeValue;
    runtime().block_on(async {
        let sdk = sdk(&moto).await;
        let store = dynamo_store(&moto).await;
        aws_sdk_dynamodb::Client::new(&sdk)
            .put_item()
            .table_name(store.table())
            .item("pk", AttributeValue::S("j".into()))
            .item("sk", AttributeValue::S("job".into()))
            .item("lease_token", AttributeValue::S("seven".into()))
            .send()
            .await
            .unwrap();
        let err = store.load_checkpoint("j").await.unwrap_err();
        assert_eq!(err.code(), Code::StateCorrupt, "{}", err.chain());
        assert!(err.message().contains("lease_token"), "{err}");
        let err = store.acquire_lease("j", "a", LONG).await.unwrap_err();
        assert_eq!(err.code(), Code::StateCorrupt, "{}", err.chain());
    });
}

#[test]
fn dynamodb_unreachable_is_transient() {
    let moto = aws_or_skip!();
    let proxy = support::proxy::Proxy::start(moto.trim_start_matches("http://"));
    runtime().block_on(async {
        let table = dynamo_store(&moto).await.table().to_owned();
        let proxied = sdk(&proxy.url())
            .await
            .to_builder()
            .retry_config(aws_config::retry::RetryConfig::standard().with_max_attempts(2))
            .build();
        let store = DynamoStateStore::new(&proxied, &table).unwrap();
        let lease = acquired(&store, "j", "a", LONG).await;
        proxy.sever();
        let err = advance(&store, &lease, LONG, 0, "pg:00000000/00000001", "id", "r")
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::StateUnavailable, "{}", err.chain());
        assert_eq!(err.class().exit_code(), 3);
        proxy.restore();
        assert_eq!(store.load_checkpoint("j").await.unwrap(), None);
        advance(&store, &lease, LONG, 0, "pg:00000000/00000001", "id", "r")
            .await
            .unwrap();
    });
}
