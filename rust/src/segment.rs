//! Segment files: scanning and validating a `.log`, recovery (rebuilding indexes and finding
//! the valid prefix), index verification, and appending to an active segment.

use crate::batch::{self, BatchHeader, NextBatch, RecordView};
use crate::error::{Error, Result};
use crate::index::{self, IndexBuilder, OffsetEntry, TimeEntry};

mod active;
pub mod mapped;
pub mod read;

pub use active::{inspect_append, segment_file_name, truncate_segment, ActiveSegment, AppendInfo};

/// What a scan of a segment found. `error` is the first problem; everything before
/// `valid_bytes` is intact.
#[derive(Debug, Clone, Default)]
pub struct ScanReport {
    pub batches: u64,
    pub records: u64,
    pub valid_bytes: u64,
    pub total_bytes: u64,
    pub first_offset: Option<i64>,
    pub last_offset: Option<i64>,
    pub max_timestamp: i64,
    /// (partition leader epoch, base offset) each time the epoch grows, as Kafka's cache records it.
    pub epochs: Vec<(i32, i64)>,
    /// Batches that start above the offset after the previous batch (the first `MAX_GAPS`);
    /// `gap_count` counts them all. Legitimate in a compacted partition, a hole in a KRaft log.
    pub gaps: Vec<Gap>,
    pub gap_count: u64,
    pub error: Option<Error>,
}

/// A batch at byte `position` whose base offset is above `expected`, the offset after the
/// batch before it: offsets `expected..base_offset` are not in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gap {
    pub position: u64,
    pub base_offset: i64,
    pub expected: i64,
}

/// How many gaps a scan lists (it counts them all): a hostile file cannot make the list grow
/// with its size.
pub const MAX_GAPS: usize = 100;

#[derive(Debug, Clone, Copy)]
pub struct ScanOptions {
    pub verify_crc: bool,
    /// Decompress and parse every record.
    pub deep: bool,
    /// Require offsets to increase from batch to batch.
    pub check_offsets: bool,
    /// The segment's base offset (from its file name): every offset must be stored relative
    /// to it in an int32, as Kafka requires (`LogSegmentOffsetOverflowException`).
    pub base_offset: Option<i64>,
    /// A KRaft log or snapshot (never compacted): every batch holds lastOffsetDelta + 1
    /// records, numbered 0..n-1 (the numbering is checked with `deep`).
    pub dense: bool,
}

impl Default for ScanOptions {
    fn default() -> Self {
        ScanOptions { verify_crc: true, deep: false, check_offsets: true, base_offset: None, dense: false }
    }
}

/// Scans `buf` (a whole `.log` file) batch by batch and stops at the first problem.
/// With `builder`, indexes are rebuilt the way Kafka's recovery does.
pub fn scan(buf: &[u8], opts: ScanOptions, builder: Option<&mut IndexBuilder>) -> ScanReport {
    scan_from(&mut SliceBatches(buf), opts, builder)
}

/// Where a scan takes its batches from: a whole file in memory ([`scan`]) or a file read through
/// a reused buffer ([`read::scan_file`]). Both give the same batches and the same errors.
pub(crate) trait BatchSource {
    /// The batch at byte `pos` of the file (the end of the previous one): its header and bytes,
    /// None at the end, or why there is no batch there.
    fn batch_at(&mut self, pos: u64) -> Result<Option<(BatchHeader, &[u8])>>;
    /// The file's length in bytes (as far as it could be read).
    fn total_bytes(&self) -> u64;
}

struct SliceBatches<'a>(&'a [u8]);

impl BatchSource for SliceBatches<'_> {
    fn batch_at(&mut self, pos: u64) -> Result<Option<(BatchHeader, &[u8])>> {
        match batch::next_batch(self.0, pos as usize, 0)? {
            NextBatch::End => Ok(None),
            NextBatch::Batch(h, r) => Ok(Some((h, &self.0[r]))),
        }
    }
    fn total_bytes(&self) -> u64 {
        self.0.len() as u64
    }
}

