//! A minimal implementation of the AWS Lambda Runtime API (the `2018-06-01` interface)
//! for running the real binary as a Lambda function in tests: `invocation/next` (long
//! poll), `invocation/{id}/response`, `invocation/{id}/error` and `init/error`.
//! `Lambda-Runtime-Deadline-Ms` is sent as epoch milliseconds, as Lambda does.
//!
//! And the part of the Extensions API (the `2020-01-01` interface) an internal extension
//! uses, with Lambda's rules: `extension/register` (a `Lambda-Extension-Name`, answered
//! with a `Lambda-Extension-Identifier`; refused once the runtime has asked for its first
//! invocation, and refused for `SHUTDOWN`, which internal extensions may not subscribe to —
//! every extension here lives in the function's process; `INVOKE` events are not
//! emulated) and `extension/event/next` (a long poll that delivers nothing). The Init
//! phase ends when the runtime and every registered extension have called their `next`:
//! no invocation is handed out before. [`RuntimeApi::shut_down`] ends the environment as
//! Lambda does: SIGTERM to the runtime only when an extension registered, then SIGKILL
//! after a limit; without an extension, SIGKILL at once.

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

/// An extension registered through the Extensions API.
#[derive(Debug, Clone)]
pub struct Extension {
    /// Its `Lambda-Extension-Name`.
    pub name: String,
    /// The identifier it was given.
    pub id: String,
    /// The events it registered for.
    pub events: Vec<String>,
    /// It has called `event/next` (its init is done).
    pub ready: bool,
}

#[derive(Default)]
struct Inner {
    queue: VecDeque<(String, serde_json::Value, u64)>,
    outcomes: HashMap<String, Outcome>,
    init_errors: Vec<serde_json::Value>,
    first_next: Option<Instant>,
    next_id: u64,
    extensions: Vec<Extension>,
    /// Registrations refused, with the reason.
    refused_registrations: Vec<String>,
    /// The environment was shut down: long polls may return (their process is gone).
    gone: bool,
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

    /// The extensions registered so far.
    pub fn extensions(&self) -> Vec<Extension> {
        self.inner.0.lock().unwrap().extensions.clone()
    }

    /// The registrations refused so far, with the reason.
    pub fn refused_registrations(&self) -> Vec<String> {
        self.inner.0.lock().unwrap().refused_registrations.clone()
    }

