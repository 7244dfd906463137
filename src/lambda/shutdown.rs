//! Graceful stop on Lambda: what makes Lambda send SIGTERM, and what the function does
//! with it.
//!
//! Lambda signals the runtime before it ends an execution environment (a spin-down, or
//! the reset after an invocation's timeout) only when the function has a registered
//! extension; then it allows 500 ms before SIGKILL when the only extensions are internal
//! ones. So the function registers one internal extension through the Extensions API
//! ([`register_extension`]) during its Init phase, subscribed to no event (internal
//! extensions may not subscribe to `SHUTDOWN`), and keeps that extension's
//! `event/next` call open — the call that tells Lambda the extension's init is done, and
//! that never returns for an extension without events. It lives in the function's own
//! process: no Lambda layer, no second binary.
//!
//! [`Shutdown`] owns SIGTERM and SIGINT in the Lambda face (the CLI's
//! [`StopRequest::on_signals`] is never installed there), and knows whether an
//! invocation is in flight: from the moment the runtime hands the handler an event until
//! its answer has been posted to the Runtime API ([`Shutdown::layer`] wraps the whole
//! invocation, posting included). Guarantees:
//!
//! * a signal between invocations ends the process at once (exit 0): nothing is running,
//!   nothing holds a lease;
//! * a signal during an invocation asks its [`StopRequest`]: a drain stops at its next
//!   transaction or page boundary (checkpoint durable, lease released, `partial`); work
//!   that reaches no boundary within [`GRACE`] is abandoned where it is — safe at every
//!   await by the durable order — and the handler answers `SLUICE_RUN_INTERRUPTED` at
//!   most [`RELEASE_ALLOWANCE`] later whatever the lease release does. [`GRACE`] +
//!   [`RELEASE_ALLOWANCE`] fit in Lambda's 500 ms. Either way the process exits (0) as
//!   soon as the invocation's answer is posted;
//! * once a stop is asked, no new work starts: an invocation that arrives anyway is
//!   answered `SLUICE_RUN_INTERRUPTED` without touching the lease or the source;
//! * a second signal abandons the in-flight work at once.
//!
//! When registration fails (a Runtime API without the Extensions API), the function
//! runs as before and says so in its log: Lambda then ends it without a signal, and a
//! cut-off run's lease expires on its own.

use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use lambda_runtime::LambdaInvocation;
use lambda_runtime::tower::{Layer, Service};
use lambda_runtime_api_client::body::Body;
use tokio::sync::watch;

use crate::drain::stop::StopRequest;

/// The internal extension's name (unique among a function's extensions).
pub const EXTENSION_NAME: &str = "sluice-graceful-stop";

/// How long after SIGTERM an invocation may take to reach a boundary before its work is
/// abandoned. Lambda sends SIGKILL 500 ms after SIGTERM to a function whose extensions
/// are all internal.
pub const GRACE: Duration = Duration::from_millis(300);

/// How long, after [`GRACE`], the handler waits for an abandoned run's lease release
/// before it answers anyway.
pub const RELEASE_ALLOWANCE: Duration = Duration::from_millis(150);

/// The Extensions API version this module speaks.
const EXTENSIONS_API: &str = "/2020-01-01/extension";

/// The Lambda face's stop request and its in-flight flag.
#[derive(Debug)]
pub struct Shutdown {
    stop: StopRequest,
    busy: watch::Sender<bool>,
}

impl Default for Shutdown {
    fn default() -> Self {
        Shutdown {
            stop: StopRequest::new(GRACE),
            busy: watch::Sender::new(false),
        }
    }
}

impl Shutdown {
    /// The stop request every invocation of this process runs under.
    pub fn stop(&self) -> &StopRequest {
        &self.stop
    }

    /// True while an invocation is in flight (its answer not yet posted). An event the
    /// runtime is still reading off the Runtime API counts as idle: Lambda never ends an
    /// environment while it hands out an event.
    pub fn busy(&self) -> bool {
        *self.busy.borrow()
    }

