//! Lost responses: a write that S3 or DynamoDB carried out but whose answer never came
//! back is sent again by the SDK's retry, and must count as done — the lease grant is
//! ours (not `skipped`), the checkpoint advance is ours (not `FENCED`), and a part whose
//! `If-None-Match` retry meets our own object (412) is adopted when its size and CRC32C
//! are the ones we sent (an object with other content stays `SLUICE_DESTINATION_EXISTS`).
//! Through the real SDK clients against moto, with a proxy that forwards the request and
//! drops its response once.

use std::time::Duration;

use sluice::destination::Destination;
use sluice::destination::s3::{MultipartSettings, S3Destination};
use sluice::error::Code;
use sluice::position::Position;
use sluice::state::dynamodb::DynamoStateStore;
use sluice::state::{CheckpointWrite, LeaseOutcome, StateStore};

use crate::support::aws::{create_bucket, runtime, s3_client, sdk, unique_name};
use crate::support::proxy::Proxy;

const TTL: Duration = Duration::from_secs(60);

/// A fresh state table on moto, and a store that reaches it through `proxy`.
async fn store_through(moto: &str, proxy: &Proxy) -> DynamoStateStore {
    let table = unique_name("sluice-lost");
    let direct = DynamoStateStore::new(&sdk(moto).await, &table).unwrap();
    direct.init().await.unwrap();
    DynamoStateStore::new(&sdk(&proxy.url()).await, &table).unwrap()
}

#[test]
fn a_lease_grant_whose_answer_was_lost_is_acquired() {
    let moto = aws_or_skip!();
    let proxy = Proxy::start(moto.trim_start_matches("http://"));
    runtime().block_on(async {
        let store = store_through(&moto, &proxy).await;
        proxy.drop_response_to("lease_expires_at_ms <= :now");
        let outcome = store
            .acquire_lease("j", "run-a/h/pid-1", TTL)
            .await
            .unwrap();
        assert_eq!(proxy.dropped(), 1, "the grant's answer was dropped");
        let LeaseOutcome::Acquired(lease) = outcome else {
            panic!("our own stored lease was reported as held: {outcome:?}");
        };
        assert_eq!(lease.token, 1);
        let shown = store.show("j").await.unwrap();
        assert_eq!(shown["lease_owner"], "run-a/h/pid-1");
        assert_eq!(shown["lease_token"], 1);
        // The lease really is ours: a checkpoint under it is accepted.
        let position = Position::parse_tagged("pg:00000000/00000010").unwrap();
        let write = CheckpointWrite {
            lease: &lease,
            ttl: TTL,
            expected_version: 0,
            position: &position,
            source_identity: "id",
            run_id: "run-a",
        };
        store.advance_checkpoint(&write).await.unwrap();
    });
}

#[test]
fn a_checkpoint_write_whose_answer_was_lost_is_done_not_fenced() {
    let moto = aws_or_skip!();
    let proxy = Proxy::start(moto.trim_start_matches("http://"));
    runtime().block_on(async {
        let store = store_through(&moto, &proxy).await;
        let LeaseOutcome::Acquired(lease) = store.acquire_lease("j", "a", TTL).await.unwrap()
        else {
            panic!("lease");
        };
        let first = Position::parse_tagged("pg:00000000/00000010").unwrap();
        let write = CheckpointWrite {
            lease: &lease,
            ttl: TTL,
            expected_version: 0,
            position: &first,
            source_identity: "id",
            run_id: "run-a",
        };
        let (cp, lease) = store.advance_checkpoint(&write).await.unwrap();
        assert_eq!(cp.version, 1);
        let second = Position::parse_tagged("pg:00000000/00000020").unwrap();
        let write = CheckpointWrite {
            lease: &lease,
            expected_version: 1,
            position: &second,
            ..write
        };
        proxy.drop_response_to("SET #cp = :cp");
        let (cp, _) = store
            .advance_checkpoint(&write)
            .await
            .unwrap_or_else(|e| panic!("{}", e.chain()));
        assert_eq!(proxy.dropped(), 1, "the advance's answer was dropped");
        assert_eq!(
            (cp.version, cp.position.as_str()),
            (2, "pg:00000000/00000020")
        );
        let stored = store.load_checkpoint("j").await.unwrap().unwrap();
        assert_eq!((stored.version, stored.position), (2, cp.position));
        // A stale writer is still refused.
        let third = Position::parse_tagged("pg:00000000/00000030").unwrap();
        let stale = CheckpointWrite {
            position: &third,
            ..write
        };
        let err = store.advance_checkpoint(&stale).await.unwrap_err();
        assert_eq!(err.code(), Code::StateFenced, "{}", err.chain());
    });
}

