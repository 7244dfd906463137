//! Silent endpoints. [`BlackHole`]: a loopback listener that accepts every TCP
//! connection and never answers — each socket is kept open and what the client sends is
//! read and dropped, as a half-open firewall, a proxy whose backend is gone, or a frozen
//! host does; every engine's connection to it completes the TCP connect and then hears
//! nothing. [`Unanswered`]: a loopback port whose TCP connect never completes, as behind
//! a firewall that drops packets.

use std::io::Read;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

#[derive(Default)]
struct Shared {
    stop: AtomicBool,
    accepted: AtomicUsize,
    open: Mutex<Vec<TcpStream>>,
}

/// The listener; it stops (and closes every socket it holds) when dropped.
pub struct BlackHole {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl BlackHole {
    /// Listens on a fresh loopback port.
    pub fn start() -> BlackHole {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the black hole");
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared::default());
        let s = shared.clone();
        let accept = std::thread::spawn(move || {
            for client in listener.incoming() {
                if s.stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(client) = client else { continue };
                s.accepted.fetch_add(1, Ordering::SeqCst);
                s.open.lock().unwrap().push(client.try_clone().unwrap());
                drain(client);
            }
        });
        BlackHole {
            addr,
            shared,
            accept: Some(accept),
        }
    }

    /// `host:port` of the listener.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `url` (any scheme) with its host and port replaced by the black hole's.
    pub fn url(&self, url: &str) -> String {
        let mut parsed = url::Url::parse(url).expect("a URL");
        parsed.set_host(Some("127.0.0.1")).unwrap();
        parsed.set_port(Some(self.addr.port())).unwrap();
        parsed.to_string()
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.shared.accepted.load(Ordering::SeqCst)
    }
}

impl Drop for BlackHole {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr);
        for stream in self.shared.open.lock().unwrap().drain(..) {
            let _ = stream.shutdown(Shutdown::Both);
        }
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
    }
}

/// Reads and drops what `client` sends, on a thread, until it closes.
fn drain(mut client: TcpStream) {
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while matches!(client.read(&mut buf), Ok(n) if n > 0) {}
    });
}

/// A listener that never accepts, its accept queue filled: Linux drops every further SYN
/// to it, so a TCP connect stays unanswered (`SYN_SENT`) until the client gives up.
pub struct Unanswered {
    addr: SocketAddr,
    _listener: socket2::Socket,
    _queued: Vec<socket2::Socket>,
}

impl Unanswered {
    pub fn start() -> Unanswered {
        use socket2::{Domain, Socket, Type};
        let listener = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
        listener
            .bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into())
            .unwrap();
        listener.listen(0).unwrap();
        let addr = listener.local_addr().unwrap().as_socket().unwrap();
        // A backlog of 0 holds one connection; two more make sure the queue is full
        // whatever the kernel rounds it to.
        let queued = (0..3)
            .map(|_| {
                let socket = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
                socket.set_nonblocking(true).unwrap();
                let _ = socket.connect(&addr.into());
                socket
            })
            .collect();
        std::thread::sleep(std::time::Duration::from_millis(200));
        Unanswered {
            addr,
            _listener: listener,
            _queued: queued,
        }
    }

    /// `url` (any scheme) with its host and port replaced by the listener's.
    pub fn url(&self, url: &str) -> String {
        let mut parsed = url::Url::parse(url).expect("a URL");
        parsed.set_host(Some("127.0.0.1")).unwrap();
        parsed.set_port(Some(self.addr.port())).unwrap();
        parsed.to_string()
    }
}
