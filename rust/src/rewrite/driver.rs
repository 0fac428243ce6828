//! The rewrite's loop: batches in (from a stream or from memory), checked as a snapshot's, each
//! record's fate asked of the [`Rewriter`], batches out: copied, patched in place, or rebuilt.

use super::record::{Action, Rewriter};
use super::{Plan, Report, SNAPSHOT_FOOTER, SNAPSHOT_HEADER};
use crate::batch::{self, NextBatch, RecordView};
use crate::builder::{self, BatchParams, RawRecord};
use crate::error::{Error, ErrorKind, Result};
use std::io::{Read, Write};

/// Where the batches come from: a stream read batch by batch, or bytes in memory (or mapped).
pub(super) trait Batches {
    /// The next batch (header, and its bytes from the base offset on) at file position `fpos`,
    /// or None at the end; a torn or corrupt batch is an error naming `fpos`.
    fn next_batch(&mut self, fpos: u64) -> Result<Option<(batch::BatchHeader, &[u8])>>;
}

/// Reads the stream in chunks straight into one buffer and hands out the batches in it (a
/// batch split by a chunk boundary is completed by the next read).
pub(super) struct ReadBatches<'a> {
    pub(super) input: &'a mut dyn Read,
    pub(super) buf: Vec<u8>,
    /// the unread bytes are buf[start..end]
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) eof: bool,
}

/// Bytes read at a time (the buffer grows only for a larger batch).
pub(super) const READ_CHUNK: usize = 256 << 10;

impl Batches for ReadBatches<'_> {
    fn next_batch(&mut self, fpos: u64) -> Result<Option<(batch::BatchHeader, &[u8])>> {
        loop {
            let avail = self.end - self.start;
            // the bytes the next batch needs: its header up to the magic byte, then all of it as
            // its length says (a length too small to be a batch is next_batch's to report)
            let need = if avail >= batch::LOG_OVERHEAD {
                let b = &self.buf[self.start..];
                let length = i32::from_be_bytes([b[8], b[9], b[10], b[11]]);
                if length < batch::LEGACY_RECORD_OVERHEAD_V0 { batch::HEADER_SIZE_UP_TO_MAGIC } else { (length as usize + batch::LOG_OVERHEAD).max(batch::HEADER_SIZE_UP_TO_MAGIC) }
            } else {
                batch::HEADER_SIZE_UP_TO_MAGIC
            };
            if avail >= need || self.eof {
                if avail == 0 {
                    return Ok(None);
                }
                // a short tail at the end of the stream: next_batch says how it is torn
                return match batch::next_batch(&self.buf[self.start..self.end], 0, fpos)? {
                    NextBatch::End => Ok(None),
                    NextBatch::Batch(h, r) => {
                        let at = self.start;
                        self.start += r.end;
                        Ok(Some((h, &self.buf[at + r.start..at + r.end])))
                    }
                };
            }
            // room for more: move the partial batch to the front, and grow the buffer only a
            // chunk at a time beyond the bytes read (a corrupt length cannot make it allocate
            // more than the stream holds)
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end = avail;
                self.start = 0;
            }
            let want = need.min(self.end + READ_CHUNK).max(READ_CHUNK);
            if self.buf.len() < want {
                self.buf.resize(want, 0);
            }
            let n = match self.input.read(&mut self.buf[self.end..]) {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(Error::from(e).at(fpos, None)),
            };
            if n == 0 {
                self.eof = true;
            }
            self.end += n;
        }
    }
}

pub(super) struct SliceBatches<'a> {
    pub(super) data: &'a [u8],
    pub(super) pos: usize,
}

impl Batches for SliceBatches<'_> {
    fn next_batch(&mut self, fpos: u64) -> Result<Option<(batch::BatchHeader, &[u8])>> {
        debug_assert_eq!(fpos, self.pos as u64);
        match batch::next_batch(self.data, self.pos, 0)? {
            NextBatch::End => Ok(None),
            NextBatch::Batch(h, r) => {
                self.pos = r.end;
                Ok(Some((h, &self.data[r])))
            }
        }
    }
}

/// Output bytes are gathered up to this size before each write.
const WRITE_CHUNK: usize = 1 << 20;

