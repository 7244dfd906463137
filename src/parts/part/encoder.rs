//! A part's Parquet encoder: encodes and compresses the part's row groups, on a thread of
//! its own when the process has a second CPU, so the drain decodes the next batch while
//! the previous one is encoded.
//!
//! Guarantees:
//! * the file holds exactly the batches given to [`Encoder::write`], in that order, each
//!   as its own row group; [`Encoder::finish`] returns only after the footer is written
//!   and the file fsynced, so the durable order (part durable → checkpoint) is unchanged;
//! * a batch is encoded only after it passed its [`crate::parts::batch::BatchCheck`] (run
//!   here, on the encoding thread): one that fails stops the encoder with
//!   `SLUICE_OUTPUT_CHECKSUM`, and the file never gets a footer;
//! * at most one batch is handed over at a time (a rendezvous channel): while the thread
//!   encodes batch N, the caller builds batch N+1 and waits before handing it over, so
//!   memory holds at most the batch being built, the batch being encoded and its encoded
//!   row group ([`crate::spill::memory_budget`] counts three caps per writer);
//! * an encoding error surfaces at the next [`Encoder::write`] or at [`Encoder::finish`],
//!   with the same codes as inline encoding (`SLUICE_OUTPUT_WRITE`, `SLUICE_SPILL_FULL`);
//! * dropping an unfinished encoder stops its thread without writing a footer (the spill
//!   file is removed by its owner).
//!
//! With one CPU ([`std::thread::available_parallelism`]) the same calls encode inline.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{SyncSender, sync_channel};
use std::thread::JoinHandle;

use parquet::arrow::ArrowWriter;
use parquet::errors::ParquetError;

use crate::error::{Code, Error, Result};
use crate::parts::batch::FinishedBatch;
use crate::spill::errors::{io_error, volume_error};

/// Encodes one part.
pub struct Encoder {
    inner: Inner,
    path: PathBuf,
    spill_dir: PathBuf,
}

enum Inner {
    Inline(Box<ArrowWriter<File>>),
    Thread {
        tx: Option<SyncSender<(FinishedBatch, u64)>>,
        handle: Option<JoinHandle<Result<u64>>>,
        /// Bytes the thread's writer has written (updated after each row group).
        written: Arc<AtomicU64>,
        /// Size estimates of the batches handed over and not yet written.
        pending: Arc<AtomicU64>,
        abort: Arc<AtomicBool>,
    },
    /// The thread could not be started (the error is reported once).
    Failed(Option<Error>),
    Done,
}

/// Whether this process encodes on a second thread: only with at least two CPUs.
pub fn threaded() -> bool {
    std::thread::available_parallelism().is_ok_and(|n| n.get() >= 2)
}

impl Encoder {
    /// Starts encoding into `writer`'s file at `path` (in `spill_dir`, for error codes).
    pub fn start(writer: ArrowWriter<File>, path: PathBuf, spill_dir: PathBuf) -> Self {
        Self::start_with(writer, path, spill_dir, threaded())
    }

    fn start_with(
        writer: ArrowWriter<File>,
        path: PathBuf,
        spill_dir: PathBuf,
        on_thread: bool,
    ) -> Self {
        let inner = if on_thread {
            spawn(writer, path.clone(), spill_dir.clone())
        } else {
            Inner::Inline(Box::new(writer))
        };
        Encoder {
            inner,
            path,
            spill_dir,
        }
    }

    /// Verifies `batch` and encodes it as the next row group (inline), or hands it to the
    /// thread, which does the same, waiting until the thread has taken the previous one.
    /// `approx_bytes` is the batch's size estimate
    /// ([`crate::parts::batch::RowBatchBuilder::approx_bytes`]), counted in
    /// [`Encoder::bytes_written`] until the thread has written it.
    pub fn write(&mut self, batch: FinishedBatch, approx_bytes: u64) -> Result<()> {
        match &mut self.inner {
            Inner::Inline(writer) => encode(writer, &batch, &self.path, &self.spill_dir),
            Inner::Thread { tx, pending, .. } => {
                pending.fetch_add(approx_bytes, Ordering::Relaxed);
                let sent = tx
                    .as_ref()
                    .is_some_and(|tx| tx.send((batch, approx_bytes)).is_ok());
                if sent {
                    return Ok(());
                }
                // The thread stopped: its error says why.
                Err(self.join().err().unwrap_or_else(|| {
                    Error::new(Code::Internal, "the part encoder stopped without an error")
                }))
            }
            Inner::Failed(err) => Err(failed(err)),
            Inner::Done => Err(Error::new(Code::Internal, "part encoder used after finish")),
        }
    }