pub(crate) fn scan_from(src: &mut impl BatchSource, opts: ScanOptions, mut builder: Option<&mut IndexBuilder>) -> ScanReport {
    let mut rep = ScanReport { max_timestamp: -1, ..Default::default() };
    let mut pos = 0u64;
    let mut records: Vec<RecordView> = Vec::new();
    let mut next_expected: Option<i64> = None;
    loop {
        let (h, bytes) = match src.batch_at(pos) {
            Ok(None) => break,
            Ok(Some(b)) => b,
            Err(e) => {
                rep.error = Some(e);
                break;
            }
        };
        let fpos = pos;
        if let Err(e) = check_batch(&h, bytes, fpos, opts, next_expected, &mut records) {
            rep.error = Some(e);
            break;
        }
        let size = bytes.len();
        if let Some(b) = builder.as_deref_mut() {
            if let Err(e) = b.on_recovered_batch(h.last_offset(), h.max_timestamp, fpos, size) {
                rep.error = Some(e.at(fpos, Some(h.base_offset)));
                break;
            }
        }
        if let Some(n) = next_expected {
            if h.base_offset > n {
                rep.gap_count += 1;
                if rep.gaps.len() < MAX_GAPS {
                    rep.gaps.push(Gap { position: fpos, base_offset: h.base_offset, expected: n });
                }
            }
        }
        if h.partition_leader_epoch >= 0 && rep.epochs.last().is_none_or(|&(e, _)| h.partition_leader_epoch > e) {
            rep.epochs.push((h.partition_leader_epoch, h.base_offset));
        }
        rep.batches += 1;
        rep.records += h.records_count.max(0) as u64;
        rep.first_offset.get_or_insert(h.base_offset);
        rep.last_offset = Some(h.last_offset());
        rep.max_timestamp = rep.max_timestamp.max(h.max_timestamp);
        next_expected = Some(h.last_offset() + 1);
        pos += size as u64;
        rep.valid_bytes = pos;
    }
    rep.total_bytes = src.total_bytes();
    rep
}

fn check_batch(h: &BatchHeader, bytes: &[u8], fpos: u64, opts: ScanOptions, next_expected: Option<i64>, records: &mut Vec<RecordView>) -> Result<()> {
    if opts.verify_crc {
        batch::validate(h, bytes, fpos)?;
    }
    if let Some(base) = opts.base_offset {
        let rel = h.last_offset() - base;
        if !(0..=i32::MAX as i64).contains(&rel) {
            return Err(Error::corrupt(fpos, Some(h.base_offset), format!("batch last offset {} cannot be stored relative to the segment's base offset {base}", h.last_offset())));
        }
    }
    if opts.check_offsets {
        if let Some(n) = next_expected {
            if h.base_offset < n {
                return Err(Error::corrupt(fpos, Some(h.base_offset), format!("batch base offset {} is below the next expected offset {n}", h.base_offset)));
            }
        }
    }
    if opts.dense {
        check_dense_header(h, fpos)?;
    }
    if opts.deep {
        let data = batch::records_data(h, bytes, fpos)?;
        records.clear();
        batch::parse_records(h, data.bytes(), fpos, records)?;
        for (i, r) in records.iter().enumerate() {
            if r.offset_delta < 0 || r.offset_delta > h.last_offset_delta {
                return Err(Error::corrupt(fpos, Some(h.base_offset), format!("record {i} has offset delta {} outside [0, {}]", r.offset_delta, h.last_offset_delta)));
            }
            if opts.dense && r.offset_delta as i64 != i as i64 {
                return Err(dense_delta_error(h, fpos, i, r.offset_delta));
            }
        }
    }
    Ok(())
}

/// A KRaft batch (log or snapshot: never compacted) holds exactly lastOffsetDelta + 1 records.
pub fn check_dense_header(h: &BatchHeader, fpos: u64) -> Result<()> {
    if h.records_count as i64 != h.last_offset_delta as i64 + 1 {
        return Err(Error::corrupt(fpos, Some(h.base_offset), format!(
            "lastOffsetDelta {} does not match the batch's {} records (a KRaft batch holds offsets base..base+records-1)",
            h.last_offset_delta, h.records_count)));
    }
    Ok(())
}