pub(super) fn run(src: &mut dyn Batches, plan: &Plan, mut out: Option<&mut dyn Write>) -> Result<Report> {
    let mut rw = Rewriter::new(plan, false);
    let mut fpos = 0u64;
    let mut next_offset: i64 = 0;
    let mut views: Vec<RecordView> = Vec::new();
    // output batches, back to back, written out in chunks of WRITE_CHUNK
    let mut buf: Vec<u8> = Vec::new();
    let mut actions: Vec<Action> = Vec::new();
    let mut expect_in: i64 = 0;
    let mut expect_epoch = plan.epoch;
    let mut footer_seen = false;
    let dry_run = out.is_none();
    while let Some((h, bytes)) = src.next_batch(fpos)? {
        batch::validate(&h, bytes, fpos)?;
        if h.base_offset != expect_in {
            return Err(Error::corrupt(fpos, Some(h.base_offset), format!("batch base offset {} where offset {expect_in} was expected (snapshot offsets start at 0 and are contiguous)", h.base_offset)));
        }
        if h.records_count as i64 != h.last_offset_delta as i64 + 1 {
            return Err(Error::corrupt(fpos, Some(h.base_offset), format!(
                "{} records but a lastOffsetDelta of {} (a snapshot's batches hold one offset per record)",
                h.records_count, h.last_offset_delta)));
        }
        expect_in = h.base_offset + h.last_offset_delta as i64 + 1;
        let epoch = *expect_epoch.get_or_insert(h.partition_leader_epoch);
        if h.partition_leader_epoch != epoch {
            return Err(Error::corrupt(fpos, Some(h.base_offset), format!("batch leader epoch {} differs from the snapshot epoch {epoch}", h.partition_leader_epoch)));
        }
        rw.report.batches_in += 1;
        rw.report.bytes_in += bytes.len() as u64;
        let data = batch::records_data(&h, bytes, fpos)?;
        let d = data.bytes();
        views.clear();
        batch::parse_records(&h, d, fpos, &mut views)?;
        rw.report.records_in += views.len() as u64;

        actions.clear();
        rw.arena.clear();
        // a dry run needs the bytes of new values only to compress them
        rw.measure_only = dry_run && h.codec_id() == 0;
        let mut all_kept = true;
        let mut same_size = true;
        if footer_seen {
            return Err(Error::corrupt(fpos, Some(h.base_offset), "batch after the SnapshotFooter"));
        }
        if rw.report.batches_in == 1 {
            let first = views.first().and_then(|r| r.key.as_ref()).map(|k| &d[k.start as usize..k.end as usize]);
            if !h.is_control() || batch::parse_control_key(first).map(|(_, t)| t) != Ok(SNAPSHOT_HEADER) {
                return Err(Error::corrupt(fpos, Some(h.base_offset), "the snapshot does not start with a SnapshotHeader"));
            }
        }
        if h.is_control() {
            let last = views.last().and_then(|r| r.key.as_ref()).map(|k| &d[k.start as usize..k.end as usize]);
            footer_seen = batch::parse_control_key(last).map(|(_, t)| t) == Ok(SNAPSHOT_FOOTER);
        }
        for r in &views {
            let value = r.value.as_ref().map(|v| &d[v.start as usize..v.end as usize]);
            let key = r.key.as_ref().map(|k| &d[k.start as usize..k.end as usize]);
            let off = h.base_offset + r.offset_delta as i64;
            let a = if h.is_control() { rw.control(key, value, off, fpos)? } else { rw.data(value, off, fpos)? };
            match &a {
                Action::Keep => {}
                Action::SetVersion { .. } => all_kept = false,
                Action::Drop => {
                    all_kept = false;
                    same_size = false;
                }
                Action::Replace(v) => {
                    all_kept = false;
                    same_size &= r.value.as_ref().is_some_and(|x| (x.end - x.start) as usize == v.len());
                }
                Action::Resized(n) => {
                    all_kept = false;
                    same_size &= r.value.as_ref().is_some_and(|x| (x.end - x.start) as usize == *n);
                }
            }
            actions.push(a);
        }
        let kept = actions.iter().filter(|a| !matches!(a, Action::Drop)).count();
        fpos += bytes.len() as u64;
        if kept == 0 {
            continue;
        }
        rw.report.batches_out += 1;
        rw.report.records_out += kept as u64;
        let at = buf.len();
        if all_kept && h.codec_id() == 0 {
            // untouched: the same bytes at the new base offset (outside the CRC)
            rw.report.bytes_out += bytes.len() as u64;
            if !dry_run {
                buf.extend_from_slice(&next_offset.to_be_bytes());
                buf.extend_from_slice(&bytes[8..]);
            }
        } else if h.codec_id() == 0 && same_size {
            // every new value has the length of the old one (e.g. only the version in the
            // frame changed): patch them into a copy of the batch and recompute its CRC
            rw.report.bytes_out += bytes.len() as u64;
            if !dry_run {
                buf.extend_from_slice(bytes);
                let b = &mut buf[at..];
                for (r, a) in views.iter().zip(&actions) {
                    let Some(x) = r.value.as_ref() else { continue };
                    let start = batch::RECORD_BATCH_OVERHEAD + x.start as usize;
                    match a {
                        Action::Replace(v) => b[start..start + v.len()].copy_from_slice(&rw.arena[v.clone()]),
                        Action::SetVersion { at, to } => b[start + *at as usize] = *to,
                        Action::Resized(_) => unreachable!("sizes only in dry runs"),
                        Action::Keep | Action::Drop => {}
                    }
                }
                builder::set_base_offset(b, next_offset);
                let crc = batch::compute_crc(b);
                b[batch::CRC_OFFSET..batch::CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
            }
        } else {
            // batches that change size are built anew: the kept records carried over (new
            // values, headers as they were), offsets renumbered, timestamps kept; a version
            // patch becomes a patched copy
            for (r, a) in views.iter().zip(actions.iter_mut()) {
                if let (Action::SetVersion { at, to }, Some(v)) = (&*a, r.value.as_ref()) {
                    let s = rw.arena.len();
                    rw.arena.extend_from_slice(&d[v.start as usize..v.end as usize]);
                    rw.arena[s + *at as usize] = *to;
                    *a = Action::Replace(s..rw.arena.len());
                }
            }
            let raw = |(r, a): (&RecordView, &Action)| -> Option<RawRecord> {
                let slice = |x: &std::ops::Range<u32>| &d[x.start as usize..x.end as usize];
                let value = match a {
                    Action::Drop => return None,
                    Action::Replace(v) => Some(&rw.arena[v.clone()]),
                    Action::Keep => r.value.as_ref().map(slice),
                    Action::SetVersion { .. } => unreachable!("patched into the arena above"),
                    Action::Resized(_) => unreachable!("sizes only when measuring"),
                };
                Some(RawRecord { timestamp: h.base_timestamp + r.timestamp_delta, key: r.key.as_ref().map(slice), value, header_count: r.header_count, headers: slice(&r.headers) })
            };
            let records = || views.iter().zip(&actions).filter_map(raw);
            let base = views.iter().zip(&actions).find(|(_, a)| !matches!(a, Action::Drop)).map_or(-1, |(r, _)| h.base_timestamp + r.timestamp_delta);
            if rw.measure_only {
                // the size it would have is enough
                let mut size = batch::RECORD_BATCH_OVERHEAD;
                let mut i = 0i32;
                for (r, a) in views.iter().zip(&actions) {
                    let len = |x: &std::ops::Range<u32>| (x.end - x.start) as usize;
                    let value = match a {
                        Action::Drop => continue,
                        Action::Resized(n) => Some(*n),
                        Action::Replace(v) => Some(v.len()),
                        Action::Keep | Action::SetVersion { .. } => r.value.as_ref().map(len),
                    };
                    let ts = h.base_timestamp + r.timestamp_delta;
                    size += builder::record_size(i, ts.wrapping_sub(base), r.key.as_ref().map(len), value, r.header_count, len(&r.headers));
                    i += 1;
                }
                rw.report.bytes_out += size as u64;
            } else {
                let params = BatchParams {
                    base_offset: next_offset,
                    partition_leader_epoch: h.partition_leader_epoch,
                    producer_id: h.producer_id,
                    producer_epoch: h.producer_epoch,
                    base_sequence: h.base_sequence,
                    transactional: h.is_transactional(),
                    control: h.is_control(),
                    log_append_time: h.is_log_append_time(),
                    codec: h.codec().unwrap_or(crate::compression::Codec::None),
                    ..BatchParams::default()
                };
                builder::encode_batch_with(&params, kept, base, h.max_timestamp, d.len(), &mut buf, |out| {
                    for (i, r) in records().enumerate() {
                        r.write(out, i as i32, r.timestamp.wrapping_sub(base));
                    }
                })
                .map_err(|e| e.at(fpos, Some(h.base_offset)))?;
                rw.report.bytes_out += (buf.len() - at) as u64;
                if dry_run {
                    buf.truncate(at); // compressed: its size is known once encoded
                }
            }
        }
        next_offset += kept as i64;
        if buf.len() >= WRITE_CHUNK {
            if let Some(w) = out.as_mut() {
                w.write_all(&buf)?;
            }
            buf.clear();
        }
    }
    if rw.report.batches_in == 0 {
        return Err(Error::new(ErrorKind::Corrupt, "empty snapshot: no batches"));
    }
    if !footer_seen {
        return Err(Error::new(ErrorKind::Truncated, "no SnapshotFooter at the end: the snapshot is incomplete").at(fpos, None));
    }
    if let Some(w) = out.as_mut() {
        w.write_all(&buf)?;
    }
    Ok(rw.report)
}
