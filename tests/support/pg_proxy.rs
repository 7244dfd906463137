//! A loopback TCP proxy between `sluice` and PostgreSQL, so a test can cut the source's
//! connections mid-run (or refuse new ones) without touching the shared server.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

#[derive(Default)]
struct Shared {
    refuse: AtomicBool,
    stop: AtomicBool,
    accepted: AtomicUsize,
    open: Mutex<Vec<TcpStream>>,
}

/// The proxy; it stops (and closes everything) when dropped.
pub struct PgProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl PgProxy {
    /// Proxies a fresh loopback port to the host and port of the PostgreSQL `url`.
    pub fn start(url: &str) -> PgProxy {
        let parsed = url::Url::parse(url).expect("service URL");
        let upstream = format!(
            "{}:{}",
            parsed.host_str().expect("host"),
            parsed.port().unwrap_or(5432)
        );
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared::default());
        let s = shared.clone();
        let accept = std::thread::spawn(move || {
            for client in listener.incoming() {
                if s.stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(client) = client else { continue };
                if s.refuse.load(Ordering::SeqCst) {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                }
                let Ok(server) = TcpStream::connect(&upstream) else {
                    continue;
                };
                s.accepted.fetch_add(1, Ordering::SeqCst);
                {
                    let mut open = s.open.lock().unwrap();
                    open.push(client.try_clone().unwrap());
                    open.push(server.try_clone().unwrap());
                }
                pump(client.try_clone().unwrap(), server.try_clone().unwrap());
                pump(server, client);
            }
        });
        PgProxy {
            addr,
            shared,
            accept: Some(accept),
        }
    }

    /// `url` with its host and port replaced by the proxy's.
    pub fn url(&self, url: &str) -> String {
        let mut parsed = url::Url::parse(url).unwrap();
        parsed.set_host(Some("127.0.0.1")).unwrap();
        parsed.set_port(Some(self.addr.port())).unwrap();
        parsed.to_string()
    }

    /// Closes every connection open through the proxy, both directions.
    pub fn cut(&self) {
        for stream in self.shared.open.lock().unwrap().drain(..) {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }

    /// Refuses (accepts and closes at once) new connections while `on`.
    pub fn refuse(&self, on: bool) {
        self.shared.refuse.store(on, Ordering::SeqCst);
    }

    /// Connections proxied so far.
    pub fn accepted(&self) -> usize {
        self.shared.accepted.load(Ordering::SeqCst)
    }
}

impl Drop for PgProxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr);
        self.cut();
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
    }
}

/// Copies `from` → `to` on a thread until either side closes, then closes both.
fn pump(mut from: TcpStream, mut to: TcpStream) {
    std::thread::spawn(move || {
        let mut buf = [0u8; 16 * 1024];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if to.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            }
        }
        let _ = from.shutdown(Shutdown::Both);
        let _ = to.shutdown(Shutdown::Both);
    });
}
