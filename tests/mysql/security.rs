//! MySQL / MariaDB security end to end: `source.tls` modes against a real TLS MariaDB on
//! loopback (infra/local/mariadb-tls.sh: TLS required for every TCP session, a
//! certificate for `localhost` only), drains as a least-privilege user that REQUIREs SSL
//! (the grants of infra/sql/mysql/grants.sql), and the password (with `@ / : ? # %`)
//! never appearing in output or state. No test sends traffic to a non-loopback address:
//! the plain-text refusal is tested as a pure decision in src/tls.rs and
//! src/source/mysql/connect.rs.

use std::path::Path;
use std::process::{Command, Output};

use crate::support::{Job, ops, service_url};

const ORDERS: &str = "CREATE TABLE orders (id bigint PRIMARY KEY, note varchar(20)) ENGINE=InnoDB";

/// A password with every character that breaks a naive URL.
const PASSWORD_BASE: &str = "Pw@/:?#%&=+ x";

/// The TLS instance's admin URL and its two CA files, or skip.
macro_rules! tls_or_skip {
    () => {
        match (
            service_url("SLUICE_TEST_MYSQL_TLS_URL"),
            service_url("SLUICE_TEST_MYSQL_TLS_CA_FILE"),
            service_url("SLUICE_TEST_MYSQL_TLS_WRONG_CA_FILE"),
        ) {
            (Some(url), Some(ca), Some(wrong)) => Server {
                admin: url,
                ca,
                wrong_ca: wrong,
            },
            _ => return,
        }
    };
}

struct Server {
    admin: String,
    ca: String,
    wrong_ca: String,
}

impl Server {
    /// The `mariadb` client as root, over verified TLS.
    fn sql_output(&self, db: Option<&str>, sql: &str) -> Output {
        let parsed = url::Url::parse(&self.admin).unwrap();
        let mut cmd = Command::new("mariadb");
        cmd.arg("--no-defaults")
            .arg("--protocol=TCP")
            .arg(format!("--host={}", parsed.host_str().unwrap()))
            .arg(format!("--port={}", parsed.port().unwrap()))
            .arg(format!("--user={}", parsed.username()))
            .arg("--ssl")
            .arg(format!("--ssl-ca={}", self.ca))
            .arg("--ssl-verify-server-cert")
            .args(["--batch", "--skip-column-names", "--raw"]);
        if let Some(db) = db {
            cmd.arg(format!("--database={db}"));
        }
        cmd.arg("-e")
            .arg(sql)
            .output()
            .expect("the mariadb client runs")
    }

    fn sql(&self, db: Option<&str>, sql: &str) -> String {
        let out = self.sql_output(db, sql);
        assert!(
            out.status.success(),
            "mariadb failed: {sql}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }
}

/// A database and a least-privilege user (REQUIRE SSL) for one test, both dropped at
/// the end.
struct Fixture<'a> {
    server: &'a Server,
    name: String,
    user: String,
    password: String,
}

impl<'a> Fixture<'a> {
    fn new(server: &'a Server, test: &str) -> Fixture<'a> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let name = format!("t_{test}_{}_{nanos:x}", std::process::id());
        let user = format!("u{}_{nanos:x}", std::process::id());
        let password = format!("{PASSWORD_BASE}{nanos:x}");
        let quoted = password.replace('\\', "\\\\").replace('\'', "\\'");
        // infra/sql/mysql/grants.sql, with this test's names.
        server.sql(
            None,
            &format!(
                "CREATE DATABASE {name};
                 CREATE USER '{user}'@'%' IDENTIFIED BY '{quoted}' REQUIRE SSL;
                 GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO '{user}'@'%';
                 GRANT BINLOG MONITOR ON *.* TO '{user}'@'%';
                 GRANT SELECT ON {name}.* TO '{user}'@'%';"
            ),
        );
        let fixture = Fixture {
            server,
            name,
            user,
            password,
        };
        fixture.sql(ORDERS);
        fixture
    }

    fn sql(&self, sql: &str) -> String {
        self.server.sql(Some(&self.name), sql)
    }

