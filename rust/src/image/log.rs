//! Replaying whole batches into the image: one batch, the batches of log segment files from a
//! start offset up to an exclusive end offset, and snapshot files.
//!
//! A batch is decoded in full (every record, CRC checked by the caller or here) before any of
//! its records is applied, as `decode_metadata_batch` + `MetadataImage.replay_batch` do. A batch
//! entirely inside the range moves the provenance to its last offset; a batch that straddles
//! the start or the end is applied record by record, each moving the provenance.

use super::fast::{decode_partition, decode_partition_change};
use super::{Image, Provenance, ReplayError};
use crate::batch::{self, BatchHeader, NextBatch, RecordView, RecordsData};
use crate::error::Error;
use crate::schema::{self, CodecError, Struct};
use std::fmt;
use std::ops::Range;

/// Why loading failed: a batch that cannot be read, a record that cannot be decoded, or one
/// that cannot be applied. `file` names the file when the bytes came from one.
#[derive(Debug, Clone)]
pub enum ImageLoadError {
    /// The batch itself: sizes, CRC, compression, record framing (Kafka's corrupt-batch errors).
    Batch { file: Option<String>, error: Error },
    /// A record value the codec cannot decode, at `offset`.
    Record { file: Option<String>, offset: Option<i64>, error: CodecError },
    /// A record that cannot be applied to the image.
    Replay(ReplayError),
    /// The file cannot be read.
    Io { file: String, error: String },
}

impl fmt::Display for ImageLoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ImageLoadError::Batch { file, error } => {
                if let Some(n) = file {
                    write!(f, "{n}: ")?;
                }
                write!(f, "{error}")
            }
            ImageLoadError::Record { file, offset, error } => {
                if let Some(n) = file {
                    write!(f, "{n}: ")?;
                }
                match offset {
                    Some(o) => write!(f, "record at offset {o}: {error}"),
                    None => write!(f, "{error}"),
                }
            }
            ImageLoadError::Replay(e) => write!(f, "{e}"),
            ImageLoadError::Io { file, error } => write!(f, "{file}: {error}"),
        }
    }
}

impl std::error::Error for ImageLoadError {}

impl From<ReplayError> for ImageLoadError {
    fn from(e: ReplayError) -> Self {
        ImageLoadError::Replay(e)
    }
}

type LResult<T> = Result<T, ImageLoadError>;

/// One decoded record of a batch.
enum Decoded {
    /// A data record through the generic codec.
    Data { offset: i64, api_key: i16, version: i16, data: Struct },
    /// A `PartitionChangeRecord` or `PartitionRecord` the typed decoders read; `value` is its
    /// range in the records area (it is read again when applied, without allocating).
    Typed { offset: i64, value: Range<usize>, topic_id: super::Uuid, partition_id: i64 },
    /// A control record: its type and value (None for types without a schema: transaction markers).
    Control { offset: i64, control_type: i16, data: Option<Struct> },
}

impl Decoded {
    fn offset(&self) -> i64 {
        match self {
            Decoded::Data { offset, .. } | Decoded::Typed { offset, .. } | Decoded::Control { offset, .. } => *offset,
        }
    }
}

/// Reusable buffers for decoding batches.
#[derive(Default)]
struct Scratch {
    views: Vec<RecordView>,
    decoded: Vec<Decoded>,
}

/// Where a log replay stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogReplay {
    /// The offset after the last record applied (the start offset if none was).
    pub end: i64,
    /// A batch at or past the requested end offset was reached.
    pub reached_end: bool,
}

