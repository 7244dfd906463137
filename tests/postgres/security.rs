//! Security end to end: TLS modes against a real TLS PostgreSQL on loopback
//! (infra/local/postgres-tls.sh), drains as a least-privilege user (the grants of
//! infra/sql/postgres/grants.sql), percent-encoded passwords, and redaction of the
//! password on every error path that prints a URL. No test sends traffic to a
//! non-loopback address: the plain-text refusal is tested as a pure decision in
//! src/tls.rs.

use std::path::Path;
use std::process::Command;

use crate::support::{self, Job, TestDb, ops, psql, service_url, with_database};

const ORDERS: &str = "CREATE TABLE orders (id bigint PRIMARY KEY, note text)";

/// The TLS instance's admin URL and its two CA files, or skip.
macro_rules! tls_or_skip {
    () => {
        match (
            service_url("SLUICE_TEST_PG_TLS_URL"),
            service_url("SLUICE_TEST_TLS_CA_FILE"),
            service_url("SLUICE_TEST_TLS_WRONG_CA_FILE"),
        ) {
            (Some(url), Some(ca), Some(wrong)) => (url, ca, wrong),
            _ => return,
        }
    };
}

/// A role for one test, dropped after the test's database (declare it first).
struct Role {
    admin_url: String,
    name: String,
}

impl Role {
    fn new(admin_url: &str, db: &str, attributes: &str) -> Role {
        let name = format!("r_{db}");
        psql(admin_url, &format!("CREATE ROLE {name} LOGIN {attributes}"));
        Role {
            admin_url: admin_url.to_owned(),
            name,
        }
    }
}

impl Drop for Role {
    fn drop(&mut self) {
        let _ = support::psql_output(
            &self.admin_url,
            &format!("DROP ROLE IF EXISTS {}", self.name),
        );
    }
}

/// A job whose source URL is `url` (through the environment) with `tls` as the YAML flow
/// mapping of `source.tls` (empty: no `tls` key).
fn job(db: &TestDb, url: &str, tls: &str, create: bool) -> Job {
    let dir = tempfile::tempdir().unwrap();
    let tls_line = if tls.is_empty() {
        String::new()
    } else {
        format!("  tls: {tls}\n")
    };
    let yaml = format!(
        "job: {job}\nsource:\n  url_env: SLUICE_TEST_SOURCE_URL\n  tables: [public.orders]\n{tls_line}  postgres: {{ slot: s_{job}, publication: p_{job}, create: {create} }}\n\
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
        url_env: ("SLUICE_TEST_SOURCE_URL".into(), url.to_owned()),
    }
}

/// `url` with user, password (percent-encoded here: every byte but `[A-Za-z0-9-._~]`)
/// and database replaced.
fn url_as(base: &str, user: &str, password: Option<&str>, db: &str) -> String {
    let mut u = url::Url::parse(&with_database(base, db)).unwrap();
    u.set_username(user).unwrap();
    let encoded = password.map(|p| {
        p.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                    (b as char).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect::<String>()
    });
    u.set_password(encoded.as_deref()).unwrap();
    u.to_string()
}

fn with_host(url: &str, host: &str) -> String {
    let mut u = url::Url::parse(url).unwrap();
    u.set_host(Some(host)).unwrap();
    u.to_string()
}

/// Insert, update, delete; drain; the three changes come back.
fn assert_full_drain(job: &Job, db: &TestDb) {
    let first = job.drain();
    assert_eq!(first["status"], "drained");
    db.sql("INSERT INTO orders VALUES (1, 'a'), (2, 'b')");
    db.sql("UPDATE orders SET note = 'a2' WHERE id = 1");
    db.sql("DELETE FROM orders WHERE id = 2");
    let second = job.drain();
    assert_eq!(second["rows"], 4, "{second}");
    let rows = job.rows("public.orders");
    assert_eq!(
        ops(&rows, "note"),
        [
            ("insert".into(), Some("a".into())),
            ("insert".into(), Some("b".into())),
            ("update".into(), Some("a2".into())),
            ("delete".into(), None),
        ]
    );
}

/// Every file under `dir`, concatenated (state, config, parts' manifests).
fn all_files_text(dir: &Path) -> String {
    let mut text = String::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                text.push_str(&String::from_utf8_lossy(&std::fs::read(&path).unwrap()));
            }
        }
    }
    text
}

/// `sluice state show` for the job.
fn state_show(job: &Job) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["state", "show", "--config"])
        .arg(&job.config)
        .env(&job.url_env.0, &job.url_env.1)
        .output()
        .unwrap();
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn verify_full_drains_over_tls() {
    let (admin, ca, _) = tls_or_skip!();
    let db = TestDb::new(&admin, "tls_full");
    db.sql(ORDERS);
    let job = job(
        &db,
        &db.url,
        &format!("{{ mode: verify-full, ca_file: {ca} }}"),
        true,
    );
    assert_full_drain(&job, &db);
}

