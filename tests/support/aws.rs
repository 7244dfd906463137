//! AWS test support against moto's server mode: unique buckets and tables, jobs whose
//! config points at S3 + DynamoDB (optionally through a severable proxy), and reading
//! parts back from S3.

use std::path::{Path, PathBuf};

use aws_config::SdkConfig;

use super::{Job, TestDb};

/// Returns moto's endpoint or skips the test (fails under `CI=true`).
#[macro_export]
macro_rules! aws_or_skip {
    () => {
        match $crate::support::service_url("SLUICE_TEST_AWS_ENDPOINT") {
            Some(url) => url,
            None => return,
        }
    };
}

/// A current-thread runtime for in-process SDK calls.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// An SDK config for `endpoint` (credentials and region from the test environment,
/// region defaulting to us-east-1).
pub async fn sdk(endpoint: &str) -> SdkConfig {
    let region = std::env::var("AWS_REGION").unwrap_or_else(|_| "us-east-1".into());
    sluice::aws::sdk_config(Some(endpoint), Some(&region))
        .await
        .expect("sdk config")
}

/// A lower-case name unique to this process and moment (valid for buckets and tables).
pub fn unique_name(prefix: &str) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!(
        "{prefix}-{}-{nanos:x}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// A fresh S3 Tables table bucket on moto at `endpoint`; its ARN.
pub fn table_bucket(endpoint: &str) -> String {
    let name = unique_name("sluice-s3t");
    runtime().block_on(async {
        let client = aws_sdk_s3tables::Client::new(&sdk(endpoint).await);
        client
            .create_table_bucket()
            .name(&name)
            .send()
            .await
            .unwrap_or_else(|e| panic!("CreateTableBucket {name}: {e:?}"))
            .arn()
            .to_owned()
    })
}

/// The S3 client tests use to create buckets and read objects.
pub fn s3_client(sdk: &SdkConfig) -> aws_sdk_s3::Client {
    let config = aws_sdk_s3::config::Builder::from(sdk)
        .force_path_style(true)
        .build();
    aws_sdk_s3::Client::from_conf(config)
}

/// Creates a fresh bucket and returns its name.
pub async fn create_bucket(sdk: &SdkConfig, prefix: &str) -> String {
    let bucket = unique_name(prefix);
    s3_client(sdk)
        .create_bucket()
        .bucket(&bucket)
        .send()
        .await
        .expect("create bucket");
    bucket
}

/// Every key in `bucket`, sorted.
pub async fn list_keys(sdk: &SdkConfig, bucket: &str) -> Vec<String> {
    let out = s3_client(sdk)
        .list_objects_v2()
        .bucket(bucket)
        .send()
        .await
        .expect("list");
    let mut keys: Vec<String> = out
        .contents()
        .iter()
        .filter_map(|o| o.key().map(str::to_owned))
        .collect();
    keys.sort();
    keys
}

/// Downloads every object of `bucket` under `prefix` into `dir`, keeping the key layout
/// below the prefix.
pub async fn download(sdk: &SdkConfig, bucket: &str, prefix: &str, dir: &Path) {
    let client = s3_client(sdk);
    for key in list_keys(sdk, bucket).await {
        let Some(rel) = key.strip_prefix(prefix) else {
            continue;
        };
        let object = client
            .get_object()
            .bucket(bucket)
            .key(&key)
            .send()
            .await
            .expect("get");
        let bytes = object.body.collect().await.unwrap().into_bytes();
        let path = dir.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }
}

/// Where an AWS job writes: bucket + prefix, state table, and the endpoints its config
/// names (moto itself or proxies in front of it).
pub struct AwsTarget {
    pub moto: String,
    pub bucket: String,
    pub prefix: String,
    pub table: String,
    pub s3_endpoint: String,
    pub dynamodb_endpoint: String,
}

impl AwsTarget {
    /// A fresh bucket and a fresh (created) state table on moto, endpoints = moto.
    pub fn new(moto: &str) -> AwsTarget {
        let target = AwsTarget::without_table(moto);
        runtime().block_on(async {
            let sdk = sdk(moto).await;
            let store =
                sluice::state::dynamodb::DynamoStateStore::new(&sdk, &target.table).unwrap();
            assert!(store.create_table().await.expect("create table"));
        });
        target
    }

    /// A fresh bucket and the name of a state table that does not exist yet.
    pub fn without_table(moto: &str) -> AwsTarget {
        runtime().block_on(async {
            let sdk = sdk(moto).await;
            let bucket = create_bucket(&sdk, "sluice-test").await;
            let table = unique_name("sluice-state");
            AwsTarget {
                moto: moto.to_owned(),
                bucket,
                prefix: "cdc/".into(),
                table,
                s3_endpoint: moto.to_owned(),
                dynamodb_endpoint: moto.to_owned(),
            }
        })
    }

    /// A PostgreSQL job on `db` writing to this target, with `extra` YAML appended.
    pub fn job(&self, db: &TestDb, tables: &[&str], extra: &str) -> Job {
        let dir = tempfile::tempdir().unwrap();
        let slot = format!("s_{}", db.name);
        // An empty endpoint is left out of the config (the SDK then reads AWS_ENDPOINT_URL).
        let endpoint = |url: &str| {
            if url.is_empty() {
                String::new()
            } else {
                format!(", endpoint_url: '{url}'")
            }
        };
        let yaml = format!(
            "job: {job}\nsource:\n  url_env: SLUICE_TEST_SOURCE_URL\n  tables: [{tables}]\n  postgres: {{ slot: {slot}, publication: p_{job} }}\n\
             destination: {{ type: s3, bucket: {bucket}, prefix: '{prefix}'{s3} }}\n\
             state: {{ type: dynamodb, table: {table}{ddb} }}\n{extra}\n",
            job = db.name,
            tables = tables.join(", "),
            bucket = self.bucket,
            prefix = self.prefix,
            s3 = endpoint(&self.s3_endpoint),
            table = self.table,
            ddb = endpoint(&self.dynamodb_endpoint),
        );
        let config = dir.path().join("sluice.yaml");
        std::fs::write(&config, yaml).unwrap();
        Job {
            dir,
            config,
            url_env: ("SLUICE_TEST_SOURCE_URL".into(), db.url.clone()),
        }
    }

    /// Downloads the job's output into `<job dir>/out` and returns that directory, so
    /// `job.rows(table)` reads what S3 holds.
    pub fn fetch_output(&self, job: &Job) -> PathBuf {
        let out = job.out();
        let _ = std::fs::remove_dir_all(&out);
        std::fs::create_dir_all(&out).unwrap();
        let rt = runtime();
        rt.block_on(async {
            let sdk = sdk(&self.moto).await;
            download(&sdk, &self.bucket, &self.prefix, &out).await;
        });
        out
    }

    /// Every key in the bucket.
    pub fn keys(&self) -> Vec<String> {
        runtime().block_on(async { list_keys(&sdk(&self.moto).await, &self.bucket).await })
    }

    /// Last-modified time (ms) of every key in the bucket.
    pub fn last_modified(&self) -> std::collections::BTreeMap<String, i64> {
        runtime().block_on(async {
            let sdk = sdk(&self.moto).await;
            let out = s3_client(&sdk)
                .list_objects_v2()
                .bucket(&self.bucket)
                .send()
                .await
                .expect("list");
            out.contents()
                .iter()
                .map(|o| {
                    let at = o.last_modified().expect("last modified");
                    (o.key().unwrap().to_owned(), at.to_millis().unwrap())
                })
                .collect()
        })
    }
}
