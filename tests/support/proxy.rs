//! A severable TCP proxy: tests route an endpoint through it and cut the connection at
//! will (moto keeps its state in memory, so restarting it is not an option).
//!
//! While severed, every open connection is shut down and new connections are accepted
//! and closed at once — the client sees a broken connection, as when a network path or
//! the service fails. While stalled, connections stay open but nothing is forwarded in
//! either direction — the client sees silence, as when a path drops packets without a
//! reset. `restore` lets traffic through again.
//!
//! A *lost response* ([`Proxy::drop_response_to`], [`Proxy::drop_next_response`]) is
//! armed once: the next request that contains a given text is forwarded to the service,
//! which carries it out, but its response is swallowed and the connection closed — the
//! client sees a connection broken after sending, as when an answer is lost on the way
//! back, and its SDK sends the request again.
//!
//! A *stall at a request* ([`Proxy::stall_at`]) is armed once: the proxy stalls, as
//! [`Proxy::stall`] does, when a request containing a given text arrives, holding that
//! request — so a test stops a client at an exact step instead of racing it.
//!
//! An *answered request* ([`Proxy::answer_to`]) is armed once too: the next request that
//! contains a given text is read whole and never forwarded; the proxy answers it with the
//! given HTTP response and closes the connection — the client sees the service refuse
//! that one request (e.g. Glue's `ConcurrentModificationException`, which moto never
//! raises).

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;

struct Shared {
    severed: AtomicBool,
    stalled: AtomicBool,
    stopped: AtomicBool,
    open: Mutex<Vec<TcpStream>>,
    /// Armed lost response: the text a request must contain.
    lose_response_to: Mutex<Option<Vec<u8>>>,
    /// Responses swallowed so far.
    lost: AtomicUsize,
    /// Armed answered request: the text a request must contain, and the response.
    answer_to: Mutex<Option<(Vec<u8>, Vec<u8>)>>,
    /// Requests answered so far.
    answered: AtomicUsize,
    /// Armed stall: the text a request must contain.
    stall_at: Mutex<Option<Vec<u8>>>,
}

/// Which way a pipe copies; the connection's flag marks its next response as lost.
#[derive(Clone)]
enum Way {
    Up(Arc<AtomicBool>),
    Down(Arc<AtomicBool>),
}

/// A proxy from a local port to `upstream`; stops when dropped.
pub struct Proxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

