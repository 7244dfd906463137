//! A streaming parser of PostgreSQL's `COPY … TO STDOUT (FORMAT binary)` output.
//!
//! Guarantees: fields come out in the type's binary send format (the same bytes
//! `pgoutput` sends with `binary 'true'`, so one decoder serves both); a malformed stream
//! (bad signature, negative lengths other than NULL, a tuple with the wrong field count,
//! bytes after the trailer, a truncated end) is `SLUICE_SOURCE_PROTOCOL`, never a panic.
//! Input may arrive in arbitrary chunks; memory is one tuple plus one network chunk.
//!
//! [`FieldStream`] reads the one-column, never-NULL tuples of a query's COPY (the change
//! stream's pages) without copying them: a field that arrives whole in its chunk (the
//! server sends one row per message) is handed out as a slice of that chunk.

use std::collections::VecDeque;

use bytes::{Buf, Bytes, BytesMut};

use crate::error::{Code, Error, Result};

const SIGNATURE: &[u8] = b"PGCOPY\n\xff\r\n\0";

/// Incremental parser state.
#[derive(Debug)]
pub struct CopyParser {
    buffer: BytesMut,
    header_done: bool,
    finished: bool,
    fields: usize,
}

impl CopyParser {
    /// A parser for tuples of `fields` columns.
    pub fn new(fields: usize) -> Self {
        CopyParser {
            buffer: BytesMut::new(),
            header_done: false,
            finished: false,
            fields,
        }
    }

    /// Adds bytes received from the server.
    pub fn feed(&mut self, chunk: &[u8]) {
        self.buffer.extend_from_slice(chunk);
    }

    /// The next complete tuple (`None` cells are NULL), or `Ok(None)` when more input is
    /// needed or the trailer was reached.
    pub fn next_tuple(&mut self) -> Result<Option<Vec<Option<Vec<u8>>>>> {
        if !self.header_done {
            let Some(header) = header_len(&self.buffer)? else {
                return Ok(None);
            };
            self.buffer.advance(header);
            self.header_done = true;
        }
        if self.finished {
            if !self.buffer.is_empty() {
                return Err(malformed("bytes after the COPY trailer"));
            }
            return Ok(None);
        }
        let mut cursor = &self.buffer[..];
        if cursor.len() < 2 {
            return Ok(None);
        }
        let count = cursor.get_i16();
        if count == -1 {
            self.buffer.advance(2);
            self.finished = true;
            if !self.buffer.is_empty() {
                return Err(malformed("bytes after the COPY trailer"));
            }
            return Ok(None);
        }
        if usize::try_from(count).ok() != Some(self.fields) {
            return Err(malformed(&format!(
                "tuple has {count} fields, expected {}",
                self.fields
            )));
        }
        let mut tuple = Vec::with_capacity(self.fields);
        for _ in 0..self.fields {
            if cursor.len() < 4 {
                return Ok(None);
            }
            let len = cursor.get_i32();
            if len == -1 {
                tuple.push(None);
                continue;
            }
            let len = usize::try_from(len).map_err(|_| malformed("negative field length"))?;
            if cursor.len() < len {
                return Ok(None);
            }
            tuple.push(Some(cursor[..len].to_vec()));
            cursor.advance(len);
        }
        let consumed = self.buffer.len() - cursor.len();
        self.buffer.advance(consumed);
        Ok(Some(tuple))
    }

    /// Fails unless the whole stream, trailer included, was consumed.
    pub fn finish(&self) -> Result<()> {
        if self.finished && self.buffer.is_empty() {
            Ok(())
        } else {
            Err(malformed("the COPY stream ended early"))
        }
    }
}

/// Incremental parser of a binary COPY of one non-NULL column.
#[derive(Debug, Default)]
pub struct FieldStream {
    /// The start of a tuple (or the header) whose end has not arrived yet.
    carry: BytesMut,
    header_done: bool,
    finished: bool,
}

impl FieldStream {
    /// A parser at the start of a stream.
    pub fn new() -> Self {
        FieldStream::default()
    }

