//! How `baseline.plan` hands its chunk list to the state machine.
//!
//! Step Functions passes at most 256 KiB between states, so a large chunk list cannot be
//! returned inline. Guarantees:
//! * a chunk list whose JSON encoding is at most `baseline.inline_plan_max_bytes` is
//!   returned inline (`mode: inline`), exactly as the INLINE Map reads it;
//! * a longer one, when the destination is S3, is written as one JSON array of
//!   [`ChunkTask`] to [`chunks_key`] under the destination's prefix and returned as
//!   `mode: s3` with `items: {bucket, key}`, for the DISTRIBUTED Map's `ItemReader`. The
//!   key depends only on the job, and the list only on the stored per-table plans and the
//!   baseline records, so a retried Plan replaces the object with the same content; the
//!   object is a marker (replaced, never a part), written before Plan returns;
//! * with a local destination the list is always inline: Step Functions cannot read a
//!   local directory (and the CLI never hands the list over at all);
//! * a list for the DISTRIBUTED Map has at most [`MAX_DISTRIBUTED_CHUNKS`] chunks, or
//!   Plan refuses before any chunk is read.

use crate::config::Config;
use crate::destination::Destination;
use crate::error::{Code, Error, Result};

use super::messages::{ChunkTask, PlanMode, PlanOutput};

/// The folder (under the destination's prefix) of the chunk lists the DISTRIBUTED Map
/// reads; the state machine's role may read exactly this folder.
pub const CHUNKS_FOLDER: &str = "_baseline/";

/// The destination key of `job`'s chunk list (one segment below [`CHUNKS_FOLDER`], valid
/// for every job name).
pub fn chunks_key(job: &str) -> String {
    format!("{CHUNKS_FOLDER}chunks-{job}.json")
}

/// The DISTRIBUTED Map collects every child execution's output (`{}`, 3 bytes with its
/// separator) into one result that must stay below 256 KiB even though the state
/// discards it (`ResultPath: null` does not lift the limit): 87,381 children at most,
/// kept well below.
pub const MAX_DISTRIBUTED_CHUNKS: usize = 80_000;

/// Where a chunk list of `encoded_bytes` goes: inline unless it is longer than
/// `inline_max` and Step Functions can read the destination (`s3`).
pub fn mode_for(encoded_bytes: usize, inline_max: u64, s3: bool) -> PlanMode {
    if s3 && encoded_bytes as u64 > inline_max {
        PlanMode::S3
    } else {
        PlanMode::Inline
    }
}