#[test]
fn the_tls_server_refuses_plain_text_so_tls_tests_prove_tls() {
    let (admin, _, _) = tls_or_skip!();
    let db = TestDb::new(&admin, "tls_plain");
    db.sql(ORDERS);
    // Loopback may run without TLS; this server's pg_hba.conf only has hostssl lines.
    let job = job(&db, &db.url, "{ mode: disable }", true);
    let run = job.run(&["drain"], &[]);
    assert_ne!(run.code, 0);
    assert!(run.stdout.contains("no encryption"), "{}", run.stdout);
}

#[test]
fn wrong_ca_is_refused_with_a_tls_code() {
    let (admin, _, wrong_ca) = tls_or_skip!();
    let db = TestDb::new(&admin, "tls_wrongca");
    db.sql(ORDERS);
    let job = job(
        &db,
        &db.url,
        &format!("{{ mode: verify-full, ca_file: {wrong_ca} }}"),
        true,
    );
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 5, "{}", run.stdout);
    assert_eq!(run.error_code(), "SLUICE_SOURCE_TLS");
    let hint = run.summary()["error"]["hint"].as_str().unwrap().to_owned();
    assert!(hint.contains("source.tls.ca_file"), "{hint}");
    // verify-ca checks the chain too.
    let job = self::job(
        &db,
        &db.url,
        &format!("{{ mode: verify-ca, ca_file: {wrong_ca} }}"),
        true,
    );
    assert_eq!(job.run(&["drain"], &[]).error_code(), "SLUICE_SOURCE_TLS");
}

#[test]
fn wrong_host_name_is_refused_by_verify_full_and_accepted_by_verify_ca() {
    let (admin, ca, _) = tls_or_skip!();
    let db = TestDb::new(&admin, "tls_name");
    db.sql(ORDERS);
    // The server certificate names DNS:localhost only; 127.0.0.1 is the same server
    // under a name the certificate does not carry.
    let by_ip = with_host(&db.url, "127.0.0.1");
    let full = job(
        &db,
        &by_ip,
        &format!("{{ mode: verify-full, ca_file: {ca} }}"),
        true,
    );
    let run = full.run(&["drain"], &[]);
    assert_eq!(run.code, 5, "{}", run.stdout);
    assert_eq!(run.error_code(), "SLUICE_SOURCE_TLS");
    let hint = run.summary()["error"]["hint"].as_str().unwrap().to_owned();
    assert!(
        hint.contains("does not name 127.0.0.1") && hint.contains("verify-ca"),
        "{hint}"
    );
    let chain_only = job(
        &db,
        &by_ip,
        &format!("{{ mode: verify-ca, ca_file: {ca} }}"),
        true,
    );
    assert_full_drain(&chain_only, &db);
}

#[test]
fn require_encrypts_without_verification_and_says_so() {
    let (admin, _, _) = tls_or_skip!();
    let db = TestDb::new(&admin, "tls_req");
    db.sql(ORDERS);
    let job = job(
        &db,
        &with_host(&db.url, "127.0.0.1"),
        "{ mode: require }",
        true,
    );
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("NOT authenticated"), "{}", run.stderr);
}

#[test]
fn ca_from_an_environment_variable() {
    let (admin, ca, _) = tls_or_skip!();
    let db = TestDb::new(&admin, "tls_caenv");
    db.sql(ORDERS);
    let job = job(&db, &db.url, "{ ca_pem_env: SLUICE_TEST_CA_PEM }", true);
    let pem = std::fs::read_to_string(ca).unwrap();
    let run = job.run(&["drain"], &[("SLUICE_TEST_CA_PEM", &pem)]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
}

#[test]
fn least_privilege_user_drains() {
    let admin = pg_or_skip!();
    let name = format!("lp_{}", std::process::id());
    let role = Role {
        admin_url: admin.clone(),
        name: format!("r_{name}"),
    };
    let db = TestDb::new(&admin, &name);
    db.sql(ORDERS);
    // infra/sql/postgres/grants.sql itself, with this test's names, run by the owner.
    let grants = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/infra/sql/postgres/grants.sql"
    ))
    .unwrap()
    .replace(
        "CREATE ROLE sluice ",
        &format!("CREATE ROLE {} ", role.name),
    )
    .replace("TO sluice;", &format!("TO {};", role.name))
    .replace("app_db", &db.name)
    .replace("sluice_orders", &format!("p_{}", db.name));
    db.sql(&grants);
    assert_eq!(
        db.sql(&format!(
            "SELECT rolsuper, rolreplication FROM pg_roles WHERE rolname = '{}'",
            role.name
        )),
        "f|t"
    );
    let url = url_as(&admin, &role.name, None, &db.name);
    let job = job(&db, &url, "", true);
    assert_full_drain(&job, &db);
}

