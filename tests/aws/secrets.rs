//! `source.url_secret_arn` end to end: the source URL read from a real Secrets Manager
//! API (moto's server mode) by the real SDK client, connecting to the TLS PostgreSQL whose
//! non-superuser roles authenticate by scram password — so a wrong or stale password
//! fails for real. Covers the JSON (RDS rotation) form with a password full of URL
//! delimiters, the plain URL form, a missing secret, an unreachable service, and in the
//! Lambda face: one read per container and a rotation followed without a redeploy.

use std::time::Duration;

use crate::support::{self, Job, TestDb, psql};
use support::lambda_api::{Function, Outcome, RuntimeApi};

const ORDERS: &str = "CREATE TABLE orders (id bigint PRIMARY KEY, note text)";
/// Every URL delimiter, so only an encoded URL can carry it.
const TRICKY: &str = "p@ss/w:o?r#d%x";

/// The TLS PostgreSQL admin URL, its CA file and moto's endpoint, or skip.
macro_rules! services_or_skip {
    () => {
        match (
            support::service_url("SLUICE_TEST_PG_TLS_URL"),
            support::service_url("SLUICE_TEST_TLS_CA_FILE"),
            support::service_url("SLUICE_TEST_AWS_ENDPOINT"),
        ) {
            (Some(pg), Some(ca), Some(moto)) => (pg, ca, moto),
            _ => return,
        }
    };
}

/// A login role with a password on the TLS instance, dropped at the end (declare it
/// before the database so it is dropped after it).
struct Role {
    admin: String,
    name: String,
}

impl Role {
    fn new(admin: &str, name: &str, password: &str) -> Role {
        psql(
            admin,
            &format!("CREATE ROLE {name} LOGIN REPLICATION PASSWORD '{password}'"),
        );
        Role {
            admin: admin.to_owned(),
            name: name.to_owned(),
        }
    }

    fn set_password(&self, password: &str) {
        psql(
            &self.admin,
            &format!("ALTER ROLE {} PASSWORD '{password}'", self.name),
        );
    }
}

impl Drop for Role {
    fn drop(&mut self) {
        let _ = support::psql_output(&self.admin, &format!("DROP ROLE IF EXISTS {}", self.name));
    }
}

/// A database with `orders`, readable by `role`, published for the job.
fn database(admin: &str, role: &Role, name: &str) -> TestDb {
    let db = TestDb::new(admin, name);
    db.sql(ORDERS);
    db.sql(&format!("GRANT SELECT ON public.orders TO {}", role.name));
    db.sql(&format!(
        "CREATE PUBLICATION p_{0} FOR TABLE public.orders",
        db.name
    ));
    db
}

/// The JSON form of the secret, as the RDS rotation functions keep it.
fn rds_secret(admin: &str, user: &str, password: &str, db: &str) -> String {
    let url = url::Url::parse(admin).unwrap();
    serde_json::json!({
        "engine": "postgres",
        "host": url.host_str().unwrap(),
        "port": url.port().unwrap(),
        "username": user,
        "password": password,
        "dbname": db,
    })
    .to_string()
}

struct Secrets {
    rt: tokio::runtime::Runtime,
    client: aws_sdk_secretsmanager::Client,
}

impl Secrets {
    fn new(moto: &str) -> Secrets {
        let rt = support::aws::runtime();
        let sdk = rt.block_on(support::aws::sdk(moto));
        let client = aws_sdk_secretsmanager::Client::new(&sdk);
        Secrets { rt, client }
    }

    /// Creates a secret; returns its ARN.
    fn create(&self, name: &str, value: &str) -> String {
        let out = self
            .rt
            .block_on(
                self.client
                    .create_secret()
                    .name(name)
                    .secret_string(value)
                    .send(),
            )
            .expect("create_secret");
        out.arn().unwrap().to_owned()
    }

    fn put(&self, arn: &str, value: &str) {
        self.rt
            .block_on(
                self.client
                    .put_secret_value()
                    .secret_id(arn)
                    .secret_string(value)
                    .send(),
            )
            .expect("put_secret_value");
    }

    fn delete(&self, arn: &str) {
        self.rt
            .block_on(
                self.client
                    .delete_secret()
                    .secret_id(arn)
                    .force_delete_without_recovery(true)
                    .send(),
            )
            .expect("delete_secret");
    }
}

/// A job reading its source URL from `arn`, over verified TLS.
fn job(db: &TestDb, arn: &str, ca: &str) -> Job {
    let dir = tempfile::tempdir().unwrap();
    let yaml = format!(
        "job: {job}\nsource:\n  url_secret_arn: {arn}\n  tables: [public.orders]\n  tls: {{ mode: verify-full, ca_file: {ca} }}\n\
         \x20 postgres: {{ slot: s_{job}, publication: p_{job}, create: true }}\n\
         destination: {{ type: local, path: {out} }}\nstate: {{ type: local, path: {state} }}\n",
        job = db.name,
        out = dir.path().join("out").display(),
        state = dir.path().join("state").display(),
    );
    let config = dir.path().join("sluice.yaml");
    std::fs::write(&config, yaml).unwrap();
    Job {
        dir,
        config,
        url_env: ("SLUICE_TEST_UNUSED".into(), String::new()),
    }
}

