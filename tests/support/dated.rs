//! Checks of a table folder written with a dated `output.layout`, shared by the engines'
//! tests: the run manifests list every change part with its partition, each part lies
//! in that partition's folder, and the named readers (pyarrow, DuckDB, Spark) read the
//! partition columns back equal to each row's commit time (`__ts`, UTC).

use std::path::Path;

/// Checks `table`'s folder in `out` and returns the partitions its change parts lie in
/// (`dt=…` or `dt=…/hr=…`, sorted, distinct). `changes` is the number of change rows
/// every reader must find, `snapshot` the number of baseline rows pyarrow must find
/// outside any partition.
pub fn check(out: &Path, table: &str, hourly: bool, changes: u64, snapshot: u64) -> Vec<String> {
    let table_dir = out.join(table);
    let mut partitions = std::collections::BTreeSet::new();
    let mut listed = 0;
    for entry in std::fs::read_dir(table_dir.join("_manifests")).expect("run manifests") {
        let manifest: serde_json::Value =
            serde_json::from_slice(&std::fs::read(entry.unwrap().path()).unwrap()).unwrap();
        for part in manifest["parts"].as_array().unwrap() {
            let key = part["key"].as_str().unwrap();
            let partition = part["partition"]
                .as_str()
                .unwrap_or_else(|| panic!("part {key} lists no partition: {manifest}"));
            let segments = if hourly { 2 } else { 1 };
            assert_eq!(partition.split('/').count(), segments, "{partition}");
            assert!(partition.starts_with("dt="), "{partition}");
            assert!(
                key.starts_with(&format!("{table}/{partition}/cdc-")),
                "{key} is not in {partition}"
            );
            assert!(out.join(key).is_file(), "{key} is listed but not written");
            partitions.insert(partition.to_owned());
            listed += part["rows"].as_u64().unwrap();
        }
    }
    assert_eq!(listed, changes, "rows the manifests list");
    let partitions: Vec<String> = partitions.into_iter().collect();
    if let Some(read) = super::readers::hive_partitions(&table_dir, hourly) {
        for reader in ["pyarrow", "duckdb"] {
            let r = &read[reader];
            assert_eq!(r["rows"], changes, "{reader}: {read}");
            assert_eq!(r["misplaced"], 0, "{reader}: {read}");
            assert_eq!(r["dt"], serde_json::json!(partitions), "{reader}: {read}");
        }
        assert_eq!(read["pyarrow"]["snapshot"], snapshot, "{read}");
        assert_eq!(read["pyarrow"]["snapshot_partitioned"], 0, "{read}");
    }
    if let Some((rows, misplaced)) = super::readers::spark_hive_partitions(&table_dir, hourly) {
        assert_eq!((rows, misplaced), (changes, 0), "Spark over dt=*");
    }
    partitions
}