    /// Bytes written to the file so far, plus (threaded) the in-memory size of a batch
    /// still being encoded: an upper bound of the file's size without its footer.
    pub fn bytes_written(&self) -> u64 {
        match &self.inner {
            Inner::Inline(writer) => writer.bytes_written() as u64,
            Inner::Thread {
                written, pending, ..
            } => written.load(Ordering::Relaxed) + pending.load(Ordering::Relaxed),
            Inner::Failed(_) | Inner::Done => 0,
        }
    }

    /// Writes the footer, fsyncs the file, and returns its size in bytes.
    pub fn finish(&mut self) -> Result<u64> {
        match std::mem::replace(&mut self.inner, Inner::Done) {
            Inner::Inline(writer) => finish_writer(*writer, &self.path, &self.spill_dir),
            inner @ Inner::Thread { .. } => {
                self.inner = inner;
                self.join()
            }
            Inner::Failed(mut err) => Err(failed(&mut err)),
            Inner::Done => Err(Error::new(Code::Internal, "part encoder finished twice")),
        }
    }

    /// Closes the channel and waits for the thread's result.
    fn join(&mut self) -> Result<u64> {
        let Inner::Thread { tx, handle, .. } = &mut self.inner else {
            return Err(Error::new(Code::Internal, "no part encoder thread to join"));
        };
        drop(tx.take());
        let result = match handle.take() {
            Some(handle) => handle.join().unwrap_or_else(|_| {
                Err(Error::new(
                    Code::Internal,
                    format!("the encoder of {} panicked", self.path.display()),
                ))
            }),
            None => Err(Error::new(Code::Internal, "part encoder joined twice")),
        };
        self.inner = Inner::Done;
        result
    }
}

impl Drop for Encoder {
    fn drop(&mut self) {
        if let Inner::Thread { tx, abort, .. } = &mut self.inner {
            abort.store(true, Ordering::Relaxed);
            drop(tx.take());
        }
    }
}

/// Verifies `batch` and writes it as one row group.
fn encode(
    writer: &mut ArrowWriter<File>,
    batch: &FinishedBatch,
    path: &Path,
    spill_dir: &Path,
) -> Result<()> {
    batch.check.verify(&batch.batch)?;
    writer
        .write(&batch.batch)
        .and_then(|()| writer.flush())
        .map_err(|e| {
            parquet_error(
                e,
                format!("writing a row group to {}", path.display()),
                spill_dir,
            )
        })
}

fn spawn(writer: ArrowWriter<File>, path: PathBuf, spill_dir: PathBuf) -> Inner {
    let (tx, rx) = sync_channel::<(FinishedBatch, u64)>(0);
    let written = Arc::new(AtomicU64::new(0));
    let pending = Arc::new(AtomicU64::new(0));
    let abort = Arc::new(AtomicBool::new(false));
    let (thread_written, thread_pending, thread_abort) =
        (written.clone(), pending.clone(), abort.clone());
    let handle = std::thread::Builder::new()
        .name("sluice-encoder".into())
        .spawn(move || {
            let mut writer = writer;
            for (batch, size) in rx {
                encode(&mut writer, &batch, &path, &spill_dir)?;
                thread_written.store(writer.bytes_written() as u64, Ordering::Relaxed);
                thread_pending.fetch_sub(size, Ordering::Relaxed);
            }
            if thread_abort.load(Ordering::Relaxed) {
                return Err(Error::new(Code::Internal, "part abandoned"));
            }
            finish_writer(writer, &path, &spill_dir)
        });
    match handle {
        Ok(handle) => Inner::Thread {
            tx: Some(tx),
            handle: Some(handle),
            written,
            pending,
            abort,
        },
        Err(e) => Inner::Failed(Some(
            Error::new(Code::OutputWrite, "starting the part encoder thread").source(e),
        )),
    }
}

/// The error of an encoder whose thread never started (once; then an internal error).
fn failed(err: &mut Option<Error>) -> Error {
    err.take()
        .unwrap_or_else(|| Error::new(Code::Internal, "part encoder used after it failed"))
}

