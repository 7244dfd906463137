//! `destination: { type: stdout }` (and `sluice drain --stdout`): every finished part is
//! emitted as NDJSON lines on the process's stdout ([`super::ndjson`]) instead of being
//! stored.
//!
//! Guarantees, within the durable order (output durable → fenced checkpoint → ack):
//!
//! * [`Destination::put_part`] returns only after every line of the part was written and
//!   stdout flushed — and, when stdout is a regular file, fsynced; when it is a pipe
//!   (Linux), only after the reader has taken every byte out of the pipe. So the
//!   checkpoint never covers a change still sitting in a buffer;
//! * a reader that went away (EPIPE, or a pipe closed with bytes unread) fails the part
//!   with `SLUICE_DESTINATION_STDOUT_CLOSED`: the checkpoint does not move and the next
//!   run emits those changes again (at-least-once, as with parts). Lines a reader took out
//!   of the pipe and then lost (it crashed before acting on them) are not seen here;
//! * parts are emitted whole and one at a time, in the order the drain makes them durable;
//! * nothing else is kept: markers (manifests, `_SUCCESS`, shape records) are dropped,
//!   [`Destination::get`] finds nothing and [`Destination::list`] lists nothing. The state
//!   store still holds lease, checkpoint and run records.

use std::io::Write;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use super::Destination;
use crate::config::{Config, DestinationConfig};
use crate::error::{Code, Error, Result};

/// Rows converted and written at a time.
const LINES_PER_WRITE: usize = 1024;

/// Writes parts as NDJSON to stdout.
#[derive(Debug, Default)]
pub struct StdoutDestination;

#[async_trait]
impl Destination for StdoutDestination {
    fn describe(&self) -> String {
        "stdout (NDJSON)".to_owned()
    }

    async fn put_part(&self, key: &str, local: &Path) -> Result<()> {
        let path: PathBuf = local.to_owned();
        let written = tokio::task::spawn_blocking(move || emit(&path))
            .await
            .map_err(|e| {
                Error::new(Code::Internal, "the stdout writer thread stopped").source(e)
            })??;
        wait_until_read().await?;
        tracing::info!(
            key,
            lines = written,
            "part emitted on stdout as NDJSON and read"
        );
        Ok(())
    }

    async fn put_marker(&self, _key: &str, _body: &[u8]) -> Result<()> {
        Ok(())
    }

    async fn get(&self, _key: &str) -> Result<Option<Vec<u8>>> {
        Ok(None)
    }

    async fn list(&self, _prefix: &str) -> Result<Vec<String>> {
        Ok(Vec::new())
    }

    async fn delete(&self, _key: &str) -> Result<()> {
        Ok(())
    }
}

/// True when the job writes NDJSON to stdout.
pub fn is_stdout(config: &Config) -> bool {
    matches!(config.destination, DestinationConfig::Stdout {})
}

/// Refuses a baseline (snapshot parts) for a job whose destination is stdout.
pub fn refuse_baseline(config: &Config, what: &str) -> Result<()> {
    if !is_stdout(config) {
        return Ok(());
    }
    Err(Error::new(
        Code::DestinationStdoutBaseline,
        format!("{what} asks for a baseline, but job {}'s destination is stdout, which carries changes only", config.job),
    )
    .hint("take the baseline with a local or S3 destination for the same job and state (`sluice baseline --config <that config>`), then drain with --stdout; or set `initial: none` to stream changes from now on"))
}

/// Writes every row of the Parquet part at `path` as NDJSON to stdout, flushes it (and
/// fsyncs it when stdout is a regular file); returns the number of lines.
fn emit(path: &Path) -> Result<u64> {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let lines = encode_part(path, |buf| out.write_all(buf).map_err(write_error))?;
    out.flush().map_err(write_error)?;
    sync_if_file()?;
    Ok(lines)
}

/// Reads the change part at `path` and hands its NDJSON to `sink` one batch's lines at a
/// time; returns the number of lines (rows).
pub fn encode_part(path: &Path, mut sink: impl FnMut(&[u8]) -> Result<()>) -> Result<u64> {
    let read_error = |e: parquet::errors::ParquetError| {
        Error::new(
            Code::OutputWrite,
            format!("reading back part {}", path.display()),
        )
        .source(e)
    };
    let file = std::fs::File::open(path).map_err(|e| {
        Error::new(
            Code::OutputWrite,
            format!("opening part {}", path.display()),
        )
        .source(e)
    })?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(read_error)?;
    let table = table_of(builder.metadata().file_metadata())?;
    let reader = builder.build().map_err(read_error)?;
    let mut rows = 0u64;
    let mut buf = Vec::new();
    for batch in reader {
        let batch = batch.map_err(|e| {
            Error::new(
                Code::OutputWrite,
                format!("reading back part {}", path.display()),
            )
            .source(e)
        })?;
        // A row group's lines can be several times its cells: hand them over in slices, so
        // memory holds one slice's lines, not the row group's.
        let mut offset = 0;
        while offset < batch.num_rows() {
            let len = LINES_PER_WRITE.min(batch.num_rows() - offset);
            buf.clear();
            super::ndjson::write_batch(&table, &batch.slice(offset, len), &mut buf)?;
            sink(&buf)?;
            offset += len;
        }
        rows += batch.num_rows() as u64;
    }
    Ok(rows)
}