/// Decodes every record of a batch into `s.decoded`; returns the records area they point into.
fn decode_batch<'a>(h: &BatchHeader, bytes: &'a [u8], fpos: u64, file: Option<&str>, s: &mut Scratch) -> LResult<RecordsData<'a>> {
    let batch_err = |error: Error| ImageLoadError::Batch { file: file.map(str::to_owned), error };
    let data = batch::records_data(h, bytes, fpos).map_err(batch_err)?;
    s.views.clear();
    s.decoded.clear();
    batch::parse_records(h, data.bytes(), fpos, &mut s.views).map_err(batch_err)?;
    // KRaft batches are never compacted: n records numbered 0..n-1, lastOffsetDelta n-1. A
    // batch that says otherwise would move the offsets of everything after it.
    crate::segment::check_dense_header(h, fpos).map_err(batch_err)?;
    let d = data.bytes();
    for (i, v) in s.views.iter().enumerate() {
        if v.offset_delta as i64 != i as i64 {
            return Err(batch_err(crate::segment::dense_delta_error(h, fpos, i, v.offset_delta)));
        }
        let offset = h.base_offset.wrapping_add(v.offset_delta as i64);
        let range = v.value.as_ref().map_or(0..0, |r| r.start as usize..r.end as usize);
        let value = &d[range.clone()];
        let rec_err = |error: CodecError| ImageLoadError::Record { file: file.map(str::to_owned), offset: Some(offset), error };
        if h.is_control() {
            let key = v.key.as_ref().map(|r| &d[r.start as usize..r.end as usize]);
            let (_, t) = batch::parse_control_key(key)
                .map_err(|reason| batch_err(Error::corrupt(fpos, Some(h.base_offset), format!("record at offset {offset}: {reason}"))))?;
            let data = if schema::control_schema(t).is_some() { Some(schema::decode_control_record(t, value).map_err(rec_err)?.2) } else { None };
            s.decoded.push(Decoded::Control { offset, control_type: t, data });
        } else if let Some(c) = decode_partition_change(value) {
            s.decoded.push(Decoded::Typed { offset, value: range, topic_id: c.topic_id, partition_id: c.partition_id });
        } else if let Some(p) = decode_partition(value) {
            s.decoded.push(Decoded::Typed { offset, value: range, topic_id: p.topic_id, partition_id: p.partition_id });
        } else {
            let r = schema::decode_metadata_record(value).map_err(rec_err)?;
            s.decoded.push(Decoded::Data { offset, api_key: r.schema.api_key, version: r.version, data: r.data });
        }
    }
    Ok(data)
}

impl Image {
    fn apply_decoded(&mut self, rec: Decoded, records: &[u8]) -> LResult<()> {
        match rec {
            Decoded::Control { control_type, data, .. } => self.replay_control(control_type, data.as_ref())?,
            Decoded::Data { offset, api_key, version, data } => self.replay(api_key, version, data, Some(offset))?,
            Decoded::Typed { offset, value, .. } => self.replay_value(records.get(value).unwrap_or(&[]), Some(offset))?,
        }
        Ok(())
    }

    /// Applies one framed metadata record value: `PartitionChangeRecord` and `PartitionRecord`
    /// through the typed decoders (outside a transaction), the others through the codec.
    pub fn replay_value(&mut self, value: &[u8], offset: Option<i64>) -> LResult<()> {
        let generic = || schema::decode_metadata_record(value).ok().map(|r| r.data);
        if self.pending_transaction.is_none() {
            if let Some(c) = decode_partition_change(value) {
                return Ok(self.apply_partition_change(&c, offset, generic)?);
            }
            if let Some(p) = decode_partition(value) {
                return Ok(self.apply_partition_record(&p, offset, generic)?);
            }
        }
        let r = schema::decode_metadata_record(value).map_err(|error| ImageLoadError::Record { file: None, offset, error })?;
        Ok(self.replay(r.schema.api_key, r.version, r.data, offset)?)
    }

    /// Applies every record of one complete batch (CRC already checked) and moves the
    /// provenance to its last offset (`MetadataImage.replay_batch`).
    pub fn replay_batch(&mut self, h: &BatchHeader, bytes: &[u8], fpos: u64, file: Option<&str>) -> LResult<()> {
        self.replay_whole_batch(h, bytes, fpos, file, &mut Scratch::default())
    }

    /// Looks up the partitions a batch's changes will touch, all before any is applied: the
    /// lookups do not depend on each other, so their cache misses overlap instead of being paid
    /// one record at a time (read only; the records are applied afterwards, in order).
    fn warm_up(&self, decoded: &[Decoded]) {
        for d in decoded {
            if let Decoded::Typed { topic_id, partition_id, .. } = d {
                if let Some(p) = self.topics.get(topic_id).and_then(|t| t.partitions.get(partition_id)) {
                    std::hint::black_box((p.isr.first(), p.replicas.first()));
                }
            }
        }
    }

    fn replay_whole_batch(&mut self, h: &BatchHeader, bytes: &[u8], fpos: u64, file: Option<&str>, s: &mut Scratch) -> LResult<()> {
        let data = decode_batch(h, bytes, fpos, file, s)?;
        self.warm_up(&s.decoded);
        for rec in s.decoded.drain(..) {
            self.apply_decoded(rec, data.bytes()).map_err(|e| with_file(e, file))?;
        }
        self.provenance = Provenance { offset: h.last_offset(), epoch: h.partition_leader_epoch as i64, timestamp: h.max_timestamp };
        Ok(())
    }