/// Writes the footer and fsyncs; the file's size.
fn finish_writer(mut writer: ArrowWriter<File>, path: &Path, spill_dir: &Path) -> Result<u64> {
    writer
        .finish()
        .map_err(|e| parquet_error(e, format!("finishing part {}", path.display()), spill_dir))?;
    writer
        .inner()
        .sync_all()
        .map_err(|e| io_error(e, format!("fsyncing part {}", path.display()), spill_dir))?;
    Ok(writer.bytes_written() as u64)
}

/// A failure of the Parquet writer on a file in the spill directory: a full or
/// unwritable volume is the spill room's refusal ([`crate::spill::errors`]), anything
/// else `SLUICE_OUTPUT_WRITE`.
pub(super) fn parquet_error(err: ParquetError, what: String, spill_dir: &Path) -> Error {
    let refusal = match &err {
        ParquetError::External(inner) => inner
            .downcast_ref::<std::io::Error>()
            .and_then(|io| volume_error(io, &what, spill_dir)),
        _ => None,
    };
    match refusal {
        Some(refusal) => refusal.source(err),
        None => Error::new(Code::OutputWrite, what).source(err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};

    fn record_batch(n: i64) -> RecordBatch {
        let ids: ArrayRef = Arc::new(Int64Array::from_iter_values(n * 100..n * 100 + 100));
        let texts: ArrayRef = Arc::new(StringArray::from_iter_values(
            (0..100).map(|i| format!("row {n}-{i}")),
        ));
        RecordBatch::try_from_iter([("id", ids), ("t", texts)]).unwrap()
    }

    fn batch(n: i64) -> FinishedBatch {
        FinishedBatch::of(record_batch(n))
    }

    fn encode(dir: &Path, name: &str, on_thread: bool, batches: i64) -> (Result<u64>, PathBuf) {
        let path = dir.join(name);
        let file = File::create(&path).unwrap();
        let writer = ArrowWriter::try_new(file, record_batch(0).schema(), None).unwrap();
        let mut encoder = Encoder::start_with(writer, path.clone(), dir.to_owned(), on_thread);
        for n in 0..batches {
            encoder.write(batch(n), 1000).unwrap();
            assert!(encoder.bytes_written() > 0 || !on_thread);
        }
        (encoder.finish(), path)
    }

    #[test]
    fn the_thread_writes_the_same_file_as_inline_encoding() {
        let dir = tempfile::tempdir().unwrap();
        let (inline, a) = encode(dir.path(), "inline.parquet", false, 5);
        let (threaded, b) = encode(dir.path(), "thread.parquet", true, 5);
        assert_eq!(inline.unwrap(), threaded.unwrap());
        assert_eq!(std::fs::read(a).unwrap(), std::fs::read(b).unwrap());
    }

    #[test]
    fn a_write_error_on_the_thread_surfaces_with_its_code() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ro.parquet");
        std::fs::write(&path, b"").unwrap();
        // A read-only handle: the thread's first write fails.
        let file = File::open(&path).unwrap();
        let writer = ArrowWriter::try_new(file, record_batch(0).schema(), None).unwrap();
        let mut encoder = Encoder::start_with(writer, path, dir.path().to_owned(), true);
        let mut result = Ok(0);
        for n in 0..3 {
            if let Err(e) = encoder.write(batch(n), 1000) {
                result = Err(e);
                break;
            }
        }
        let err = result.and_then(|_| encoder.finish()).unwrap_err();
        assert_eq!(err.code(), Code::OutputWrite, "{err}");
        assert!(err.to_string().contains("ro.parquet"), "{err}");
    }

    #[test]
    fn a_batch_failing_its_check_stops_the_encoder_with_nothing_of_it_written() {
        for on_thread in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("checked.parquet");
            let file = File::create(&path).unwrap();
            let writer = ArrowWriter::try_new(file, record_batch(0).schema(), None).unwrap();
            let mut encoder =
                Encoder::start_with(writer, path.clone(), dir.path().to_owned(), on_thread);
            encoder.write(batch(0), 1000).unwrap();
            let mut bad = batch(1);
            bad.check.expected ^= 1;
            let err = encoder
                .write(bad, 1000)
                .and_then(|()| encoder.write(batch(2), 1000))
                .and_then(|()| encoder.finish().map(|_| ()))
                .unwrap_err();
            assert_eq!(err.code(), Code::OutputChecksum, "{err}");
            // No footer: the file is no Parquet file a reader would take.
            let bytes = std::fs::read(&path).unwrap();
            assert!(!bytes.ends_with(b"PAR1"), "on_thread={on_thread}");
        }
    }
}