    /// Parses `chunk` (the next bytes received), appending each complete field to `out`.
    pub fn feed(&mut self, chunk: Bytes, out: &mut VecDeque<Bytes>) -> Result<()> {
        let mut buf = if self.carry.is_empty() {
            chunk
        } else {
            self.carry.extend_from_slice(&chunk);
            self.carry.split().freeze()
        };
        if !self.header_done {
            let Some(header) = header_len(&buf)? else {
                self.carry.extend_from_slice(&buf);
                return Ok(());
            };
            buf.advance(header);
            self.header_done = true;
        }
        loop {
            if self.finished {
                if buf.is_empty() {
                    return Ok(());
                }
                return Err(malformed("bytes after the COPY trailer"));
            }
            if buf.len() < 2 {
                self.carry.extend_from_slice(&buf);
                return Ok(());
            }
            match i16::from_be_bytes([buf[0], buf[1]]) {
                -1 => {
                    buf.advance(2);
                    self.finished = true;
                    continue;
                }
                1 => {}
                count => {
                    return Err(malformed(&format!("tuple has {count} fields, expected 1")));
                }
            }
            if buf.len() < 6 {
                self.carry.extend_from_slice(&buf);
                return Ok(());
            }
            let len = i32::from_be_bytes([buf[2], buf[3], buf[4], buf[5]]);
            let len = usize::try_from(len)
                .map_err(|_| malformed(&format!("field length {len} in a never-NULL column")))?;
            if buf.len() < 6 + len {
                self.carry.extend_from_slice(&buf);
                return Ok(());
            }
            out.push_back(buf.slice(6..6 + len));
            buf.advance(6 + len);
        }
    }

    /// Fails unless the whole stream, trailer included, was consumed.
    pub fn finish(&self) -> Result<()> {
        if self.finished && self.carry.is_empty() {
            Ok(())
        } else {
            Err(malformed("the COPY stream ended early"))
        }
    }
}

/// The length of the stream's header (signature, flags, extension) at the start of `buf`,
/// or `None` while it has not all arrived.
fn header_len(buf: &[u8]) -> Result<Option<usize>> {
    let fixed = SIGNATURE.len() + 8;
    if buf.len() < fixed {
        return Ok(None);
    }
    if &buf[..SIGNATURE.len()] != SIGNATURE {
        return Err(malformed("bad COPY signature"));
    }
    let ext = i32::from_be_bytes([
        buf[fixed - 4],
        buf[fixed - 3],
        buf[fixed - 2],
        buf[fixed - 1],
    ]);
    let ext = usize::try_from(ext).map_err(|_| malformed("negative header extension length"))?;
    Ok((buf.len() >= fixed + ext).then_some(fixed + ext))
}