/// The error for record `i` of a KRaft batch whose offset delta is not `i`.
pub fn dense_delta_error(h: &BatchHeader, fpos: u64, i: usize, delta: i32) -> Error {
    Error::corrupt(fpos, Some(h.base_offset), format!("record {i} has offset delta {delta}, not {i} (KRaft numbers a batch's records 0..n-1)"))
}

/// Result of rebuilding a segment's indexes.
pub struct Recovery {
    pub report: ScanReport,
    /// The builder after the scan: its index bytes and its max-timestamp state.
    pub index: IndexBuilder,
}

/// Kafka's `LogSegment.recover`: rebuild both indexes over the valid prefix.
pub fn recover(buf: &[u8], base_offset: i64, interval: usize) -> Recovery {
    let mut b = IndexBuilder::new(base_offset, interval);
    let opts = ScanOptions { base_offset: Some(base_offset), ..Default::default() };
    let report = scan(buf, opts, Some(&mut b));
    // Kafka appends the largest timestamp on close, as a normally closed segment would have it.
    let _ = b.finish();
    b.bytes_since_last_entry = 0;
    Recovery { report, index: b }
}

/// A problem found while checking an index against its log.
#[derive(Debug, Clone)]
pub struct IndexProblem {
    pub file: &'static str,
    pub entry: usize,
    pub reason: String,
    /// Not a problem of the index: entries that point where the log could not be read, and
    /// so were not checked (the log's own error is the problem).
    pub unchecked: bool,
}

impl IndexProblem {
    fn new(file: &'static str, entry: usize, reason: String) -> Self {
        IndexProblem { file, entry, reason, unchecked: false }
    }
}

fn batch_at(buf: &[u8], position: usize) -> Option<BatchHeader> {
    if position > buf.len() {
        return None;
    }
    match batch::next_batch(buf, position, 0) {
        Ok(NextBatch::Batch(h, _)) => Some(h),
        _ => None,
    }
}