    /// Ends the execution environment as Lambda does: SIGTERM to the runtime when an
    /// extension registered (Lambda's rule), then SIGKILL if the process is still there
    /// `limit` later (Lambda's limit is 500 ms for internal extensions only; tests may
    /// allow more on a loaded machine); without an extension, SIGKILL at once.
    pub fn shut_down(&self, function: &mut Function, limit: Duration) -> Ended {
        let sigterm = !self.extensions().is_empty();
        let started = Instant::now();
        let signal = if sigterm {
            libc::SIGTERM
        } else {
            libc::SIGKILL
        };
        // SAFETY: signalling our own child process by its pid.
        let rc = unsafe { libc::kill(function.child.id() as libc::pid_t, signal) };
        assert_eq!(rc, 0, "signalling the function");
        let mut killed = !sigterm;
        let status = loop {
            if let Some(status) = function.child.try_wait().unwrap() {
                break status;
            }
            if !killed && started.elapsed() >= limit {
                let _ = function.child.kill();
                killed = true;
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let took = started.elapsed();
        let (lock, cv) = &*self.inner;
        lock.lock().unwrap().gone = true;
        cv.notify_all();
        Ended {
            sigterm,
            killed,
            status,
            took,
        }
    }
}

/// How [`RuntimeApi::shut_down`] ended the function.
#[derive(Debug)]
pub struct Ended {
    /// SIGTERM was sent (an extension had registered).
    pub sigterm: bool,
    /// SIGKILL was sent: no extension, or the process outlived the limit.
    pub killed: bool,
    /// How the process ended.
    pub status: std::process::ExitStatus,
    /// From the first signal to the process's end.
    pub took: Duration,
}

impl Ended {
    /// The process exited on its own, with `code`, after SIGTERM.
    pub fn exited_by_itself(&self, code: i32) -> bool {
        self.sigterm && !self.killed && self.status.code() == Some(code)
    }
}

fn json_response(status: &str, headers: &str, body: &serde_json::Value) -> String {
    let body = body.to_string();
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\n{headers}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

fn extension_error(status: &str, error_type: &str, message: &str) -> String {
    json_response(
        status,
        "",
        &serde_json::json!({"errorType": error_type, "errorMessage": message}),
    )
}

/// `extension/register`, with Lambda's rules for internal extensions.
fn register(
    shared: &(Mutex<Inner>, Condvar),
    headers: &HashMap<String, String>,
    body: &serde_json::Value,
) -> String {
    let (lock, cv) = shared;
    let mut inner = lock.lock().unwrap();
    let refuse = |inner: &mut Inner, status: &str, error_type: &str, why: String| {
        inner.refused_registrations.push(why.clone());
        extension_error(status, error_type, &why)
    };
    let Some(name) = headers
        .get("lambda-extension-name")
        .filter(|n| !n.is_empty())
    else {
        return refuse(
            &mut inner,
            "400 Bad Request",
            "InvalidRequest",
            "missing Lambda-Extension-Name".into(),
        );
    };
    if inner.first_next.is_some() {
        return refuse(
            &mut inner,
            "403 Forbidden",
            "Extension.InvalidState",
            format!("{name}: registration after the Init phase ended"),
        );
    }
    if inner.extensions.iter().any(|e| &e.name == name) {
        return refuse(
            &mut inner,
            "409 Conflict",
            "Extension.AlreadyRegistered",
            format!("{name}: already registered"),
        );
    }
    let events: Vec<String> = match body.get("events") {
        None | Some(serde_json::Value::Null) => Vec::new(),
        Some(serde_json::Value::Array(events)) => events
            .iter()
            .map(|e| e.as_str().unwrap_or_default().to_owned())
            .collect(),
        Some(other) => {
            return refuse(
                &mut inner,
                "400 Bad Request",
                "InvalidRequest",
                format!("{name}: events is not an array: {other}"),
            );
        }
    };
    if events.iter().any(|e| e == "SHUTDOWN") {
        return refuse(
            &mut inner,
            "403 Forbidden",
            "Extension.InvalidEventType",
            format!("{name}: an internal extension may not register for SHUTDOWN"),
        );
    }
    if !events.is_empty() {
        return refuse(
            &mut inner,
            "400 Bad Request",
            "InvalidRequest",
            format!("{name}: this emulator delivers no events to extensions ({events:?})"),
        );
    }
    let id = format!("ext-{}-{}", std::process::id(), inner.extensions.len() + 1);
    inner.extensions.push(Extension {
        name: name.clone(),
        id: id.clone(),
        events,
        ready: false,
    });
    cv.notify_all();
    json_response(
        "200 OK",
        &format!("Lambda-Extension-Identifier: {id}\r\n"),
        &serde_json::json!({
            "functionName": "sluice-test", "functionVersion": "$LATEST", "handler": "bootstrap"
        }),
    )
}

/// `extension/event/next`: marks the extension's init done and holds the call (an
/// internal extension without events is never sent one) until the environment is gone.
/// `None`: the call ends without an answer.
fn extension_next(
    shared: &(Mutex<Inner>, Condvar),
    headers: &HashMap<String, String>,
) -> Option<String> {
    let (lock, cv) = shared;
    let mut inner = lock.lock().unwrap();
    let id = headers
        .get("lambda-extension-identifier")
        .cloned()
        .unwrap_or_default();
    let Some(extension) = inner.extensions.iter_mut().find(|e| e.id == id) else {
        return Some(extension_error(
            "403 Forbidden",
            "Extension.UnknownExtensionIdentifier",
            &format!("unknown Lambda-Extension-Identifier {id:?}"),
        ));
    };
    extension.ready = true;
    cv.notify_all();
    while !inner.gone {
        inner = cv.wait(inner).unwrap();
    }
    None
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
        let mut headers = HashMap::new();
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                let (name, value) = (name.trim().to_ascii_lowercase(), value.trim().to_owned());
                if name == "content-length" {
                    length = value.parse().unwrap_or(0);
                }
                headers.insert(name, value);
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let body_json = serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
        let (lock, cv) = shared;
        let response = if method == "POST" && path == "/2020-01-01/extension/register" {
            register(shared, &headers, &body_json)
        } else if method == "GET" && path == "/2020-01-01/extension/event/next" {
            match extension_next(shared, &headers) {
                Some(answer) => answer,
                None => return,
            }
        } else if method == "GET" && path.ends_with("/runtime/invocation/next") {
            let mut inner = lock.lock().unwrap();
            inner.first_next.get_or_insert_with(Instant::now);
            // The Init phase ends once every registered extension has called its `next`.
            let (id, payload, deadline) = loop {
                if inner.extensions.iter().all(|e| e.ready)
                    && let Some(item) = inner.queue.pop_front()
                {
                    break item;
                }
                if inner.gone {
                    return;
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
    stderr: std::sync::mpsc::Receiver<String>,
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
            .stderr(Stdio::piped());
        for (k, v) in extra_env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().unwrap();
        let stdout = lines_of(child.stdout.take().unwrap());
        let stderr = lines_of(child.stderr.take().unwrap());
        Function {
            child,
            stdout,
            stderr,
        }
    }

    /// Waits until the function logs a line containing `needle` (its log is JSON lines on
    /// stderr); false when `timeout` passes first.
    pub fn wait_for_log(&self, needle: &str, timeout: Duration) -> bool {
        let until = Instant::now() + timeout;
        while let Some(left) = until.checked_duration_since(Instant::now()) {
            match self.stderr.recv_timeout(left) {
                Ok(line) if line.contains(needle) => return true,
                Ok(_) => {}
                Err(_) => return false,
            }
        }
        false
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

/// The lines of `stream`, read on a thread.
fn lines_of(stream: impl Read + Send + 'static) -> std::sync::mpsc::Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    rx
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