fn malformed(what: &str) -> Error {
    Error::new(
        Code::SourceProtocol,
        format!("malformed COPY binary stream: {what}"),
    )
    .hint("the connection may have been cut mid-chunk; the chunk is retried from scratch")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn stream(tuples: &[Vec<Option<&[u8]>>]) -> Vec<u8> {
        let mut out = SIGNATURE.to_vec();
        out.extend_from_slice(&0i32.to_be_bytes());
        out.extend_from_slice(&0i32.to_be_bytes());
        for tuple in tuples {
            out.extend_from_slice(&(tuple.len() as i16).to_be_bytes());
            for field in tuple {
                match field {
                    None => out.extend_from_slice(&(-1i32).to_be_bytes()),
                    Some(bytes) => {
                        out.extend_from_slice(&(bytes.len() as i32).to_be_bytes());
                        out.extend_from_slice(bytes);
                    }
                }
            }
        }
        out.extend_from_slice(&(-1i16).to_be_bytes());
        out
    }

    fn parse_all(bytes: &[u8], chunk: usize, fields: usize) -> Result<Vec<Vec<Option<Vec<u8>>>>> {
        let mut parser = CopyParser::new(fields);
        let mut out = vec![];
        for piece in bytes.chunks(chunk.max(1)) {
            parser.feed(piece);
            while let Some(t) = parser.next_tuple()? {
                out.push(t);
            }
        }
        parser.finish()?;
        Ok(out)
    }

    #[test]
    fn parses_tuples_in_any_chunking() {
        let data = stream(&[vec![Some(b"ab"), None], vec![Some(b""), Some(b"xyz")]]);
        for chunk in [1, 2, 3, 7, 1000] {
            let tuples = parse_all(&data, chunk, 2).unwrap();
            assert_eq!(tuples.len(), 2, "chunk {chunk}");
            assert_eq!(tuples[0], vec![Some(b"ab".to_vec()), None]);
            assert_eq!(tuples[1], vec![Some(vec![]), Some(b"xyz".to_vec())]);
        }
    }

    #[test]
    fn rejects_malformed_streams() {
        let good = stream(&[vec![Some(b"ab")]]);
        assert!(
            parse_all(&good[..good.len() - 1], 5, 1).is_err(),
            "truncated"
        );
        let mut trailing = good.clone();
        trailing.push(0);
        assert!(parse_all(&trailing, 5, 1).is_err(), "trailing bytes");
        assert!(parse_all(&good, 5, 2).is_err(), "field count");
        let mut bad = good.clone();
        bad[0] = b'X';
        assert!(parse_all(&bad, 5, 1).is_err(), "signature");
    }

    fn fields_of(bytes: &[u8], chunk: usize) -> Result<Vec<Vec<u8>>> {
        let mut parser = FieldStream::new();
        let mut out = VecDeque::new();
        for piece in bytes.chunks(chunk.max(1)) {
            parser.feed(Bytes::copy_from_slice(piece), &mut out)?;
        }
        parser.finish()?;
        Ok(out.into_iter().map(|b| b.to_vec()).collect())
    }

    #[test]
    fn fields_come_out_whole_in_any_chunking() {
        let data = stream(&[vec![Some(b"ab")], vec![Some(b"")], vec![Some(b"xyz")]]);
        for chunk in [1, 2, 3, 7, 19, 20, 1000] {
            let fields = fields_of(&data, chunk).unwrap();
            assert_eq!(
                fields,
                vec![b"ab".to_vec(), vec![], b"xyz".to_vec()],
                "chunk {chunk}"
            );
        }
        assert_eq!(fields_of(&stream(&[]), 4).unwrap(), Vec::<Vec<u8>>::new());
    }

    #[test]
    fn a_field_whole_in_its_chunk_is_a_slice_of_it() {
        let data = stream(&[vec![Some(b"abc")]]);
        let chunk = Bytes::from(data);
        let mut parser = FieldStream::new();
        let mut out = VecDeque::new();
        parser.feed(chunk.clone(), &mut out).unwrap();
        parser.finish().unwrap();
        let field = out.pop_front().unwrap();
        assert_eq!(&field[..], b"abc");
        let at = field.as_ptr() as usize - chunk.as_ptr() as usize;
        assert_eq!(at, 19 + 2 + 4, "not copied: it points into the chunk");
    }

    #[test]
    fn field_streams_refuse_what_a_one_column_copy_never_sends() {
        let good = stream(&[vec![Some(b"ab")]]);
        assert!(fields_of(&good[..good.len() - 1], 5).is_err(), "truncated");
        let mut trailing = good.clone();
        trailing.push(0);
        assert!(fields_of(&trailing, 5).is_err(), "trailing bytes");
        assert!(
            fields_of(&stream(&[vec![Some(b"a"), Some(b"b")]]), 5).is_err(),
            "two fields"
        );
        assert!(fields_of(&stream(&[vec![None]]), 5).is_err(), "NULL");
        let mut bad = good.clone();
        bad[0] = b'X';
        assert!(fields_of(&bad, 5).is_err(), "signature");
    }

    proptest! {
        #[test]
        fn never_panics_on_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..200), chunk in 1usize..20) {
            let mut data = SIGNATURE.to_vec();
            data.extend_from_slice(&bytes);
            let _ = parse_all(&data, chunk, 2);
            let _ = fields_of(&data, chunk);
        }
    }
}
