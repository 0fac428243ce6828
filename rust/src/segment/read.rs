//! Scanning a segment file through a reused buffer (`pread` into it, batch after batch) instead
//! of mapping it: the fallback of [`scan_file`] when the mapped scan cannot be used or the file
//! shrank under it (see [`super::mapped`]).
//!
//! The file is read up to the length it had when it was opened (a file growing meanwhile is
//! read as it was); a read that comes up short ends the file there. The batches and the errors
//! (kind, position, offset, reason) are those of [`super::scan`] over the same bytes in memory:
//! each batch is handed to `batch::next_batch` with exactly the bytes the whole-file scan would
//! let it see (the batch, or what is left of the file when the batch runs past its end).

use super::{scan_from, BatchSource, ScanOptions, ScanReport};
use crate::batch::{self, BatchHeader, NextBatch, RECORD_BATCH_OVERHEAD};
use crate::error::{Error, ErrorKind, Result};
use std::cell::RefCell;
use std::fs::File;
use std::os::unix::fs::FileExt;

/// Bytes read per `pread` (and the buffer's size): small enough to stay in a core's L2 cache
/// while the batches in it are checked, large enough that the system calls cost nothing (64 KiB
/// to 4 MiB measured the same).
pub const READ_CHUNK: usize = 256 << 10;

thread_local! {
    /// One buffer per thread, reused file after file (one grown past `READ_CHUNK` for a large
    /// batch is dropped after its file).
    static BUFFER: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// The batches of `file` (`len` bytes long when opened), read through a buffer.
struct FileBatches<'a> {
    file: &'a File,
    /// The file's length: fstat's when opened, less if a read found it shorter.
    len: u64,
    buf: Vec<u8>,
    /// File position of `buf[0]`.
    start: u64,
    /// Bytes of `buf` holding file data.
    filled: usize,
}

impl FileBatches<'_> {
    /// Makes sure `buf` holds the `n` bytes from file position `pos` (fewer if the file ends
    /// first: then `len` is where it ended). `pos` never goes back.
    fn ensure(&mut self, pos: u64, n: usize) -> Result<()> {
        if self.start + self.filled as u64 >= pos + n as u64 {
            return Ok(());
        }
        // keep the bytes from `pos` on, at the front
        let keep = (pos - self.start) as usize;
        self.buf.copy_within(keep..self.filled, 0);
        self.filled -= keep;
        self.start = pos;
        if self.buf.len() < n {
            // a batch larger than the buffer: room for it (it is in the file: n <= len - pos)
            self.buf.resize(n, 0);
        }
        while self.filled < n {
            let at = self.start + self.filled as u64;
            let room = (self.buf.len() - self.filled).min((self.len - at) as usize);
            if room == 0 {
                break;
            }
            match self.file.read_at(&mut self.buf[self.filled..self.filled + room], at) {
                Ok(0) => {
                    // shorter than when it was opened: it ends here
                    self.len = at;
                    break;
                }
                Ok(k) => self.filled += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error { kind: ErrorKind::Io, position: Some(at), offset: None, reason: format!("read failed at byte {at}: {e}") }),
            }
        }
        Ok(())
    }
}

impl BatchSource for FileBatches<'_> {
    fn batch_at(&mut self, pos: u64) -> Result<Option<(BatchHeader, &[u8])>> {
        let left = |s: &Self| s.len.saturating_sub(pos);
        // the header first (or what the file has of it), then the whole batch its length says
        self.ensure(pos, left(self).min(RECORD_BATCH_OVERHEAD as u64) as usize)?;
        let mut want = left(self).min(RECORD_BATCH_OVERHEAD as u64);
        let off = (pos - self.start) as usize;
        if want >= 12 {
            let length = i32::from_be_bytes(self.buf[off + 8..off + 12].try_into().unwrap());
            if length >= 0 {
                // never less than the header: a length too small to be a batch is
                // `next_batch`'s to report, with the bytes the whole-file scan would show it
                want = left(self).min((length as u64 + 12).max(RECORD_BATCH_OVERHEAD as u64));
                self.ensure(pos, want as usize)?;
                want = want.min(left(self));
            }
        }
        let off = (pos - self.start) as usize;
        match batch::next_batch(&self.buf[..off + want as usize], off, self.start)? {
            NextBatch::End => Ok(None),
            NextBatch::Batch(h, r) => Ok(Some((h, &self.buf[r]))),
        }
    }
    fn total_bytes(&self) -> u64 {
        self.len
    }
}

/// [`super::scan`] of the open regular file `file`, `len` bytes long when it was opened (a file
/// growing since is scanned as it was, one shrinking since reports a truncated batch where it now
/// ends): mapped, with a truncation under the scan caught ([`super::mapped`]), or else read through
/// a reused buffer ([`scan_file_buffered`]).
pub fn scan_file(file: &File, len: u64, opts: ScanOptions) -> ScanReport {
    match super::mapped::scan_mapped(file, len, opts) {
        Some(rep) => rep,
        None => scan_file_buffered(file, len, opts),
    }
}

