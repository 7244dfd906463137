//! A stream that counts the bytes its peer sent, so the phase of a protocol driver's
//! handshake can be told from outside it: nothing received after the startup means the
//! server never answered; something received means the login was under way.
//!
//! Guarantee: reads and writes pass through unchanged; the count is one relaxed atomic
//! add per read, shared with the [`Progress`] the establishment holds.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// How far an establishment got, as the stream and the TLS wrapper saw it.
#[derive(Debug, Default)]
pub struct Progress {
    received: AtomicU64,
    stage: AtomicU8,
    /// Bytes received when the current stage began.
    received_at_stage: AtomicU64,
}

/// Where a connection is between its TCP connect and its first statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Stage {
    /// TLS asked for, no answer yet (PostgreSQL's `SSLRequest`).
    TlsRequest = 0,
    /// The TLS handshake runs.
    TlsHandshake = 1,
    /// The protocol's startup / login exchange runs.
    Login = 2,
    /// Logged in; the session's setup statements run.
    Setup = 3,
}

impl Progress {
    /// A tracker at `stage`.
    pub fn starting_at(stage: Stage) -> Arc<Progress> {
        let progress = Progress::default();
        progress.stage.store(stage as u8, Ordering::Relaxed);
        Arc::new(progress)
    }

    /// Marks the start of `stage`.
    pub fn enter(&self, stage: Stage) {
        self.received_at_stage
            .store(self.received.load(Ordering::Relaxed), Ordering::Relaxed);
        self.stage.store(stage as u8, Ordering::Relaxed);
    }

    /// The current stage, and whether the peer sent anything since it began.
    pub fn now(&self) -> (Stage, bool) {
        let stage = match self.stage.load(Ordering::Relaxed) {
            0 => Stage::TlsRequest,
            1 => Stage::TlsHandshake,
            2 => Stage::Login,
            _ => Stage::Setup,
        };
        let answered =
            self.received.load(Ordering::Relaxed) > self.received_at_stage.load(Ordering::Relaxed);
        (stage, answered)
    }
}

/// `S`, counting the bytes read from it into a [`Progress`].
pub struct Watched<S> {
    inner: S,
    progress: Arc<Progress>,
}

impl<S> Watched<S> {
    pub fn new(inner: S, progress: Arc<Progress>) -> Watched<S> {
        Watched { inner, progress }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        let read = buf.filled().len() - before;
        if read > 0 {
            self.progress
                .received
                .fetch_add(read as u64, Ordering::Relaxed);
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[test]
    fn counts_what_the_peer_sent_per_stage() {
        super::super::tests::rt().block_on(async {
            let (client, mut server) = tokio::io::duplex(64);
            let progress = Progress::starting_at(Stage::Login);
            let mut watched = Watched::new(client, progress.clone());
            watched.write_all(b"startup").await.unwrap();
            assert_eq!(
                progress.now(),
                (Stage::Login, false),
                "writes are not answers"
            );
            server.write_all(b"R").await.unwrap();
            let mut one = [0u8; 1];
            watched.read_exact(&mut one).await.unwrap();
            assert_eq!(progress.now(), (Stage::Login, true));
            progress.enter(Stage::Setup);
            assert_eq!(progress.now(), (Stage::Setup, false));
        });
    }
}