    /// The least-privilege user's URL to `host` (password percent-encoded).
    fn url(&self, host: &str) -> String {
        let mut u = url::Url::parse(&self.server.admin).unwrap();
        u.set_host(Some(host)).unwrap();
        u.set_username(&self.user).unwrap();
        u.set_password(Some(&encode(&self.password))).unwrap();
        u.set_path(&format!("/{}", self.name));
        u.to_string()
    }

    /// A job reading `orders` through `url` with `tls` as the flow mapping of `source.tls`.
    fn job(&self, url: &str, tls: &str) -> Job {
        let dir = tempfile::tempdir().unwrap();
        let yaml = format!(
            "job: {job}\nsource:\n  url_env: SLUICE_TEST_SOURCE_URL\n  tables: [orders]\n  tls: {tls}\n\
             destination: {{ type: local, path: {out} }}\nstate: {{ type: local, path: {state} }}\n",
            job = self.name,
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

    /// Insert, update, delete; drain; the four changes come back.
    fn assert_full_drain(&self, job: &Job) {
        let first = job.drain();
        assert_eq!(first["status"], "drained", "{first}");
        self.sql("INSERT INTO orders VALUES (1, 'a'), (2, 'b')");
        self.sql("UPDATE orders SET note = 'a2' WHERE id = 1");
        self.sql("DELETE FROM orders WHERE id = 2");
        let second = job.drain();
        assert_eq!(second["rows"], 4, "{second}");
        let rows = job.rows("orders");
        assert_eq!(
            ops(&rows, "note"),
            [
                ("insert".into(), Some("a".into())),
                ("insert".into(), Some("b".into())),
                ("update".into(), Some("a2".into())),
                ("delete".into(), Some("b".into())),
            ]
        );
    }

    /// Asserts that no part of the password (raw or percent-encoded) is in `text`.
    fn assert_no_password(&self, what: &str, text: &str) {
        for needle in [PASSWORD_BASE.to_owned(), encode(PASSWORD_BASE)] {
            assert!(!text.contains(&needle), "{what} leaks the password: {text}");
        }
    }
}

impl Drop for Fixture<'_> {
    fn drop(&mut self) {
        let _ = self.server.sql_output(
            None,
            &format!(
                "DROP DATABASE IF EXISTS {}; DROP USER IF EXISTS '{}'@'%';",
                self.name, self.user
            ),
        );
    }
}

/// Percent-encodes every byte but `[A-Za-z0-9-._~]`.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Every file under `dir`, concatenated.
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

#[test]
fn verify_full_drains_over_tls_as_the_least_privilege_user() {
    let server = tls_or_skip!();
    let f = Fixture::new(&server, "my_full");
    let job = f.job(
        &f.url("localhost"),
        &format!("{{ mode: verify-full, ca_file: {} }}", server.ca),
    );
    f.assert_full_drain(&job);
    // The session really was TLS, as the least-privilege user (REQUIRE SSL would refuse
    // anything else, and the server requires secure transport).
    let grants = server.sql(None, &format!("SHOW GRANTS FOR '{}'@'%'", f.user));
    assert!(grants.contains("REQUIRE SSL"), "{grants}");
    assert!(!grants.contains("ALL PRIVILEGES"), "{grants}");
}

#[test]
fn the_tls_server_refuses_plain_text_so_tls_tests_prove_tls() {
    let server = tls_or_skip!();
    let f = Fixture::new(&server, "my_plain");
    // Loopback may run without TLS; this server refuses every plain TCP session.
    let run = f
        .job(&f.url("127.0.0.1"), "{ mode: disable }")
        .run(&["drain"], &[]);
    assert_ne!(run.code, 0, "{}", run.stdout);
    let code = run.error_code();
    assert!(
        code == "SLUICE_SOURCE_AUTH" || code == "SLUICE_SOURCE_TLS",
        "{code}: {}",
        run.stdout
    );
    f.assert_no_password("stdout", &run.stdout);
    f.assert_no_password("stderr", &run.stderr);
}

#[test]
fn wrong_ca_is_refused_with_a_tls_code() {
    let server = tls_or_skip!();
    let f = Fixture::new(&server, "my_wrongca");
    for mode in ["verify-full", "verify-ca"] {
        let job = f.job(
            &f.url("localhost"),
            &format!("{{ mode: {mode}, ca_file: {} }}", server.wrong_ca),
        );
        let run = job.run(&["drain"], &[]);
        assert_eq!(run.code, 5, "{mode}: {}", run.stdout);
        assert_eq!(run.error_code(), "SLUICE_SOURCE_TLS", "{mode}");
        let hint = run.summary()["error"]["hint"].as_str().unwrap().to_owned();
        assert!(hint.contains("source.tls.ca_file"), "{mode}: {hint}");
        f.assert_no_password("stdout", &run.stdout);
        f.assert_no_password("stderr", &run.stderr);
    }
}

#[test]
fn wrong_host_name_is_refused_by_verify_full_but_accepted_by_verify_ca() {
    let server = tls_or_skip!();
    let f = Fixture::new(&server, "my_name");
    // The certificate names only `localhost`; 127.0.0.1 is the same server.
    let url = f.url("127.0.0.1");
    let full = f.job(
        &url,
        &format!("{{ mode: verify-full, ca_file: {} }}", server.ca),
    );
    let run = full.run(&["drain"], &[]);
    assert_eq!(run.code, 5, "{}", run.stdout);
    assert_eq!(run.error_code(), "SLUICE_SOURCE_TLS");
    let hint = run.summary()["error"]["hint"].as_str().unwrap().to_owned();
    assert!(hint.contains("verify-ca"), "{hint}");
    f.assert_no_password("stdout", &run.stdout);

    let ca = f.job(
        &url,
        &format!("{{ mode: verify-ca, ca_file: {} }}", server.ca),
    );
    f.assert_full_drain(&ca);
}

#[test]
fn require_encrypts_without_verifying_and_says_so() {
    let server = tls_or_skip!();
    let f = Fixture::new(&server, "my_require");
    // A name the certificate does not hold, no CA: `require` checks neither.
    let job = f.job(&f.url("127.0.0.1"), "{ mode: require }");
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.summary()["status"], "drained");
    assert!(
        run.stderr.contains("NOT authenticated"),
        "require must warn: {}",
        run.stderr
    );
}

#[test]
fn the_password_never_appears_in_output_logs_or_state() {
    let server = tls_or_skip!();
    let f = Fixture::new(&server, "my_redact");
    let tls = format!("{{ mode: verify-full, ca_file: {} }}", server.ca);
    // A successful drain, then every error path that prints the URL.
    let ok = f.job(&f.url("localhost"), &tls);
    ok.drain();
    f.sql("INSERT INTO orders VALUES (1, 'a')");
    let run = ok.run(&["drain"], &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    f.assert_no_password("drain stdout", &run.stdout);
    f.assert_no_password("drain stderr", &run.stderr);
    f.assert_no_password("job files", &all_files_text(ok.dir.path()));
    let show = ok.run(&["state", "show"], &[]);
    f.assert_no_password("state show", &format!("{}{}", show.stdout, show.stderr));

    let wrong_password = f.url("localhost").replace("Pw%40", "Xw%40");
    let missing_db = f.url("localhost").replace(&f.name, "no_such_db_here");
    let unreachable = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let mut u = url::Url::parse(&f.url("localhost")).unwrap();
        u.set_port(Some(port)).unwrap();
        u.to_string()
    };
    for (what, url, code) in [
        (
            "wrong password",
            wrong_password.as_str(),
            "SLUICE_SOURCE_AUTH",
        ),
        (
            "missing database",
            missing_db.as_str(),
            "SLUICE_SOURCE_PREREQUISITE",
        ),
        (
            "unreachable port",
            unreachable.as_str(),
            "SLUICE_SOURCE_CONNECT",
        ),
    ] {
        let job = f.job(url, &tls);
        let run = job.run(&["drain"], &[]);
        assert_ne!(run.code, 0, "{what}: {}", run.stdout);
        assert_eq!(run.error_code(), code, "{what}: {}", run.stdout);
        f.assert_no_password(what, &run.stdout);
        f.assert_no_password(what, &run.stderr);
        f.assert_no_password(what, &all_files_text(job.dir.path()));
    }
}