impl Proxy {
    /// Starts forwarding a fresh local port to `upstream` (`host:port`).
    pub fn start(upstream: &str) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind proxy");
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared {
            severed: AtomicBool::new(false),
            stalled: AtomicBool::new(false),
            stopped: AtomicBool::new(false),
            open: Mutex::new(Vec::new()),
            lose_response_to: Mutex::new(None),
            lost: AtomicUsize::new(0),
            answer_to: Mutex::new(None),
            answered: AtomicUsize::new(0),
            stall_at: Mutex::new(None),
        });
        let upstream = upstream.to_owned();
        let accept_shared = shared.clone();
        thread::spawn(move || {
            for client in listener.incoming() {
                if accept_shared.stopped.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(client) = client else { continue };
                if accept_shared.severed.load(Ordering::SeqCst) {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                }
                let Ok(server) = TcpStream::connect(&upstream) else {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                {
                    let mut open = accept_shared.open.lock().unwrap();
                    open.push(client.try_clone().unwrap());
                    open.push(server.try_clone().unwrap());
                }
                let doomed = Arc::new(AtomicBool::new(false));
                pipe(
                    client.try_clone().unwrap(),
                    server.try_clone().unwrap(),
                    accept_shared.clone(),
                    Way::Up(doomed.clone()),
                );
                pipe(server, client, accept_shared.clone(), Way::Down(doomed));
            }
        });
        Proxy { addr, shared }
    }

    /// The proxy's URL (`http://127.0.0.1:<port>`).
    /// `url` with its host and port replaced by the proxy's.
    pub fn url_through(&self, url: &str) -> String {
        let port = self
            .url()
            .rsplit(':')
            .next()
            .unwrap()
            .parse::<u16>()
            .unwrap();
        let mut parsed = url::Url::parse(url).unwrap();
        parsed.set_host(Some("127.0.0.1")).unwrap();
        parsed.set_port(Some(port)).unwrap();
        parsed.to_string()
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Breaks every open connection and refuses new ones until [`Proxy::restore`].
    pub fn sever(&self) {
        self.shared.severed.store(true, Ordering::SeqCst);
        for stream in self.shared.open.lock().unwrap().drain(..) {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }

    /// Holds every byte in both directions, connections left open, until
    /// [`Proxy::restore`] (or until the proxy is dropped).
    pub fn stall(&self) {
        self.shared.stalled.store(true, Ordering::SeqCst);
    }

    /// Arms one stall: the next request containing `needle` is held, and the proxy
    /// stalls from then on, until [`Proxy::restore`].
    pub fn stall_at(&self, needle: &str) {
        *self.shared.stall_at.lock().unwrap() = Some(needle.as_bytes().to_vec());
    }

    /// True while the proxy holds every byte (after [`Proxy::stall`] or an armed
    /// [`Proxy::stall_at`] was hit).
    pub fn is_stalled(&self) -> bool {
        self.shared.stalled.load(Ordering::SeqCst)
    }

    /// Arms one lost response: the next request containing `needle` reaches the service,
    /// its response is dropped and the connection closed.
    pub fn drop_response_to(&self, needle: &str) {
        *self.shared.lose_response_to.lock().unwrap() = Some(needle.as_bytes().to_vec());
    }

    /// Arms one lost response for the next request, whatever it is.
    pub fn drop_next_response(&self) {
        self.drop_response_to("");
    }

    /// How many responses were dropped so far.
    pub fn dropped(&self) -> usize {
        self.shared.lost.load(Ordering::SeqCst)
    }

    /// Arms one answered request: the next request containing `needle` is not forwarded
    /// but answered with `status` and the JSON `body` (an AWS JSON-protocol error when the
    /// body holds `__type`), and its connection closed.
    pub fn answer_to(&self, needle: &str, status: u16, body: &str) {
        let response = format!(
            "HTTP/1.1 {status} Refused\r\nContent-Type: application/x-amz-json-1.1\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        *self.shared.answer_to.lock().unwrap() =
            Some((needle.as_bytes().to_vec(), response.into_bytes()));
    }

    /// How many requests were answered by the proxy so far.
    pub fn answered(&self) -> usize {
        self.shared.answered.load(Ordering::SeqCst)
    }

    /// Lets connections and traffic through again.
    pub fn restore(&self) {
        self.shared.severed.store(false, Ordering::SeqCst);
        self.shared.stalled.store(false, Ordering::SeqCst);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.sever();
        self.shared.stopped.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the stop flag.
        let _ = TcpStream::connect(self.addr);
    }
}

/// Copies `from` to `to` on a thread until either side closes, holding what it read while
/// the proxy is stalled. Upstream, a request matching the armed lost response marks its
/// connection; downstream, the response on a marked connection is dropped and both sides
/// are closed.
fn pipe(mut from: TcpStream, mut to: TcpStream, shared: Arc<Shared>, way: Way) {
    thread::spawn(move || {
        let mut buf = [0u8; 16 * 1024];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if let Way::Up(_) = &way {
                        let mut armed = shared.stall_at.lock().unwrap();
                        if armed.as_deref().is_some_and(|needle| {
                            buf[..n].windows(needle.len()).any(|w| w == needle)
                        }) {
                            *armed = None;
                            shared.stalled.store(true, Ordering::SeqCst);
                        }
                    }
                    while shared.stalled.load(Ordering::SeqCst)
                        && !shared.stopped.load(Ordering::SeqCst)
                    {
                        thread::sleep(std::time::Duration::from_millis(20));
                    }
                    if let Way::Up(_) = &way
                        && let Some(response) = answer(&shared, &buf[..n])
                    {
                        // Read the rest of the request, so the client is not cut off
                        // while it still sends, then answer in the service's place.
                        read_whole_request(&mut from, &buf[..n]);
                        // Counted before the client can read the answer and look.
                        shared.answered.fetch_add(1, Ordering::SeqCst);
                        let _ = from.write_all(&response);
                        break;
                    }
                    match &way {
                        Way::Up(doomed) => {
                            let mut armed = shared.lose_response_to.lock().unwrap();
                            let hit = armed.as_deref().is_some_and(|needle| {
                                needle.is_empty()
                                    || buf[..n].windows(needle.len()).any(|w| w == needle)
                            });
                            if hit {
                                *armed = None;
                                doomed.store(true, Ordering::SeqCst);
                            }
                        }
                        Way::Down(doomed) if doomed.load(Ordering::SeqCst) => {
                            shared.lost.fetch_add(1, Ordering::SeqCst);
                            break;
                        }
                        Way::Down(_) => {}
                    }
                    if to.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            }
        }
        let _ = to.shutdown(Shutdown::Both);
        let _ = from.shutdown(Shutdown::Both);
    });
}

/// The armed answer when `chunk` (the start of a request) contains its text; disarms it.
fn answer(shared: &Shared, chunk: &[u8]) -> Option<Vec<u8>> {
    let mut armed = shared.answer_to.lock().unwrap();
    let hit = armed
        .as_ref()
        .is_some_and(|(needle, _)| chunk.windows(needle.len()).any(|w| w == needle.as_slice()));
    if hit {
        armed.take().map(|(_, response)| response)
    } else {
        None
    }
}

/// Reads from `from` until the request begun by `first` is whole (its headers and
/// `Content-Length` bytes of body), or the client stops sending.
fn read_whole_request(from: &mut TcpStream, first: &[u8]) {
    let mut seen = first.to_vec();
    let _ = from.set_read_timeout(Some(std::time::Duration::from_secs(5)));
    let mut buf = [0u8; 16 * 1024];
    loop {
        if let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
            let headers = String::from_utf8_lossy(&seen[..end]).to_ascii_lowercase();
            let length = headers
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            if seen.len() >= end + 4 + length {
                return;
            }
        }
        match from.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => seen.extend_from_slice(&buf[..n]),
        }
    }
}

/// The `host:port` a PostgreSQL `url` connects to, for [`Proxy::start`].
pub fn upstream_of(url: &str) -> String {
    let parsed = url::Url::parse(url).unwrap();
    format!(
        "{}:{}",
        parsed.host_str().unwrap(),
        parsed.port().unwrap_or(5432)
    )
}
