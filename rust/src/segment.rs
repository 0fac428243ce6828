//! Segment files: scanning and validating a `.log`, recovery (rebuilding indexes and finding
//! the valid prefix), index verification, and appending to an active segment.

use crate::batch::{self, BatchHeader, NextBatch, RecordView};
use crate::error::{Error, ErrorKind, Result};
use crate::index::{self, IndexBuilder, OffsetEntry, TimeEntry};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

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
pub fn scan(buf: &[u8], opts: ScanOptions, mut builder: Option<&mut IndexBuilder>) -> ScanReport {
    let mut rep = ScanReport { total_bytes: buf.len() as u64, max_timestamp: -1, ..Default::default() };
    let mut pos = 0usize;
    let mut records: Vec<RecordView> = Vec::new();
    let mut next_expected: Option<i64> = None;
    loop {
        let (h, range) = match batch::next_batch(buf, pos, 0) {
            Ok(NextBatch::End) => break,
            Ok(NextBatch::Batch(h, r)) => (h, r),
            Err(e) => {
                rep.error = Some(e);
                break;
            }
        };
        let fpos = pos as u64;
        let bytes = &buf[range.clone()];
        if let Err(e) = check_batch(&h, bytes, fpos, opts, next_expected, &mut records) {
            rep.error = Some(e);
            break;
        }
        if let Some(b) = builder.as_deref_mut() {
            if let Err(e) = b.on_recovered_batch(h.last_offset(), h.max_timestamp, fpos, bytes.len()) {
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
        pos = range.end;
        rep.valid_bytes = pos as u64;
    }
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

/// What one append did.
#[derive(Debug, Clone)]
pub struct AppendInfo {
    pub first_offset: i64,
    pub last_offset: i64,
    pub batches: u32,
    pub records: u64,
    pub position: u64,
    pub size: usize,
    pub epochs: Vec<(i32, i64)>,
}

/// Validates a set of batches to append (complete, CRC-valid, offsets increasing).
/// Returns (info without position, largest timestamp, offset Kafka pairs with it).
pub fn inspect_append(data: &[u8], next_offset: Option<i64>) -> Result<(AppendInfo, i64, i64)> {
    let rep = scan(data, ScanOptions::default(), None);
    if let Some(e) = rep.error {
        return Err(e);
    }
    if rep.batches == 0 {
        return Err(Error::invalid("nothing to append: no batches"));
    }
    let first = rep.first_offset.unwrap();
    if let Some(n) = next_offset {
        if first < n {
            return Err(Error::invalid(format!("first offset {first} of the append is below the log end offset {n}")));
        }
    }
    // As Kafka's LogValidator: the max timestamp and the last offset of the first batch
    // holding it (the "shallow" offset). With no timestamps at all it stays (-1, -1), which
    // the index rules then ignore.
    let mut pos = 0;
    let mut best = (-1i64, -1i64);
    while let Ok(NextBatch::Batch(h, r)) = batch::next_batch(data, pos, 0) {
        if h.max_timestamp > best.0 {
            best = (h.max_timestamp, h.last_offset());
        }
        pos = r.end;
    }
    let info = AppendInfo {
        first_offset: first,
        last_offset: rep.last_offset.unwrap(),
        batches: rep.batches as u32,
        records: rep.records,
        position: 0,
        size: data.len(),
        epochs: rep.epochs,
    };
    Ok((info, best.0, best.1))
}

pub fn segment_file_name(base_offset: i64, suffix: &str) -> String {
    format!("{base_offset:020}{suffix}")
}

/// Writes a whole index file atomically (see [`crate::fsutil::write_atomic`]).
fn write_atomic(path: &Path, data: &[u8]) -> Result<()> {
    Ok(crate::fsutil::write_atomic(path, data, 0o666)?)
}

/// A segment open for appends: the `.log` file and the indexes it builds.
pub struct ActiveSegment {
    pub dir: PathBuf,
    pub base_offset: i64,
    pub size: u64,
    pub next_offset: Option<i64>,
    file: File,
    pub index: IndexBuilder,
    /// How many bytes of each index (offset, time) are in the files already.
    index_written: (usize, usize),
}

impl ActiveSegment {
    pub fn log_path(&self) -> PathBuf {
        self.dir.join(segment_file_name(self.base_offset, ".log"))
    }

    /// Creates a new, empty segment (fails if the `.log` exists).
    pub fn create(dir: &Path, base_offset: i64, interval: usize) -> Result<Self> {
        let path = dir.join(segment_file_name(base_offset, ".log"));
        let file = OpenOptions::new().create_new(true).append(true).open(&path)?;
        Ok(ActiveSegment {
            dir: dir.to_path_buf(),
            base_offset,
            size: 0,
            next_offset: None,
            file,
            index: IndexBuilder::new(base_offset, interval),
            index_written: (usize::MAX, usize::MAX),
        })
    }

    /// Opens an existing segment for appends, rebuilding its indexes with the recovery rule.
    /// A corrupt or torn tail is an error unless `truncate` is set; then it is cut off.
    pub fn open(dir: &Path, base_offset: i64, interval: usize, truncate: bool) -> Result<(Self, ScanReport)> {
        let path = dir.join(segment_file_name(base_offset, ".log"));
        let data = read_segment(&path)?;
        let rec = recover(&data, base_offset, interval);
        if let Some(e) = &rec.report.error {
            if !truncate {
                return Err(e.clone());
            }
            let f = OpenOptions::new().write(true).open(&path)?;
            f.set_len(rec.report.valid_bytes)?;
            f.sync_all()?;
        }
        let file = OpenOptions::new().append(true).open(&path)?;
        // Kafka restarts the interval counter when a segment is loaded (`recover` does too).
        let index = rec.index;
        // Index files that disagree with the (possibly truncated) log are replaced, so that
        // readers of the files never follow an entry past the end.
        for (suffix, bytes) in [(".index", &index.offset_index), (".timeindex", &index.time_index)] {
            let p = dir.join(segment_file_name(base_offset, suffix));
            if crate::fsutil::read_input(&p, None).ok().as_ref() != Some(bytes) {
                write_atomic(&p, bytes)?;
            }
        }
        let written = (index.offset_index.len(), index.time_index.len());
        let seg = ActiveSegment {
            dir: dir.to_path_buf(),
            base_offset,
            size: rec.report.valid_bytes,
            next_offset: rec.report.last_offset.map(|o| o + 1),
            file,
            index,
            index_written: written,
        };
        Ok((seg, rec.report))
    }

    /// Appends one set of batches (one `LogSegment.append` call). The indexes advance batch by
    /// batch, as Kafka's `LogSegment.append` does since 3.7 (and as recovery does): an entry names
    /// the last offset of the batch at its position, never the last offset of the whole set at
    /// the position of its first batch (which `verify-log` rightly rejects).
    pub fn append(&mut self, data: &[u8]) -> Result<AppendInfo> {
        let (mut info, _max_ts, _off_of_max) = inspect_append(data, self.next_offset)?;
        if info.last_offset - self.base_offset > i32::MAX as i64 || info.first_offset < self.base_offset {
            return Err(Error::invalid(format!("offsets {}..{} do not fit segment with base offset {}", info.first_offset, info.last_offset, self.base_offset)));
        }
        let position = self.size;
        self.file.write_all(data)?;
        let mut pos = 0usize;
        // inspect_append checked every batch of `data`: the walk sees exactly those batches
        while let Ok(NextBatch::Batch(h, r)) = batch::next_batch(data, pos, 0) {
            self.index.on_recovered_batch(h.last_offset(), h.max_timestamp, position + pos as u64, r.len())?;
            pos = r.end;
        }
        self.size += data.len() as u64;
        self.next_offset = Some(info.last_offset + 1);
        info.position = position;
        Ok(info)
    }

    /// fsyncs the log and brings the index files up to date. The index entries written since
    /// the last flush are appended to the files without an fsync of their own: an active
    /// segment's indexes are rebuilt from its log whenever it is opened (as Kafka rebuilds the
    /// indexes of segments past the recovery point), so only the log needs to be durable here.
    pub fn flush(&mut self) -> Result<()> {
        self.file.sync_data()?;
        if self.index_written == (usize::MAX, usize::MAX) {
            self.write_indexes()?;
        } else {
            for (suffix, bytes, done) in [
                (".index", &self.index.offset_index, self.index_written.0),
                (".timeindex", &self.index.time_index, self.index_written.1),
            ] {
                if bytes.len() > done {
                    let path = self.dir.join(segment_file_name(self.base_offset, suffix));
                    let mut f = OpenOptions::new().create(true).append(true).open(&path)?;
                    f.write_all(&bytes[done..])?;
                }
            }
        }
        self.index_written = (self.index.offset_index.len(), self.index.time_index.len());
        Ok(())
    }

    fn write_indexes(&self) -> Result<()> {
        write_atomic(&self.dir.join(segment_file_name(self.base_offset, ".index")), &self.index.offset_index)?;
        write_atomic(&self.dir.join(segment_file_name(self.base_offset, ".timeindex")), &self.index.time_index)?;
        Ok(())
    }

    /// Closes (or rolls) the segment: the final time-index entry, trimmed indexes, fsync.
    pub fn close(mut self) -> Result<()> {
        self.index.finish()?;
        self.file.sync_all()?;
        self.write_indexes()
    }
}

/// The bytes of a segment to append to or truncate: a regular file (a FIFO in its place would
/// block the open forever), its path in the error.
fn read_segment(path: &Path) -> Result<Vec<u8>> {
    crate::fsutil::read_input(path, None).map_err(|e| Error::new(ErrorKind::Io, format!("{}: {e}", path.display())))
}

/// Truncates a segment so that it holds only offsets < `offset` (whole batches, as Kafka does:
/// a batch containing `offset` is removed). Rewrites its indexes. Returns the new size.
pub fn truncate_segment(dir: &Path, base_offset: i64, offset: i64, interval: usize) -> Result<u64> {
    let path = dir.join(segment_file_name(base_offset, ".log"));
    let data = read_segment(&path)?;
    let mut pos = 0usize;
    loop {
        match batch::next_batch(&data, pos, 0) {
            Ok(NextBatch::Batch(h, r)) => {
                if h.last_offset() >= offset {
                    break;
                }
                pos = r.end;
            }
            Ok(NextBatch::End) => break,
            Err(e) => return Err(e),
        }
    }
    let f = OpenOptions::new().write(true).open(&path)?;
    f.set_len(pos as u64)?;
    f.sync_all()?;
    let rec = recover(&data[..pos], base_offset, interval);
    write_atomic(&dir.join(segment_file_name(base_offset, ".index")), &rec.index.offset_index)?;
    write_atomic(&dir.join(segment_file_name(base_offset, ".timeindex")), &rec.index.time_index)?;
    Ok(pos as u64)
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