    /// Takes over SIGTERM and SIGINT for this process: the first ends the process at once
    /// when no invocation is in flight, or asks the stop and ends the process once the
    /// in-flight invocation's answer is posted; each later one asks again (abandoning the
    /// work at once).
    pub fn on_signals(self: &Arc<Self>) -> std::io::Result<()> {
        use tokio::signal::unix::{SignalKind, signal};
        let (asked_tx, mut asked_rx) = tokio::sync::mpsc::unbounded_channel();
        for kind in [SignalKind::terminate(), SignalKind::interrupt()] {
            let mut stream = signal(kind)?;
            let asked_tx = asked_tx.clone();
            tokio::spawn(async move {
                while stream.recv().await.is_some() {
                    if asked_tx.send(kind.as_raw_value()).is_err() {
                        return;
                    }
                }
            });
        }
        let shutdown = self.clone();
        tokio::spawn(async move {
            let Some(signal) = asked_rx.recv().await else {
                return;
            };
            if !shutdown.busy() {
                tracing::info!(
                    signal,
                    "stop requested between invocations; exiting at once"
                );
                std::process::exit(0);
            }
            tracing::warn!(
                signal,
                "stop requested during an invocation; stopping at the next transaction boundary, then exiting"
            );
            shutdown.stop.ask(signal);
            let mut busy = shutdown.busy.subscribe();
            loop {
                tokio::select! {
                    idle = busy.wait_for(|busy| !busy) => {
                        if idle.is_ok() {
                            tracing::info!("the invocation is answered; exiting");
                            std::process::exit(0);
                        }
                        return;
                    }
                    again = asked_rx.recv() => match again {
                        Some(signal) => shutdown.stop.ask(signal),
                        None => return,
                    },
                }
            }
        });
        Ok(())
    }

    /// A layer for the runtime's whole invocation service (event in → answer posted)
    /// that marks the invocation in flight while it runs.
    pub fn layer(self: &Arc<Self>) -> InFlightLayer {
        InFlightLayer(self.clone())
    }
}

/// Marks each invocation in flight; see [`Shutdown::layer`].
#[derive(Clone)]
pub struct InFlightLayer(Arc<Shutdown>);

impl<S> Layer<S> for InFlightLayer {
    type Service = InFlight<S>;

    fn layer(&self, inner: S) -> InFlight<S> {
        InFlight {
            inner,
            shutdown: self.0.clone(),
        }
    }
}

/// The service of [`InFlightLayer`].
pub struct InFlight<S> {
    inner: S,
    shutdown: Arc<Shutdown>,
}

impl<S> Service<LambdaInvocation> for InFlight<S>
where
    S: Service<LambdaInvocation>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = InFlightFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, invocation: LambdaInvocation) -> Self::Future {
        self.shutdown.busy.send_replace(true);
        InFlightFuture {
            inner: Box::pin(self.inner.call(invocation)),
            _busy: Busy(self.shutdown.clone()),
        }
    }
}

/// Clears the in-flight flag when dropped (the invocation answered, or given up).
struct Busy(Arc<Shutdown>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.busy.send_replace(false);
    }
}

/// One invocation in flight; the flag clears when it completes or is dropped.
pub struct InFlightFuture<F> {
    inner: std::pin::Pin<Box<F>>,
    _busy: Busy,
}

impl<F: Future> Future for InFlightFuture<F> {
    type Output = F::Output;

    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        self.inner.as_mut().poll(cx)
    }
}

/// Registers [`EXTENSION_NAME`] as an internal extension with no events, then keeps its
/// `event/next` call open in a task (the call completes the extension's Init; it never
/// returns for an extension with no events). Must run before the runtime's first
/// `invocation/next`, which ends the Init phase. Returns the extension's identifier.
pub async fn register_extension() -> Result<String, String> {
    let client = lambda_runtime_api_client::Client::builder()
        .build()
        .map_err(|e| format!("building the Runtime API client: {e}"))?;
    let request = lambda_runtime_api_client::build_request()
        .method("POST")
        .uri(format!("{EXTENSIONS_API}/register"))
        .header("Lambda-Extension-Name", EXTENSION_NAME)
        .header("Content-Type", "application/json")
        .body(Body::from(r#"{"events":[]}"#))
        .map_err(|e| format!("building the register request: {e}"))?;
    let response = client
        .call(request)
        .await
        .map_err(|e| format!("POST {EXTENSIONS_API}/register: {e}"))?;
    if !response.status().is_success() {
        return Err(format!(
            "POST {EXTENSIONS_API}/register answered {}",
            response.status()
        ));
    }
    let id = response
        .headers()
        .get("Lambda-Extension-Identifier")
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty())
        .ok_or_else(|| {
            format!("POST {EXTENSIONS_API}/register answered no Lambda-Extension-Identifier")
        })?
        .to_owned();
    let next = lambda_runtime_api_client::build_request()
        .method("GET")
        .uri(format!("{EXTENSIONS_API}/event/next"))
        .header("Lambda-Extension-Identifier", id.as_str())
        .body(Body::empty())
        .map_err(|e| format!("building the event/next request: {e}"))?;
    let waiting = client.call(next);
    tokio::spawn(async move {
        // Kept alive for as long as the call is open.
        let _client = client;
        match waiting.await {
            Ok(answer) => tracing::debug!(
                status = %answer.status(),
                "the extension's event/next returned; not asking again"
            ),
            Err(e) => tracing::debug!(error = %e, "the extension's event/next failed"),
        }
    });
    Ok(id)
}