fn drain(job: &Job, moto: &str) -> support::Run {
    job.run(&["drain"], &[("AWS_ENDPOINT_URL", moto)])
}

#[test]
fn cli_drain_reads_a_json_secret_with_a_tricky_password() {
    let (admin, ca, moto) = services_or_skip!();
    let name = format!("sec_json_{}", std::process::id());
    let role = Role::new(&admin, &format!("r_{name}"), TRICKY);
    let db = database(&admin, &role, &name);
    let secrets = Secrets::new(&moto);
    let arn = secrets.create(
        &support::aws::unique_name("sluice-json"),
        &rds_secret(&admin, &role.name, TRICKY, &db.name),
    );
    let job = job(&db, &arn, &ca);
    let first = drain(&job, &moto);
    assert_eq!(first.code, 0, "{}\n{}", first.stdout, first.stderr);
    db.sql("INSERT INTO orders VALUES (1, 'a'), (2, 'b')");
    let second = drain(&job, &moto);
    assert_eq!(second.code, 0, "{}", second.stderr);
    assert_eq!(second.summary()["rows"], 2, "{}", second.stdout);
    let seen = format!(
        "{}{}{}{}",
        first.stdout, first.stderr, second.stdout, second.stderr
    );
    assert!(!seen.contains(TRICKY), "the password leaked: {seen}");
}

#[test]
fn a_plain_url_secret_works_and_a_wrong_password_in_it_is_an_auth_refusal() {
    let (admin, ca, moto) = services_or_skip!();
    let name = format!("sec_url_{}", std::process::id());
    let role = Role::new(&admin, &format!("r_{name}"), "right-pass");
    let db = database(&admin, &role, &name);
    let secrets = Secrets::new(&moto);
    let mut url = url::Url::parse(&support::with_database(&admin, &db.name)).unwrap();
    url.set_username(&role.name).unwrap();
    url.set_password(Some("wrong-pass")).unwrap();
    let arn = secrets.create(&support::aws::unique_name("sluice-url"), url.as_str());
    let job = job(&db, &arn, &ca);
    let refused = drain(&job, &moto);
    assert_eq!(refused.code, 5, "{}\n{}", refused.stdout, refused.stderr);
    assert_eq!(refused.error_code(), "SLUICE_SOURCE_AUTH");
    assert!(!refused.stdout.contains("wrong-pass") && !refused.stderr.contains("wrong-pass"));
    url.set_password(Some("right-pass")).unwrap();
    secrets.put(&arn, url.as_str());
    let run = drain(&job, &moto);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.summary()["status"], "drained");
}

#[test]
fn a_missing_secret_is_a_config_error_and_an_unreachable_service_is_transient() {
    let (admin, ca, moto) = services_or_skip!();
    let db = TestDb::new(&admin, "sec_missing");
    let arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:sluice-no-such-secret-AbCdEf";
    let job = job(&db, arn, &ca);
    let missing = drain(&job, &moto);
    assert_eq!(missing.code, 1, "{}\n{}", missing.stdout, missing.stderr);
    assert_eq!(missing.error_code(), "SLUICE_CONFIG_SECRET");
    assert!(
        missing.summary()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("sluice-no-such-secret")
    );
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let unreachable = job.run(
        &["drain"],
        &[("AWS_ENDPOINT_URL", &endpoint), ("AWS_MAX_ATTEMPTS", "1")],
    );
    assert_eq!(
        unreachable.code, 3,
        "{}\n{}",
        unreachable.stdout, unreachable.stderr
    );
    assert_eq!(unreachable.error_code(), "SLUICE_SOURCE_SECRET_UNAVAILABLE");
}

fn error_of(outcome: Outcome) -> serde_json::Value {
    match outcome {
        Outcome::Error(e) => e,
        Outcome::Response(v) => panic!("expected a failed invocation, got {v}"),
    }
}

fn drained_rows(outcome: Outcome) -> u64 {
    match outcome {
        Outcome::Response(v) => {
            assert_eq!(v["status"], "drained", "{v}");
            v["rows"].as_u64().unwrap()
        }
        Outcome::Error(e) => panic!("invocation failed: {e}"),
    }
}

