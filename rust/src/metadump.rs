//! `kraftkit metadata dump`'s lines, rendered from a file's bytes: a line per record, text
//! (`42  PARTITION_RECORD v1  {...}`) or JSON (`{"offset":42,"type":"PARTITION_RECORD",
//! "version":1,"data":{...}}`), the record's JSON written straight from its bytes
//! ([`crate::schema::json_direct`]).
//!
//! Batches are read in file order and rendered a chunk at a time, the batches of a chunk in
//! parallel; the first problem in file order ends the dump, after the lines of the batches
//! before it: a batch that cannot be read (torn, CRC mismatch), one whose base offset is below
//! the offset after the previous batch (offsets held twice), a records area that does not
//! parse, a control key or a record value the codec refuses. The lines of the batch holding
//! the problem are not printed, as the batch-at-a-time Python loop this replaces did not.

use crate::batch::{self, BatchHeader, NextBatch};
use crate::error::Error;
use crate::schema::{self, json_direct, CodecError};

/// What ended a dump early.
#[derive(Debug, Clone)]
pub enum MetaDumpError {
    /// A batch or records area that cannot be read (the log layer's error).
    Batch(Error),
    /// A record the codec refused, at this offset.
    Codec(CodecError, i64),
    /// A batch whose base offset is below the offset after the previous batch.
    HeldTwice { base_offset: i64, expected: i64, position: u64 },
}

/// A batch found: header, byte range, and the offset expected after the batch before when its
/// base offset is below it.
type Found = (BatchHeader, std::ops::Range<usize>, Option<i64>);

/// Renders the records of one file.
pub struct MetaDumper<B> {
    buf: B,
    json: bool,
    pos: usize,
    done: bool,
    expected: Option<i64>,
    /// Records rendered so far (the lines given out).
    pub records: u64,
    /// What ended the dump, once the lines before it were given out.
    pub error: Option<MetaDumpError>,
}

/// Input per rendering step: the text of 4 MB of records is held until written (and of at most
/// one compressed batch per thread).
pub const CHUNK: usize = 4 << 20;