/// The table name a part records in its `sluice.schema` metadata.
fn table_of(meta: &parquet::file::metadata::FileMetaData) -> Result<String> {
    meta.key_value_metadata()
        .into_iter()
        .flatten()
        .find(|kv| kv.key == crate::parts::part::SCHEMA_METADATA_KEY)
        .and_then(|kv| kv.value.as_deref())
        .and_then(|json| serde_json::from_str::<serde_json::Value>(json).ok())
        .and_then(|v| v["table"].as_str().map(str::to_owned))
        .ok_or_else(|| {
            Error::new(
                Code::Internal,
                "a part without its sluice.schema table name",
            )
        })
}

fn write_error(e: std::io::Error) -> Error {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        return closed().source(e);
    }
    Error::new(Code::OutputWrite, "writing NDJSON to stdout")
        .source(e)
        .hint("stdout could not be written; check where it is redirected (a full disk?)")
}

fn closed() -> Error {
    Error::new(
        Code::DestinationStdoutClosed,
        "the reader of stdout went away before it read every change of the batch; the checkpoint did not move",
    )
    .hint("keep the reading process running until sluice exits (e.g. not `| head`); the next run emits the changes after the checkpoint again, so the reader must tolerate lines it has seen (dedupe on pos, seq)")
}

/// fsyncs stdout when it is a regular file (a redirect), so the lines are on disk before
/// the checkpoint moves. Pipes, terminals and sockets have nothing to sync.
fn sync_if_file() -> Result<()> {
    let kind = file_kind();
    if kind != Some(libc::S_IFREG) {
        return Ok(());
    }
    // SAFETY: fsync on the process's own stdout descriptor; no memory is passed.
    if unsafe { libc::fsync(libc::STDOUT_FILENO) } != 0 {
        return Err(
            Error::new(Code::OutputWrite, "fsync of stdout (a file) failed")
                .source(std::io::Error::last_os_error()),
        );
    }
    Ok(())
}

/// The `S_IFMT` bits of stdout, `None` when it cannot be examined.
fn file_kind() -> Option<libc::mode_t> {
    // SAFETY: fstat writes into the zeroed stat buffer we own.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(libc::STDOUT_FILENO, &mut stat) } != 0 {
        return None;
    }
    Some(stat.st_mode & libc::S_IFMT)
}

/// When stdout is a pipe: waits until the reader has taken every byte out of it, failing
/// with `SLUICE_DESTINATION_STDOUT_CLOSED` when the reader closes its end first. Awaits
/// (never blocks the runtime), so a stop request can abandon it.
async fn wait_until_read() -> Result<()> {
    if file_kind() != Some(libc::S_IFIFO) {
        return Ok(());
    }
    let mut pause = std::time::Duration::from_millis(1);
    loop {
        match pipe_state() {
            PipeState::Empty | PipeState::Unknown => return Ok(()),
            PipeState::Closed => return Err(closed()),
            PipeState::Unread => {}
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(std::time::Duration::from_millis(50));
    }
}

#[derive(Debug, PartialEq, Eq)]
enum PipeState {
    /// Every byte was read.
    Empty,
    /// Bytes are waiting for the reader.
    Unread,
    /// The read end is closed.
    Closed,
    /// This platform cannot tell (only Linux reports a pipe's unread bytes to the writer).
    Unknown,
}

#[cfg(target_os = "linux")]
fn pipe_state() -> PipeState {
    let mut poll = libc::pollfd {
        fd: libc::STDOUT_FILENO,
        events: 0,
        revents: 0,
    };
    // SAFETY: one pollfd we own, no wait.
    if unsafe { libc::poll(&mut poll, 1, 0) } > 0
        && poll.revents & (libc::POLLERR | libc::POLLHUP) != 0
    {
        return PipeState::Closed;
    }
    let mut unread: libc::c_int = 0;
    // SAFETY: FIONREAD writes one c_int we own.
    if unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::FIONREAD, &mut unread) } != 0 {
        return PipeState::Unknown;
    }
    if unread > 0 {
        PipeState::Unread
    } else {
        PipeState::Empty
    }
}

#[cfg(not(target_os = "linux"))]
fn pipe_state() -> PipeState {
    PipeState::Unknown
}