/// The `baseline.plan` output for `chunks`, writing them to `destination` first when
/// they go through S3.
pub async fn deliver(
    config: &Config,
    destination: &dyn Destination,
    chunks: Vec<ChunkTask>,
) -> Result<PlanOutput> {
    let key = chunks_key(&config.job);
    let object = destination.s3_object(&key)?;
    // Only a list that may go through S3 needs its encoded size.
    let body = match object {
        Some(_) => serde_json::to_vec(&chunks)
            .map_err(|e| Error::new(Code::Internal, "encoding the chunk list").source(e))?,
        None => Vec::new(),
    };
    let chunk_count = chunks.len();
    let parallel = config.baseline.parallel;
    let mode = mode_for(
        body.len(),
        config.baseline.inline_plan_max_bytes,
        object.is_some(),
    );
    let (PlanMode::S3, Some(object)) = (mode, object) else {
        return Ok(PlanOutput {
            mode: PlanMode::Inline,
            chunks,
            items: None,
            chunk_count,
            parallel,
        });
    };
    if chunk_count > MAX_DISTRIBUTED_CHUNKS {
        return Err(Error::new(
            Code::ConfigInvalid,
            format!(
                "job {}: the baseline has {chunk_count} chunks; one Step Functions Distributed Map can run at most {MAX_DISTRIBUTED_CHUNKS}",
                config.job
            ),
        )
        .hint("raise baseline.chunk_rows, then plan again: remove <table>/snapshot/ from the destination and run `sluice baseline --reset` (or run `sluice baseline` from a machine near the source)"));
    }
    destination.put_marker(&key, &body).await?;
    tracing::info!(chunks = chunk_count, bytes = body.len(), object = %format!("s3://{}/{}", object.bucket, object.key),
        "chunk list written for the Distributed Map");
    Ok(PlanOutput {
        mode: PlanMode::S3,
        chunks: Vec::new(),
        items: Some(object),
        chunk_count,
        parallel,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::destination::S3Object;
    use crate::destination::local::LocalDestination;
    use crate::source::baseline_read::ChunkBounds;

    fn config(inline_max: u64) -> Config {
        let text = format!(
            "job: j\nsource: {{ url_env: X, tables: [t] }}\n\
             destination: {{ type: local, path: out }}\nstate: {{ type: local, path: s }}\n\
             baseline: {{ parallel: 3, inline_plan_max_bytes: {inline_max} }}\n"
        );
        Config::parse(&text, "test").unwrap()
    }

    fn chunks(n: u32) -> Vec<ChunkTask> {
        (1..=n)
            .map(|chunk| ChunkTask {
                table: "t".into(),
                chunk,
                bounds: ChunkBounds {
                    lower: None,
                    upper: None,
                },
                anchor: "pg:0/16B3748".into(),
            })
            .collect()
    }

    #[test]
    fn only_a_long_list_for_an_s3_destination_goes_through_s3() {
        // S3 destination: inline up to the threshold, S3 above it.
        assert_eq!(mode_for(100, 100, true), PlanMode::Inline);
        assert_eq!(mode_for(101, 100, true), PlanMode::S3);
        assert_eq!(mode_for(1, 0, true), PlanMode::S3);
        // Local destination: always inline.
        assert_eq!(mode_for(100, 100, false), PlanMode::Inline);
        assert_eq!(mode_for(1 << 30, 0, false), PlanMode::Inline);
    }

    /// An S3-like destination in memory: markers are recorded, objects are `lake/cdc/…`.
    #[derive(Default)]
    struct FakeS3 {
        markers: std::sync::Mutex<Vec<(String, Vec<u8>)>>,
    }

    #[async_trait::async_trait]
    impl Destination for FakeS3 {
        fn describe(&self) -> String {
            "s3://lake/cdc/".into()
        }
        async fn put_part(&self, key: &str, _local: &std::path::Path) -> Result<()> {
            Err(Error::new(Code::Internal, format!("unexpected part {key}")))
        }
        async fn put_marker(&self, key: &str, body: &[u8]) -> Result<()> {
            let mut markers = self.markers.lock().unwrap();
            markers.push((key.to_owned(), body.to_vec()));
            Ok(())
        }
        async fn get(&self, _key: &str) -> Result<Option<Vec<u8>>> {
            Ok(None)
        }
        async fn list(&self, _prefix: &str) -> Result<Vec<String>> {
            Ok(vec![])
        }
        fn s3_object(&self, key: &str) -> Result<Option<S3Object>> {
            Ok(Some(S3Object {
                bucket: "lake".into(),
                key: format!("cdc/{key}"),
            }))
        }
    }

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
    }

    #[test]
    fn an_s3_destination_takes_a_long_list_and_keeps_a_short_one_inline() {
        let list = chunks(5);
        let encoded = serde_json::to_vec(&list).unwrap().len() as u64;

        let dest = FakeS3::default();
        let out = rt()
            .block_on(deliver(&config(encoded), &dest, list.clone()))
            .unwrap();
        assert_eq!(
            (out.mode, out.chunks.len(), out.items),
            (PlanMode::Inline, 5, None)
        );
        assert!(dest.markers.lock().unwrap().is_empty(), "nothing written");

        let out = rt()
            .block_on(deliver(&config(encoded - 1), &dest, list.clone()))
            .unwrap();
        assert_eq!(out.mode, PlanMode::S3);
        assert!(out.chunks.is_empty());
        assert_eq!((out.chunk_count, out.parallel), (5, 3));
        assert_eq!(
            out.items,
            Some(S3Object {
                bucket: "lake".into(),
                key: "cdc/_baseline/chunks-j.json".into()
            })
        );
        let markers = dest.markers.lock().unwrap();
        assert_eq!(markers.len(), 1);
        assert_eq!(markers[0].0, "_baseline/chunks-j.json");
        let written: Vec<ChunkTask> = serde_json::from_slice(&markers[0].1).unwrap();
        assert_eq!(written, list, "the object holds every chunk task");
    }

    #[test]
    fn a_list_too_long_for_one_distributed_map_is_refused_before_anything_is_written() {
        let dest = FakeS3::default();
        let err = rt()
            .block_on(deliver(
                &config(0),
                &dest,
                chunks(MAX_DISTRIBUTED_CHUNKS as u32 + 1),
            ))
            .unwrap_err();
        assert_eq!(err.code(), Code::ConfigInvalid);
        assert!(
            err.hint_text().unwrap().contains("baseline.chunk_rows"),
            "{err:?}"
        );
        assert!(dest.markers.lock().unwrap().is_empty());
        let out = rt()
            .block_on(deliver(
                &config(0),
                &dest,
                chunks(MAX_DISTRIBUTED_CHUNKS as u32),
            ))
            .unwrap();
        assert_eq!(out.mode, PlanMode::S3);
    }

    #[test]
    fn a_local_destination_keeps_even_a_long_list_inline() {
        let dir = tempfile::tempdir().unwrap();
        let dest = LocalDestination::new(dir.path()).unwrap();
        let config = config(0);
        let rt = rt();
        let out = rt.block_on(deliver(&config, &dest, chunks(5))).unwrap();
        assert_eq!(out.mode, PlanMode::Inline);
        assert_eq!(out.chunks, chunks(5));
        assert_eq!((out.items, out.chunk_count, out.parallel), (None, 5, 3));
        assert!(
            rt.block_on(dest.list("")).unwrap().is_empty(),
            "nothing written"
        );
    }

    #[test]
    fn the_output_always_has_every_field_the_state_machine_selects() {
        let out = PlanOutput {
            mode: PlanMode::Inline,
            chunks: chunks(1),
            items: None,
            chunk_count: 1,
            parallel: 2,
        };
        let json = serde_json::to_value(&out).unwrap();
        for field in ["mode", "chunks", "items", "chunk_count", "parallel"] {
            assert!(json.get(field).is_some(), "{field} missing from {json}");
        }
        assert_eq!(json["mode"], "inline");
        let s3 = PlanOutput {
            mode: PlanMode::S3,
            items: Some(crate::destination::S3Object {
                bucket: "b".into(),
                key: "p/_baseline/chunks-j.json".into(),
            }),
            chunks: vec![],
            ..out
        };
        let json = serde_json::to_value(&s3).unwrap();
        assert_eq!(json["mode"], "s3");
        assert_eq!(json["items"]["key"], "p/_baseline/chunks-j.json");
    }

    #[test]
    fn every_job_name_gives_a_valid_key_in_the_chunks_folder() {
        let dir = tempfile::tempdir().unwrap();
        let dest = LocalDestination::new(dir.path()).unwrap();
        let rt = rt();
        for job in ["orders", ".", "..", "a.b-c_d"] {
            let key = chunks_key(job);
            assert!(key.starts_with(CHUNKS_FOLDER) && !key[CHUNKS_FOLDER.len()..].contains('/'));
            // `get` refuses a key with an empty, `.` or `..` segment.
            assert_eq!(rt.block_on(dest.get(&key)).unwrap(), None, "{key}");
        }
    }
}