    /// Replays the batches of one log segment's bytes whose records fall in `[start, at)`
    /// (`at` None: no end), continuing from `end` (the end offset reached so far, updated).
    /// Every batch read is CRC checked. With `skip_below_start`, batches that end below
    /// `start` are skipped without being decoded (how a log directory is read after a
    /// snapshot); otherwise they are decoded and their records ignored (a segment file alone).
    /// Returns true when a batch at or past `at` was reached: nothing after it is read.
    pub fn replay_segment(&mut self, buf: &[u8], file: Option<&str>, start: i64, at: Option<i64>, skip_below_start: bool, end: &mut i64) -> LResult<bool> {
        let mut s = Scratch::default();
        let mut pos = 0usize;
        let batch_err = |error: Error| ImageLoadError::Batch { file: file.map(str::to_owned), error };
        loop {
            let (h, range) = match batch::next_batch(buf, pos, 0).map_err(batch_err)? {
                NextBatch::End => return Ok(false),
                NextBatch::Batch(h, r) => (h, r),
            };
            let bytes = &buf[range.clone()];
            let fpos = pos as u64;
            batch::validate(&h, bytes, fpos).map_err(batch_err)?;
            pos = range.end;
            if skip_below_start && h.last_offset() < start {
                continue;
            }
            if at.is_some_and(|a| h.base_offset >= a) {
                return Ok(true);
            }
            if h.base_offset < start || at.is_some_and(|a| h.last_offset() >= a) {
                let data = decode_batch(&h, bytes, fpos, file, &mut s)?;
                self.warm_up(&s.decoded);
                for rec in s.decoded.drain(..) {
                    let offset = rec.offset();
                    if offset < start || at.is_some_and(|a| offset >= a) {
                        continue;
                    }
                    self.apply_decoded(rec, data.bytes()).map_err(|e| with_file(e, file))?;
                    self.provenance = Provenance { offset, epoch: h.partition_leader_epoch as i64, timestamp: h.max_timestamp };
                    *end = offset.wrapping_add(1);
                }
            } else {
                self.replay_whole_batch(&h, bytes, fpos, file, &mut s)?;
                *end = h.last_offset().wrapping_add(1);
            }
        }
    }

    /// Replays the log segment files `files` (in offset order) from `start` up to `at`
    /// (exclusive). Returns where the replay stopped.
    pub fn replay_log_files(&mut self, files: &[String], start: i64, at: Option<i64>, skip_below_start: bool) -> LResult<LogReplay> {
        let mut end = start;
        for f in files {
            let map = read_file(f)?;
            if self.replay_segment(map.as_ref().map_or(&[][..], |m| &m[..]), Some(f), start, at, skip_below_start, &mut end)? {
                return Ok(LogReplay { end, reached_end: true });
            }
        }
        Ok(LogReplay { end, reached_end: false })
    }

    /// Replays a snapshot file's records (its control records too); returns the
    /// SnapshotHeader's LastContainedLogTimestamp (-1 without one). The provenance is left to
    /// the caller, which knows the snapshot id.
    pub fn replay_snapshot(&mut self, buf: &[u8], file: Option<&str>) -> LResult<i64> {
        let mut s = Scratch::default();
        let mut pos = 0usize;
        let mut ts = -1;
        let batch_err = |error: Error| ImageLoadError::Batch { file: file.map(str::to_owned), error };
        loop {
            let (h, range) = match batch::next_batch(buf, pos, 0).map_err(batch_err)? {
                NextBatch::End => return Ok(ts),
                NextBatch::Batch(h, r) => (h, r),
            };
            let bytes = &buf[range.clone()];
            batch::validate(&h, bytes, pos as u64).map_err(batch_err)?;
            let data = decode_batch(&h, bytes, pos as u64, file, &mut s)?;
            self.warm_up(&s.decoded);
            for rec in s.decoded.drain(..) {
                if let Decoded::Control { control_type: crate::snapshot::SNAPSHOT_HEADER, data: Some(d), .. } = &rec {
                    if let Some(crate::schema::Value::Int(t)) = d.get("LastContainedLogTimestamp") {
                        ts = *t;
                    }
                }
                self.apply_decoded(rec, data.bytes()).map_err(|e| with_file(e, file))?;
            }
            pos = range.end;
        }
    }
}

fn with_file(e: ImageLoadError, file: Option<&str>) -> ImageLoadError {
    match e {
        ImageLoadError::Record { file: None, offset, error } => ImageLoadError::Record { file: file.map(str::to_owned), offset, error },
        other => other,
    }
}

/// The bytes of a file, mapped (None for an empty file). Only a regular file is opened, never
/// blocking (see `fsutil`).
pub fn read_file(path: &str) -> LResult<Option<memmap2::Mmap>> {
    crate::fsutil::map_input(std::path::Path::new(path)).map_err(|e| ImageLoadError::Io { file: path.to_owned(), error: e.to_string() })
}