#[test]
fn missing_replication_attribute_is_a_prerequisite_error_naming_it() {
    let admin = pg_or_skip!();
    let name = format!("norepl_{}", std::process::id());
    let role = Role::new(&admin, &name, "");
    let db = TestDb::new(&admin, &name);
    db.sql(ORDERS);
    db.sql(&format!("GRANT SELECT ON public.orders TO {}", role.name));
    db.sql(&format!(
        "CREATE PUBLICATION p_{} FOR TABLE public.orders",
        db.name
    ));
    let job = job(&db, &url_as(&admin, &role.name, None, &db.name), "", true);
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 5, "{}", run.stdout);
    assert_eq!(run.error_code(), "SLUICE_SOURCE_PREREQUISITE");
    let error = run.summary()["error"].to_string();
    assert!(error.contains("REPLICATION"), "{error}");
}

/// A password with every URL delimiter, percent-encoded in the URL.
const TRICKY: &str = "p@ss/w:o?r#d%x";
/// The encoded form as it appears in the URL.
const TRICKY_ENCODED: &str = "p%40ss%2Fw%3Ao%3Fr%23d%25x";

#[test]
fn percent_encoded_password_connects_and_never_shows() {
    let (admin, ca, _) = tls_or_skip!();
    let name = format!("pct_{}", std::process::id());
    // Password auth (scram) is enforced on the TLS instance, so success proves the
    // password was decoded exactly.
    let role = Role::new(&admin, &name, &format!("REPLICATION PASSWORD '{TRICKY}'"));
    let db = TestDb::new(&admin, &name);
    db.sql(ORDERS);
    db.sql(&format!("GRANT SELECT ON public.orders TO {}", role.name));
    db.sql(&format!(
        "CREATE PUBLICATION p_{} FOR TABLE public.orders",
        db.name
    ));
    let url = url_as(&admin, &role.name, Some(TRICKY), &db.name);
    assert!(url.contains(TRICKY_ENCODED), "{url}");
    let job = job(&db, &url, &format!("{{ ca_file: {ca} }}"), true);
    let run = job.run(&["drain"], &[("SLUICE_LOG", "debug")]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let seen = format!(
        "{}{}{}{}",
        run.stdout,
        run.stderr,
        state_show(&job),
        all_files_text(job.dir.path())
    );
    for secret in [TRICKY, TRICKY_ENCODED] {
        assert!(!seen.contains(secret), "password {secret} leaked");
    }
}

#[test]
fn password_is_redacted_on_every_error_path() {
    let (admin, ca, _) = tls_or_skip!();
    let name = format!("red_{}", std::process::id());
    let secret = "Zq7-known-secret-9";
    let role = Role::new(&admin, &name, &format!("PASSWORD '{secret}'"));
    let db = TestDb::new(&admin, &name);
    db.sql(ORDERS);
    db.sql(&format!("GRANT SELECT ON public.orders TO {}", role.name));
    db.sql(&format!(
        "CREATE PUBLICATION p_{} FOR TABLE public.orders",
        db.name
    ));
    let good = url_as(&admin, &role.name, Some(secret), &db.name);
    let closed_port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        port
    };
    let mut bad_host = url::Url::parse(&with_host(&good, "127.0.0.1")).unwrap();
    bad_host.set_port(Some(closed_port)).unwrap();
    let wrong_password = url_as(
        &admin,
        &role.name,
        Some(&format!("{secret}-nope")),
        &db.name,
    );
    let missing_db = url_as(
        &admin,
        &role.name,
        Some(secret),
        &format!("{}_missing", db.name),
    );
    let tls = format!("{{ ca_file: {ca} }}");
    let cases = [
        ("bad host", bad_host.to_string(), "SLUICE_SOURCE_CONNECT"),
        ("bad password", wrong_password, "SLUICE_SOURCE_AUTH"),
        ("missing database", missing_db, "SLUICE_SOURCE_PREREQUISITE"),
        // The role lacks REPLICATION: the slot is refused.
        ("slot refusal", good, "SLUICE_SOURCE_PREREQUISITE"),
    ];
    for (what, url, code) in cases {
        let job = job(&db, &url, &tls, true);
        let run = job.run(&["drain"], &[("SLUICE_LOG", "debug")]);
        assert_eq!(
            run.error_code(),
            code,
            "{what}: {}\n{}",
            run.stdout,
            run.stderr
        );
        assert!(
            run.stdout.contains(":***@") || run.stdout.contains("SLUICE_SOURCE_PREREQUISITE"),
            "{what}: the URL is not echoed redacted: {}",
            run.stdout
        );
        let seen = format!(
            "{}{}{}{}",
            run.stdout,
            run.stderr,
            state_show(&job),
            all_files_text(job.dir.path())
        );
        assert!(!seen.contains(secret), "{what}: password leaked:\n{seen}");
    }
}

#[test]
fn a_server_without_tls_is_not_given_a_plain_session() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "tls_none");
    db.sql(ORDERS);
    // The shared instance has ssl off; with TLS asked for, sluice must not fall back.
    let job = job(&db, &db.url, "{ mode: require }", true);
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 5, "{}", run.stdout);
    assert_eq!(run.error_code(), "SLUICE_SOURCE_TLS");
}
