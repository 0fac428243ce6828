//! Appending to an active segment (the `.log` and the indexes it builds) and truncating a segment.

use super::{recover, scan, ScanOptions, ScanReport};
use crate::batch::{self, NextBatch};
use crate::error::{Error, ErrorKind, Result};
use crate::index::IndexBuilder;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

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