#[test]
fn lambda_reads_the_secret_once_per_container_and_follows_a_rotation() {
    let (admin, ca, moto) = services_or_skip!();
    let name = format!("sec_rot_{}", std::process::id());
    let role = Role::new(&admin, &format!("r_{name}"), "first-pass");
    let db = database(&admin, &role, &name);
    let secrets = Secrets::new(&moto);
    let arn = secrets.create(
        &support::aws::unique_name("sluice-rot"),
        &rds_secret(&admin, &role.name, "first-pass", &db.name),
    );
    let job = job(&db, &arn, &ca);
    let api = RuntimeApi::start();
    let _function = Function::start(&api, &job, &[("AWS_ENDPOINT_URL", &moto)]);
    let invoke = || {
        let id = api.invoke(
            serde_json::json!({"action": "drain"}),
            Duration::from_secs(60),
        );
        api.wait(&id, Duration::from_secs(90))
    };
    assert_eq!(drained_rows(invoke()), 0);

    // Rotation: the password changes, then the secret; the container still holds the
    // old value, fails to authenticate, reads the secret again and retries.
    role.set_password("second-pass");
    secrets.put(
        &arn,
        &rds_secret(&admin, &role.name, "second-pass", &db.name),
    );
    db.sql("INSERT INTO orders VALUES (1, 'after rotation')");
    assert_eq!(drained_rows(invoke()), 1);

    // The password changes but the secret does not: the re-read finds the same value,
    // so the run is refused rather than retried in a loop.
    role.set_password("third-pass");
    let refused = error_of(invoke());
    assert_eq!(refused["errorType"], "Sluice.Refusal", "{refused}");
    assert!(
        refused["errorMessage"]
            .as_str()
            .unwrap()
            .contains("SLUICE_SOURCE_AUTH"),
        "{refused}"
    );
    secrets.put(
        &arn,
        &rds_secret(&admin, &role.name, "third-pass", &db.name),
    );
    db.sql("INSERT INTO orders VALUES (2, 'third')");
    assert_eq!(drained_rows(invoke()), 1);

    // Read once per container: with the secret gone, the cached value still serves.
    secrets.delete(&arn);
    db.sql("INSERT INTO orders VALUES (3, 'cached')");
    assert_eq!(drained_rows(invoke()), 1);
    let rows = job.rows("public.orders");
    assert_eq!(rows.len(), 3);
}

/// `policy.hash_key.secret_arn`: the hash key read from Secrets Manager (never written),
/// named in the parts by its id; a secret that does not exist is a config error.
#[test]
fn a_hash_key_from_a_secret_hashes_the_column_and_is_named_by_its_id() {
    let (Some(pg), Some(moto)) = (
        support::service_url("SLUICE_TEST_PG_URL"),
        support::service_url("SLUICE_TEST_AWS_ENDPOINT"),
    ) else {
        return;
    };
    let db = TestDb::new(&pg, "sec_hashkey");
    db.sql(ORDERS);
    db.sql("INSERT INTO orders VALUES (1, 'private note')");
    let secrets = Secrets::new(&moto);
    let key = "a hash key of at least thirty-two bytes from a secret";
    let arn = secrets.create(&support::aws::unique_name("sluice-hashkey"), key);
    let policy = |arn: &str| {
        format!(
            "initial: snapshot\npolicy:\n  hash_key: {{ secret_arn: {arn} }}\n  tables:\n    orders: {{ hash: [note] }}\n"
        )
    };
    let job = Job::postgres(&db, &["orders"], &policy(&arn));
    let run = drain(&job, &moto);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let hasher =
        sluice::policy::hash::Hasher::new(key.as_bytes(), sluice::config::HashOutput::Hex).unwrap();
    let rows = support::baseline_and_changes(&job.out().join("orders"));
    let sluice::change::Value::Text(want) = hasher.hash(
        &sluice::change::ColumnType::Utf8,
        &sluice::change::Value::Text("private note".into()),
    ) else {
        panic!("hex")
    };
    assert_eq!(rows[0]["note"].as_deref(), Some(want.as_str()));
    let manifest: serde_json::Value = serde_json::from_slice(
        &std::fs::read(job.out().join("orders/snapshot/_manifest.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(manifest["policy"]["key_id"], hasher.key_id());
    for file in [
        &job.config,
        &job.out().join("orders/snapshot/_manifest.json"),
    ] {
        assert!(!std::fs::read_to_string(file).unwrap().contains(key));
    }
    assert!(!run.stderr.contains(key) && !run.stdout.contains(key));
    // A secret that is not there: the run is refused before anything is read.
    let missing = arn.replace("sluice-hashkey", "sluice-nokey");
    std::fs::write(
        &job.config,
        std::fs::read_to_string(&job.config)
            .unwrap()
            .replace(&arn, &missing),
    )
    .unwrap();
    let run = drain(&job, &moto);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(run.error_code(), "SLUICE_CONFIG_SECRET");
    secrets.delete(&arn);
}