#[test]
fn a_part_put_whose_answer_was_lost_is_adopted_only_when_identical() {
    let moto = aws_or_skip!();
    let proxy = Proxy::start(moto.trim_start_matches("http://"));
    runtime().block_on(async {
        let direct = sdk(&moto).await;
        let bucket = create_bucket(&direct, "sluice-lost").await;
        let dest = S3Destination::new(
            &sdk(&proxy.url()).await,
            &bucket,
            "cdc",
            MultipartSettings::default(),
        )
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let local = dir.path().join("part.parquet");
        let body: Vec<u8> = (0..200_000u32).flat_map(|i| i.to_le_bytes()).collect();
        std::fs::write(&local, &body).unwrap();

        let key = "t/cdc-20261203T070000000Z-lost01-000001.parquet";
        proxy.drop_response_to(key);
        dest.put_part(key, &local)
            .await
            .unwrap_or_else(|e| panic!("{}", e.chain()));
        assert_eq!(proxy.dropped(), 1, "the put's answer was dropped");
        let stored = s3_client(&direct)
            .get_object()
            .bucket(&bucket)
            .key(format!("cdc/{key}"))
            .send()
            .await
            .unwrap();
        let stored = stored.body.collect().await.unwrap().into_bytes();
        assert_eq!(stored.as_ref(), body.as_slice());

        // Another object under a part's key is never adopted.
        let mut other = body.clone();
        other[7] ^= 1;
        std::fs::write(&local, &other).unwrap();
        let err = dest.put_part(key, &local).await.unwrap_err();
        assert_eq!(err.code(), Code::DestinationExists, "{}", err.chain());
        std::fs::write(&local, &body[..body.len() - 4]).unwrap();
        let err = dest.put_part(key, &local).await.unwrap_err();
        assert_eq!(err.code(), Code::DestinationExists, "{}", err.chain());
    });
}

/// The real binary: for each of the lease grant, a checkpoint advance and a part put,
/// the answer is lost once; the drain still succeeds (drained, not skipped or failed) and
/// the replay is exact.
#[test]
fn a_drain_survives_a_lost_answer_to_its_lease_checkpoint_and_part() {
    let admin = pg_or_skip!();
    let moto = aws_or_skip!();
    let db = crate::support::TestDb::new(&admin, "aws_lost_answers");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    let proxy = Proxy::start(moto.trim_start_matches("http://"));
    let mut target = crate::support::aws::AwsTarget::new(&moto);
    target.s3_endpoint = proxy.url();
    target.dynamodb_endpoint = proxy.url();
    let job = target.job(&db, &["t"], "");
    job.drain();
    let mut total = 0;
    for (round, needle) in [
        "lease_expires_at_ms <= :now",
        "SET #cp = :cp",
        "/cdc/t/cdc-",
    ]
    .into_iter()
    .enumerate()
    {
        let from = round * 10 + 1;
        db.sql(&format!(
            "INSERT INTO t SELECT g, 'v' || g FROM generate_series({from}, {}) g",
            from + 9
        ));
        total += 10;
        let lost = proxy.dropped();
        proxy.drop_response_to(needle);
        let run = job.run(&["drain"], &[]);
        assert_eq!(run.code, 0, "{needle}: {}\n{}", run.stdout, run.stderr);
        let summary = run.summary();
        assert_eq!(summary["status"], "drained", "{needle}: {summary}");
        assert_eq!(summary["rows"], 10, "{needle}: {summary}");
        assert_eq!(
            proxy.dropped(),
            lost + 1,
            "{needle}: the answer was dropped"
        );
    }
    target.fetch_output(&job);
    let rows = job.rows("t");
    let distinct: std::collections::BTreeSet<_> = rows
        .iter()
        .map(|r| (r["__pos"].clone(), r["__seq"].clone()))
        .collect();
    assert_eq!(distinct.len(), total, "every change, once");
    assert_eq!(rows.len(), total, "no duplicate part was left behind");
}