/// [`super::scan`] of the open regular file `file`, `len` bytes long, read through a reused
/// buffer rather than mapped.
pub fn scan_file_buffered(file: &File, len: u64, opts: ScanOptions) -> ScanReport {
    let mut buf = BUFFER.with(|b| std::mem::take(&mut *b.borrow_mut()));
    if buf.len() != READ_CHUNK {
        buf = vec![0; READ_CHUNK];
    }
    let mut src = FileBatches { file, len, buf, start: 0, filled: 0 };
    let rep = scan_from(&mut src, opts, None);
    if src.buf.len() == READ_CHUNK {
        BUFFER.with(|b| *b.borrow_mut() = src.buf);
    }
    rep
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::{encode_batch, BatchParams, RecordInput};
    use std::io::Write;

    fn log_of(batches: &[(i64, usize, usize)]) -> Vec<u8> {
        let mut out = Vec::new();
        for &(base, n, vlen) in batches {
            let v = vec![7u8; vlen];
            let recs: Vec<RecordInput> = (0..n).map(|i| RecordInput { timestamp: 5 + i as i64, key: None, value: Some(&v), headers: vec![] }).collect();
            encode_batch(&BatchParams { base_offset: base, ..Default::default() }, &recs, &mut out).unwrap();
        }
        out
    }

    fn file_with(data: &[u8]) -> (File, std::path::PathBuf) {
        let n = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
        let p = std::env::temp_dir().join(format!("kraftkit-read-{}-{n}.log", std::process::id()));
        std::fs::File::create(&p).unwrap().write_all(data).unwrap();
        (File::open(&p).unwrap(), p)
    }

    fn same(a: &ScanReport, b: &ScanReport) {
        assert_eq!((a.batches, a.records, a.valid_bytes, a.total_bytes), (b.batches, b.records, b.valid_bytes, b.total_bytes));
        assert_eq!((a.first_offset, a.last_offset, a.max_timestamp, a.gap_count), (b.first_offset, b.last_offset, b.max_timestamp, b.gap_count));
        assert_eq!(a.epochs, b.epochs);
        assert_eq!(a.gaps, b.gaps);
        let e = |r: &ScanReport| r.error.as_ref().map(|e| (e.kind, e.position, e.offset, e.reason.clone()));
        assert_eq!(e(a), e(b));
    }

    #[test]
    fn every_cut_and_every_damaged_byte_reads_as_the_mapped_scan_does() {
        // batches around and across the buffer's size, one larger than it
        let log = log_of(&[(0, 3, 100), (3, 40, 9000), (43, 1, READ_CHUNK + 1000), (44, 2, 10), (50, 5, 200_000), (55, 1, 3)]);
        let opts = [ScanOptions::default(), ScanOptions { deep: true, dense: true, ..Default::default() }];
        let cuts: Vec<usize> = (0..log.len()).step_by(997).chain([0, 1, 11, 12, 16, 17, 60, 61, 62, log.len() - 1, log.len()]).collect();
        for &cut in &cuts {
            let (f, p) = file_with(&log[..cut]);
            for o in opts {
                same(&scan_file_buffered(&f, cut as u64, o), &super::super::scan(&log[..cut], o, None));
            }
            std::fs::remove_file(p).unwrap();
        }
        let mut bad = log.clone();
        for at in (0..log.len()).step_by(4099).chain([8, 9, 10, 11, 16, 17, 23, 57]) {
            bad[at] ^= 0x5a;
            let (f, p) = file_with(&bad);
            for o in opts {
                same(&scan_file_buffered(&f, bad.len() as u64, o), &super::super::scan(&bad, o, None));
            }
            std::fs::remove_file(p).unwrap();
            bad[at] ^= 0x5a;
        }
    }

    #[test]
    fn a_file_shorter_than_its_opened_length_ends_where_it_ends() {
        let log = log_of(&[(0, 3, 100), (3, 2, 5000)]);
        let (f, p) = file_with(&log);
        // truncated by another process after it was opened: the reads find 700 bytes fewer
        std::fs::OpenOptions::new().write(true).open(&p).unwrap().set_len(log.len() as u64 - 700).unwrap();
        for rep in [scan_file_buffered(&f, log.len() as u64, ScanOptions::default()), scan_file(&f, log.len() as u64, ScanOptions::default())] {
            same(&rep, &super::super::scan(&log[..log.len() - 700], ScanOptions::default(), None));
            assert_eq!(rep.error.as_ref().unwrap().kind, ErrorKind::Truncated);
        }
        std::fs::remove_file(p).unwrap();
    }
}