/// Checks index entries against the log like `kafka-dump-log --verify-index-only`
/// (an entry must point at a batch whose last offset is the indexed offset; time entries must
/// name a batch's last offset and its max timestamp, in increasing order).
/// `unreadable_from`: `log` is the valid prefix of a file that could not be read past that
/// byte; entries pointing past it are reported once, as not checked (`unchecked`).
pub fn verify_indexes(log: &[u8], base_offset: i64, offset_index: Option<&[u8]>, time_index: Option<&[u8]>, unreadable_from: Option<u64>) -> Vec<IndexProblem> {
    let mut problems = Vec::new();
    let mut oentries: Vec<OffsetEntry> = Vec::new();
    if let Some(data) = offset_index {
        if let Err(e) = index::sanity_check_offset_index(data, base_offset) {
            problems.push(IndexProblem::new("index", 0, e.reason));
        }
        oentries = index::read_offset_index(data, base_offset);
        let mut prev: Option<i64> = None;
        for (i, e) in oentries.iter().enumerate() {
            if let Some(p) = prev {
                if e.offset <= p {
                    problems.push(IndexProblem::new("index", i, format!("offset {} does not increase (previous {p})", e.offset)));
                }
            }
            prev = Some(e.offset);
            if let Some(p) = unreadable_from.filter(|_| e.position as usize >= log.len()) {
                let n = oentries.len() - i;
                problems.push(IndexProblem { file: "index", entry: i, reason: format!("{n} index entries (from offset {}) past byte {p} not checked: the log is unreadable from there", e.offset), unchecked: true });
                break;
            }
            if e.position as usize >= log.len() && !log.is_empty() {
                // Entries past the end: one problem for all of them, not one per entry.
                let n = oentries.len() - i;
                problems.push(IndexProblem::new("index", i, format!("{n} entries (from offset {}) point at or past the end of the valid log ({} bytes)", e.offset, log.len())));
                break;
            }
            match batch_at(log, e.position as usize) {
                None => problems.push(IndexProblem::new("index", i, format!("position {} for offset {} is not the start of a batch", e.position, e.offset))),
                Some(h) if h.last_offset() != e.offset => problems.push(IndexProblem::new(
                    "index",
                    i,
                    format!("index offset {}, log offset {} at position {}", e.offset, h.last_offset(), e.position),
                )),
                _ => {}
            }
        }
    }
    if let Some(data) = time_index {
        if let Err(e) = index::sanity_check_time_index(data, base_offset) {
            problems.push(IndexProblem::new("timeindex", 0, e.reason));
        }
        let tentries = index::read_time_index(data, base_offset);
        let mut prev_ts = -1i64;
        let last_offset = last_batch_offset(log);
        for (i, e) in tentries.iter().enumerate() {
            if let Some(p) = unreadable_from.filter(|_| last_offset.is_none_or(|l| e.offset > l)) {
                let n = tentries.len() - i;
                problems.push(IndexProblem { file: "timeindex", entry: i, reason: format!("{n} time index entries (from offset {}) past byte {p} not checked: the log is unreadable from there", e.offset), unchecked: true });
                break;
            }
            if last_offset.is_some_and(|l| e.offset > l) {
                let n = tentries.len() - i;
                problems.push(IndexProblem::new("timeindex", i, format!("{n} entries (from offset {}) are past the last offset of the valid log", e.offset)));
                break;
            }
            let start = index::lookup_offset(&oentries, e.offset).map_or(0, |o| o.position as usize);
            match find_batch_with_last_offset_at_least(log, start, e.offset) {
                None => problems.push(IndexProblem::new("timeindex", i, format!("indexed offset {} not found in the log", e.offset))),
                Some(h) if h.last_offset() != e.offset => problems.push(IndexProblem::new(
                    "timeindex",
                    i,
                    format!("indexed offset {} is not a batch's last offset (found {})", e.offset, h.last_offset()),
                )),
                Some(h) => {
                    if h.max_timestamp != e.timestamp && !h.is_log_append_time() {
                        problems.push(IndexProblem::new("timeindex", i, format!("index timestamp {}, log timestamp {}", e.timestamp, h.max_timestamp)));
                    }
                }
            }
            if prev_ts >= e.timestamp {
                problems.push(IndexProblem::new("timeindex", i, format!("index timestamp {} is not above the previous one {prev_ts}", e.timestamp)));
            }
            prev_ts = e.timestamp;
        }
    }
    problems
}

/// Last offset of the last complete batch of `log`.
fn last_batch_offset(log: &[u8]) -> Option<i64> {
    let mut pos = 0;
    let mut last = None;
    while let Ok(NextBatch::Batch(h, r)) = batch::next_batch(log, pos, 0) {
        last = Some(h.last_offset());
        pos = r.end;
    }
    last
}

fn find_batch_with_last_offset_at_least(log: &[u8], mut pos: usize, target: i64) -> Option<BatchHeader> {
    loop {
        match batch::next_batch(log, pos, 0) {
            Ok(NextBatch::Batch(h, r)) => {
                if h.last_offset() >= target {
                    return Some(h);
                }
                pos = r.end;
            }
            _ => return None,
        }
    }
}

/// Byte position of the first batch whose last offset is >= `target`, starting at the index
/// hint (Kafka's `translateOffset`). Returns the log size when every batch is below `target`.
pub fn position_of_offset(log: &[u8], entries: &[OffsetEntry], target: i64) -> Result<(usize, Option<BatchHeader>)> {
    let mut pos = index::lookup_offset(entries, target).map_or(0, |e| e.position as usize);
    loop {
        match batch::next_batch(log, pos, 0)? {
            NextBatch::End => return Ok((pos, None)),
            NextBatch::Batch(h, r) => {
                if h.last_offset() >= target {
                    return Ok((pos, Some(h)));
                }
                pos = r.end;
            }
        }
    }
}

