//! A minimal implementation of the AWS Lambda Runtime API (the `2018-06-01` interface)
//! for running the real binary as a Lambda function in tests: `invocation/next` (long
//! poll), `invocation/{id}/response`, `invocation/{id}/error` and `init/error`.
//! `Lambda-Runtime-Deadline-Ms` is sent as epoch milliseconds, as Lambda does.

use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How an invocation ended.
#[derive(Debug, Clone)]
pub enum Outcome {
    Response(serde_json::Value),
    Error(serde_json::Value),
}

#[derive(Default)]
struct Inner {
    queue: VecDeque<(String, serde_json::Value, u64)>,
    outcomes: HashMap<String, Outcome>,
    init_errors: Vec<serde_json::Value>,
    first_next: Option<Instant>,
    next_id: u64,
}

/// A running Runtime API endpoint.
pub struct RuntimeApi {
    addr: String,
    inner: Arc<(Mutex<Inner>, Condvar)>,
}

/// Wall-clock milliseconds since the Unix epoch.
pub fn epoch_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

impl RuntimeApi {
    pub fn start() -> RuntimeApi {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let inner = Arc::new((Mutex::new(Inner::default()), Condvar::new()));
        let shared = inner.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let shared = shared.clone();
                std::thread::spawn(move || serve(stream, &shared));
            }
        });
        RuntimeApi { addr, inner }
    }

    /// The value for `AWS_LAMBDA_RUNTIME_API`.
    pub fn endpoint(&self) -> &str {
        &self.addr
    }

    /// Queues an invocation with a deadline `budget` from now; returns its request id.
    pub fn invoke(&self, payload: serde_json::Value, budget: Duration) -> String {
        let (lock, cv) = &*self.inner;
        let mut inner = lock.lock().unwrap();
        inner.next_id += 1;
        let id = format!("req-{}", inner.next_id);
        let deadline = epoch_ms() + budget.as_millis() as u64;
        inner.queue.push_back((id.clone(), payload, deadline));
        cv.notify_all();
        id
    }

    /// Waits for the outcome of `id`.
    pub fn wait(&self, id: &str, timeout: Duration) -> Outcome {
        let (lock, cv) = &*self.inner;
        let start = Instant::now();
        let mut inner = lock.lock().unwrap();
        loop {
            if let Some(outcome) = inner.outcomes.get(id) {
                return outcome.clone();
            }
            let left = timeout
                .checked_sub(start.elapsed())
                .expect("invocation timed out");
            inner = cv.wait_timeout(inner, left).unwrap().0;
        }
    }

    /// When the function first asked for an invocation.
    pub fn first_next(&self) -> Option<Instant> {
        self.inner.0.lock().unwrap().first_next
    }

    pub fn init_errors(&self) -> Vec<serde_json::Value> {
        self.inner.0.lock().unwrap().init_errors.clone()
    }
}

fn serve(stream: TcpStream, shared: &(Mutex<Inner>, Condvar)) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = request_line.split_whitespace();
        let (method, path) = (
            parts.next().unwrap_or("").to_owned(),
            parts.next().unwrap_or("").to_owned(),
        );
        let mut length = 0usize;
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let body_json = serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
        let (lock, cv) = shared;
        let response = if method == "GET" && path.ends_with("/runtime/invocation/next") {
            let mut inner = lock.lock().unwrap();
            inner.first_next.get_or_insert_with(Instant::now);
            let (id, payload, deadline) = loop {
                if let Some(item) = inner.queue.pop_front() {
                    break item;
                }
                inner = cv.wait(inner).unwrap();
            };
            drop(inner);
            let payload = payload.to_string();
            format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nLambda-Runtime-Aws-Request-Id: {id}\r\n\
                 Lambda-Runtime-Deadline-Ms: {deadline}\r\n\
                 Lambda-Runtime-Invoked-Function-Arn: arn:aws:lambda:us-east-1:123456789012:function:sluice-test\r\n\
                 Lambda-Runtime-Trace-Id: Root=1-00000000-000000000000000000000000\r\n\
                 Content-Length: {}\r\n\r\n{payload}",
                payload.len()
            )
        } else if method == "POST" && path.contains("/runtime/invocation/") {
            let id = path.split('/').nth(4).unwrap_or_default().to_owned();
            let outcome = if path.ends_with("/response") {
                Outcome::Response(body_json)
            } else {
                Outcome::Error(body_json)
            };
            lock.lock().unwrap().outcomes.insert(id, outcome);
            cv.notify_all();
            "HTTP/1.1 202 Accepted\r\nContent-Length: 2\r\n\r\n{}".to_owned()
        } else if method == "POST" && path.ends_with("/runtime/init/error") {
            lock.lock().unwrap().init_errors.push(body_json);
            cv.notify_all();
            "HTTP/1.1 202 Accepted\r\nContent-Length: 2\r\n\r\n{}".to_owned()
        } else {
            "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n".to_owned()
        };
        if writer.write_all(response.as_bytes()).is_err() {
            return;
        }
    }
}

/// The function process: the `sluice` binary with the Lambda environment set.
pub struct Function {
    child: Child,
    stdout: std::sync::mpsc::Receiver<String>,
}

impl Function {
    pub fn start(api: &RuntimeApi, job: &super::Job, extra_env: &[(&str, &str)]) -> Function {
        let config = std::fs::read_to_string(&job.config).unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice"));
        cmd.env("AWS_LAMBDA_RUNTIME_API", api.endpoint())
            .env("AWS_LAMBDA_FUNCTION_NAME", "sluice-test")
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "512")
            .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
            .env("AWS_LAMBDA_LOG_STREAM_NAME", "test")
            .env("AWS_LAMBDA_LOG_GROUP_NAME", "/aws/lambda/sluice-test")
            .env("SLUICE_CONFIG", config)
            .env(&job.url_env.0, &job.url_env.1)
            .env_remove("SLUICE_FAULT")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        for (k, v) in extra_env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().unwrap();
        let out = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        Function { child, stdout: rx }
    }

    /// The EMF documents printed so far (waiting for stdout to go quiet for 0.5 s).
    pub fn emf_lines(&self) -> Vec<serde_json::Value> {
        // The function may print an invocation's EMF line just after posting its response:
        // read until its stdout has been quiet for a moment, not only what arrived so far.
        std::iter::from_fn(|| self.stdout.recv_timeout(Duration::from_millis(500)).ok())
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(&l).ok())
            .filter(|v| v.get("_aws").is_some())
            .collect()
    }
}

impl Drop for Function {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl RuntimeApi {
    /// Invokes and returns the response payload; panics on an error response.
    pub fn call(&self, payload: serde_json::Value) -> serde_json::Value {
        let id = self.invoke(payload, Duration::from_secs(120));
        match self.wait(&id, Duration::from_secs(120)) {
            Outcome::Response(v) => v,
            Outcome::Error(e) => panic!("invocation failed: {e}"),
        }
    }
}