impl<B: AsRef<[u8]>> MetaDumper<B> {
    pub fn new(buf: B, json: bool) -> Self {
        MetaDumper { buf, json, pos: 0, done: false, expected: None, records: 0, error: None }
    }

    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Byte position in the file up to which batches were read.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Renders the next batches, about `chunk` bytes of input, into `parts` (one buffer per
    /// batch, in file order; reuse the same `parts` from call to call). After a problem, the
    /// parts hold the lines of the batches before it, `error` is set and the dump is done.
    pub fn next_chunk(&mut self, chunk: usize, parts: &mut Vec<Vec<u8>>) {
        let buf = self.buf.as_ref();
        let mut found: Vec<Found> = Vec::new();
        let mut taken = 0usize;
        // a compressed batch may inflate to the decompression limit (100 MB by default) and its
        // text to a few times that: at most one such batch per thread in a chunk, so that what a
        // chunk holds at once stays bounded whatever its batches inflate to
        let mut inflating = 0usize;
        let most_inflating = rayon::current_num_threads().max(1);
        let mut stop = None;
        while !self.done && taken < chunk && inflating < most_inflating {
            match batch::next_batch(buf, self.pos, 0) {
                Ok(NextBatch::End) => self.done = true,
                Ok(NextBatch::Batch(h, r)) => {
                    taken += r.len();
                    inflating += usize::from(h.codec() != Some(crate::compression::Codec::None));
                    let held = self.expected.filter(|&e| h.base_offset < e);
                    self.expected = Some(h.last_offset() + 1);
                    self.pos = r.end;
                    found.push((h, r, held));
                    if held.is_some() {
                        self.done = true; // this batch fails, at the latest
                    }
                }
                Err(e) => {
                    stop = Some(MetaDumpError::Batch(e));
                    self.done = true;
                }
            }
        }
        parts.resize_with(found.len(), Vec::new);
        let json = self.json;
        let render = |((h, r, held), out): (&Found, &mut Vec<u8>)| {
            out.clear();
            // the declared count is the header's word: a lying one must not size memory
            out.reserve((h.records_count.max(0) as usize).min(r.len() / 7 + 1) * 160);
            render_batch(h, &buf[r.clone()], r.start as u64, *held, json, out)
        };
        let results: Vec<Result<u64, MetaDumpError>> = if found.len() > 1 {
            use rayon::prelude::*;
            found.par_iter().zip(parts.par_iter_mut()).map(render).collect()
        } else {
            found.iter().zip(parts.iter_mut()).map(render).collect()
        };
        for (i, res) in results.into_iter().enumerate() {
            match res {
                Ok(n) => self.records += n,
                Err(e) => {
                    parts.truncate(i);
                    self.error = Some(e);
                    self.done = true;
                    return;
                }
            }
        }
        if let Some(e) = stop {
            self.error = Some(e);
        }
    }
}

/// The lines of one batch; the number of records, or the batch's first problem.
fn render_batch(h: &BatchHeader, bytes: &[u8], fpos: u64, held: Option<i64>, json: bool, out: &mut Vec<u8>) -> Result<u64, MetaDumpError> {
    batch::validate(h, bytes, fpos).map_err(MetaDumpError::Batch)?;
    if let Some(expected) = held {
        return Err(MetaDumpError::HeldTwice { base_offset: h.base_offset, expected, position: fpos });
    }
    let data = batch::records_data(h, bytes, fpos).map_err(MetaDumpError::Batch)?;
    let mut views = Vec::new();
    batch::parse_records(h, data.bytes(), fpos, &mut views).map_err(MetaDumpError::Batch)?;
    let d = data.bytes();
    let mut tmp = json_direct::Scratch::default();
    for v in &views {
        let offset = h.base_offset + v.offset_delta as i64;
        let value = v.value.as_ref().map(|r| &d[r.start as usize..r.end as usize]).unwrap_or(&[]);
        let mut num = itoa::Buffer::new();
        let off = num.format(offset);
        if h.is_control() {
            let key = v.key.as_ref().map(|r| &d[r.start as usize..r.end as usize]);
            let (_, t) = batch::parse_control_key(key).map_err(|reason| {
                MetaDumpError::Batch(Error::corrupt(fpos, Some(h.base_offset), format!("record at offset {offset}: {reason}")))
            })?;
            let unknown;
            let name = match schema::generated::control_type_name(t) {
                Some(n) => n,
                None => {
                    unknown = format!("CONTROL_{t}");
                    unknown.as_str()
                }
            };
            let head = |out: &mut Vec<u8>, ver: i16| {
                if json {
                    out.extend_from_slice(b"{\"offset\":");
                    out.extend_from_slice(off.as_bytes());
                    out.extend_from_slice(b",\"control\":true,\"type\":\"");
                    out.extend_from_slice(name.as_bytes());
                    out.extend_from_slice(b"\",\"version\":");
                    out.extend_from_slice(itoa::Buffer::new().format(ver).as_bytes());
                    out.extend_from_slice(b",\"data\":");
                } else {
                    out.extend_from_slice(off.as_bytes());
                    out.extend_from_slice(b"  ");
                    out.extend_from_slice(name.as_bytes());
                    out.extend_from_slice(b" v");
                    out.extend_from_slice(itoa::Buffer::new().format(ver).as_bytes());
                    out.extend_from_slice(b"  ");
                }
            };
            if schema::control_schema(t).is_some() {
                json_direct::control_json(t, value, out, &mut tmp, |out, _, ver| head(out, ver)).map_err(|e| MetaDumpError::Codec(e, offset))?;
            } else {
                // transaction markers: no schema, no body
                head(out, 0);
                out.extend_from_slice(b"null");
            }
        } else {
            let head = |out: &mut Vec<u8>, m: &schema::MessageSchema, ver: i16| {
                if json {
                    out.extend_from_slice(b"{\"offset\":");
                    out.extend_from_slice(off.as_bytes());
                    out.extend_from_slice(b",\"type\":\"");
                    out.extend_from_slice(m.type_name.as_bytes());
                    out.extend_from_slice(b"\",\"version\":");
                    out.extend_from_slice(itoa::Buffer::new().format(ver).as_bytes());
                    out.extend_from_slice(b",\"data\":");
                } else {
                    out.extend_from_slice(off.as_bytes());
                    out.extend_from_slice(b"  ");
                    out.extend_from_slice(m.type_name.as_bytes());
                    out.extend_from_slice(b" v");
                    out.extend_from_slice(itoa::Buffer::new().format(ver).as_bytes());
                    out.extend_from_slice(b"  ");
                }
            };
            json_direct::metadata_json(value, out, &mut tmp, head).map_err(|e| MetaDumpError::Codec(e, offset))?;
        }
        if json {
            out.push(b'}');
        }
        out.push(b'\n');
    }
    Ok(views.len() as u64)
}

/// Writes the parts of a chunk to `w` in vectored writes (no copy in between).
pub fn write_parts(w: &mut impl std::io::Write, parts: &[Vec<u8>]) -> std::io::Result<()> {
    use std::io::IoSlice;
    let mut slices: Vec<IoSlice<'_>> = parts.iter().filter(|p| !p.is_empty()).map(|p| IoSlice::new(p)).collect();
    let mut rest = &mut slices[..];
    while !rest.is_empty() {
        // at most IOV_MAX (1024 on Linux) buffers per call
        let n = rest.len().min(1024);
        match w.write_vectored(&rest[..n]) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(written) => IoSlice::advance_slices(&mut rest, written),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::{encode_batch, BatchParams, RecordInput};
    use crate::compression::Codec;
    use crate::schema::{self, Struct, Value};

    fn record(i: i64) -> Vec<u8> {
        let st = Struct { fields: vec![("Name", Value::Str(format!("t{i}"))), ("FeatureLevel", Value::Int(i % 7))], unknown_tags: vec![] };
        schema::encode_metadata_record(12, 0, &st).unwrap()
    }

    /// Compressed batches are rendered at most one per thread per chunk; uncompressed ones by
    /// input size; every record is rendered either way, in order.
    #[test]
    fn chunks_hold_few_compressed_batches() {
        for codec in [Codec::None, Codec::Zstd] {
            let mut log = Vec::new();
            for b in 0..40i64 {
                let values: Vec<Vec<u8>> = (0..5).map(|j| record(b * 5 + j)).collect();
                let recs: Vec<RecordInput> = values.iter().map(|v| RecordInput { timestamp: 1, key: None, value: Some(v), headers: vec![] }).collect();
                encode_batch(&BatchParams { base_offset: b * 5, codec, ..BatchParams::default() }, &recs, &mut log).unwrap();
            }
            let mut d = MetaDumper::new(&log[..], false);
            let mut parts = Vec::new();
            let mut text = Vec::new();
            let mut steps = 0;
            while !d.is_done() {
                d.next_chunk(CHUNK, &mut parts);
                if codec != Codec::None {
                    assert!(parts.len() <= rayon::current_num_threads().max(1), "{} batches in a chunk", parts.len());
                }
                parts.iter().for_each(|p| text.extend_from_slice(p));
                steps += 1;
            }
            assert!(d.error.is_none(), "{:?}", d.error);
            assert_eq!(d.records, 200);
            let lines: Vec<&str> = std::str::from_utf8(&text).unwrap().lines().collect();
            assert_eq!(lines.len(), 200);
            assert_eq!(lines[7], r#"7  FEATURE_LEVEL_RECORD v0  {"name":"t7","featureLevel":0}"#);
            if codec == Codec::None {
                assert_eq!(steps, 1);
            }
        }
    }
}