/// Offset of the first record with timestamp >= `target` (Kafka's `findOffsetByTimestamp`).
pub fn offset_for_timestamp(log: &[u8], oentries: &[OffsetEntry], tentries: &[TimeEntry], target: i64) -> Result<Option<(i64, i64)>> {
    let start_offset = index::lookup_time(tentries, target).map(|t| t.offset);
    let mut pos = match start_offset {
        Some(o) => index::lookup_offset(oentries, o).map_or(0, |e| e.position as usize),
        None => 0,
    };
    loop {
        match batch::next_batch(log, pos, 0)? {
            NextBatch::End => return Ok(None),
            NextBatch::Batch(h, r) => {
                if h.max_timestamp >= target {
                    let bytes = &log[r.clone()];
                    let data = batch::records_data(&h, bytes, pos as u64)?;
                    let mut recs = Vec::new();
                    batch::parse_records(&h, data.bytes(), pos as u64, &mut recs)?;
                    for rec in &recs {
                        let ts = if h.is_log_append_time() { h.max_timestamp } else { h.base_timestamp + rec.timestamp_delta };
                        if ts >= target {
                            return Ok(Some((h.base_offset + rec.offset_delta as i64, ts)));
                        }
                    }
                }
                pos = r.end;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::{encode_batch, BatchParams, RecordInput};

    fn batch(base: i64, n: usize, out: &mut Vec<u8>) {
        let v = [1u8, 2, 3];
        let recs: Vec<RecordInput> = (0..n).map(|_| RecordInput { timestamp: 5, key: None, value: Some(&v), headers: vec![] }).collect();
        encode_batch(&BatchParams { base_offset: base, ..Default::default() }, &recs, out).unwrap();
    }

    #[test]
    fn gaps_between_batches_are_listed_not_errors() {
        let mut log = Vec::new();
        batch(0, 2, &mut log);
        let second = log.len() as u64;
        batch(5, 1, &mut log);
        batch(6, 1, &mut log);
        let r = scan(&log, ScanOptions { dense: true, deep: true, ..Default::default() }, None);
        assert!(r.error.is_none(), "{:?}", r.error);
        assert_eq!(r.gaps, vec![Gap { position: second, base_offset: 5, expected: 2 }]);
        assert_eq!((r.gap_count, r.batches), (1, 3));
    }

    #[test]
    fn dense_files_refuse_a_lying_last_offset_delta() {
        let mut log = Vec::new();
        batch(0, 2, &mut log);
        log[23..27].copy_from_slice(&5i32.to_be_bytes());
        let crc = batch::compute_crc(&log);
        log[17..21].copy_from_slice(&crc.to_be_bytes());
        let plain = scan(&log, ScanOptions::default(), None);
        assert!(plain.error.is_none(), "a compacted partition's batch may hold fewer records than its offsets");
        let e = scan(&log, ScanOptions { dense: true, ..Default::default() }, None).error.unwrap();
        assert!(e.reason.contains("lastOffsetDelta 5 does not match the batch's 2 records"), "{}", e.reason);
    }

    #[test]
    fn index_entries_past_an_unreadable_log_are_one_unchecked_note() {
        let mut log = Vec::new();
        batch(0, 1, &mut log);
        let valid = log.len();
        let mut oi = Vec::new();
        for (rel, pos) in [(3i32, 100i32), (7, 200), (9, 300)] {
            oi.extend_from_slice(&rel.to_be_bytes());
            oi.extend_from_slice(&pos.to_be_bytes());
        }
        let p = verify_indexes(&log, 0, Some(&oi), None, Some(valid as u64));
        assert_eq!(p.len(), 1);
        assert!(p[0].unchecked && p[0].reason.starts_with("3 index entries (from offset 3) past byte"), "{}", p[0].reason);
        // an intact log: the same entries are problems
        assert!(verify_indexes(&log, 0, Some(&oi), None, None).iter().all(|x| !x.unchecked));
        // nothing readable at all: still one note
        let p = verify_indexes(&[], 0, Some(&oi), None, Some(0));
        assert_eq!(p.len(), 1);
        assert!(p[0].unchecked);
    }
}
