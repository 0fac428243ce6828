//! Segment files from Python: reading (mmap), scanning, recovery, index checks, dumping,
//! appending, truncation.

use super::batch::{split_batches, RecordBatch};
use super::source::Backing;
use super::errors::{io_err, to_pyerr};
use crate::batch::{self, NextBatch};
use crate::dump::{DumpOptions, Dumper};
use crate::fsutil;
use crate::index::{self, DEFAULT_INDEX_INTERVAL};
use crate::segment::{self, ActiveSegment, ScanOptions, ScanReport};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use rayon::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// `Arc<Backing>` as a byte slice, for the generic renderer.
struct Shared(Arc<Backing>);
impl AsRef<[u8]> for Shared {
    fn as_ref(&self) -> &[u8] {
        self.0.bytes()
    }
}

/// A read-only map of the file (an empty file gets an empty buffer: a zero-length map is an
/// error). Only a regular file is opened, never blocking (see `fsutil`).
pub(crate) fn map_file(path: &str) -> PyResult<Backing> {
    match fsutil::map_input(Path::new(path)).map_err(|e| io_err(path, e))? {
        None => Ok(Backing::Vec(Vec::new())),
        Some(m) => Ok(Backing::Mmap(m)),
    }
}

/// Base offset from a segment name (`00000000000000000042.log` → 42); 0 when it has none.
fn base_offset_of(path: &str) -> i64 {
    let name = Path::new(path).file_name().and_then(|n| n.to_str()).unwrap_or("");
    let digits: String = name.chars().take_while(|c| c.is_ascii_digit()).collect();
    if digits.len() == 20 {
        digits.parse().unwrap_or(0)
    } else {
        0
    }
}

fn report_dict<'py>(py: Python<'py>, rep: &ScanReport, file: &str) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("file", file)?;
    d.set_item("batches", rep.batches)?;
    d.set_item("records", rep.records)?;
    d.set_item("valid_bytes", rep.valid_bytes)?;
    d.set_item("total_bytes", rep.total_bytes)?;
    d.set_item("first_offset", rep.first_offset)?;
    d.set_item("last_offset", rep.last_offset)?;
    d.set_item("max_timestamp", rep.max_timestamp)?;
    d.set_item("epochs", rep.epochs.clone())?;
    let gaps: Vec<(u64, i64, i64)> = rep.gaps.iter().map(|g| (g.position, g.base_offset, g.expected)).collect();
    d.set_item("gaps", gaps)?;
    d.set_item("gap_count", rep.gap_count)?;
    let err = rep.error.as_ref().map(|e| to_pyerr(py, e, Some(file)).into_value(py));
    d.set_item("error", err)?;
    Ok(d)
}

/// A segment file (`.log`, or any file of v2 batches such as a `.checkpoint`), memory-mapped.
#[pyclass(module = "kraftkit.log")]
pub struct Segment {
    data: Arc<Backing>,
    #[pyo3(get)]
    path: String,
    #[pyo3(get)]
    base_offset: i64,
    file: Arc<str>,
}

impl Segment {
    fn buf(&self) -> &[u8] {
        self.data.bytes()
    }
    fn sibling(&self, suffix: &str) -> PathBuf {
        let p = Path::new(&self.path);
        let stem = p.file_name().and_then(|n| n.to_str()).unwrap_or("").split('.').next().unwrap_or("").to_string();
        p.with_file_name(format!("{stem}{suffix}"))
    }
    fn read_sibling(&self, suffix: &str) -> PyResult<Option<Vec<u8>>> {
        let p = self.sibling(suffix);
        match fsutil::read_input(&p, None) {
            Ok(v) => Ok(Some(v)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_err(&p.to_string_lossy(), e)),
        }
    }
}

#[pymethods]
impl Segment {
    #[new]
    fn new(path: PathBuf) -> PyResult<Self> {
        let path = path.to_string_lossy().into_owned();
        let data = Arc::new(map_file(&path)?);
        Ok(Segment { base_offset: base_offset_of(&path), file: Arc::from(path.as_str()), path, data })
    }
    /// Size of the file in bytes (when it was opened).
    #[getter]
    fn size(&self) -> usize {
        self.buf().len()
    }
    /// Batches from byte `start` (default 0), reading at most `max_bytes`. Raises
    /// CorruptRecordError / TruncatedError at the first bad batch, naming file and position.
    #[pyo3(signature = (start = 0, max_bytes = None, verify_crc = false))]
    fn batches(&self, py: Python<'_>, start: usize, max_bytes: Option<usize>, verify_crc: bool) -> PyResult<BatchIter> {
        let n = self.buf().len();
        let limit = max_bytes.map_or(n, |m| start.saturating_add(m).min(n));
        if start > n {
            return Err(PyValueError::new_err(format!("start position {start} is past the end ({n} bytes)")));
        }
        let _ = py;
        Ok(BatchIter { data: self.data.clone(), file: self.file.clone(), pos: start, limit, verify_crc, failed: false })
    }
    /// Reads all batches into a list (see `batches`).
    #[pyo3(signature = (verify_crc = false))]
    fn read_batches(&self, py: Python<'_>, verify_crc: bool) -> PyResult<Vec<RecordBatch>> {
        split_batches(py, self.data.clone(), Some(self.file.clone()), 0, self.buf().len(), verify_crc, true)
    }
    /// Validates every batch (CRC, sizes, offsets; records too with deep=True) without
    /// creating Python objects. Returns a report dict; its "error" is the first problem
    /// (an exception instance, not raised) or None.
    /// `dense`: a KRaft log or snapshot, whose batches hold lastOffsetDelta + 1 records
    /// numbered 0..n-1 (the numbering is checked with deep=True).
    #[pyo3(signature = (deep = false, verify_crc = true, dense = false))]
    fn scan<'py>(&self, py: Python<'py>, deep: bool, verify_crc: bool, dense: bool) -> PyResult<Bound<'py, PyDict>> {
        let len = self.buf().len() as u64;
        let base_offset = self.path.ends_with(".log").then_some(self.base_offset);
        let opts = ScanOptions { verify_crc, deep, check_offsets: true, base_offset, dense };
        let rep = py.allow_threads(|| match &*self.data {
            // the segment's map, populated in one call, guarded against a truncation under the
            // scan (segment::mapped); a file found shorter than when it was opened is scanned
            // again through a buffer (segment::read), which reports the truncated batch precisely
            Backing::Mmap(m) => {
                let shrank = || std::fs::metadata(&self.path).map_or(true, |md| md.len() < len);
                match segment::mapped::on_map(m, |buf| segment::scan(buf, opts, None)) {
                    Some(rep) if rep.error.is_none() || !shrank() => rep,
                    mapped => match fsutil::open_input(Path::new(&self.path)) {
                        Ok((f, _)) => segment::read::scan_file_buffered(&f, len, opts),
                        // gone: what the map showed if it found a problem, else the open's error
                        Err(e) => mapped.filter(|r| r.error.is_some()).unwrap_or_else(|| ScanReport {
                            total_bytes: len,
                            max_timestamp: -1,
                            error: Some(crate::error::Error::new(crate::error::ErrorKind::Io, format!("cannot be read again (it changed while mapped): {e}"))),
                            ..Default::default()
                        }),
                    },
                }
            }
            Backing::Vec(v) => segment::scan(v, opts, None),
        });
        report_dict(py, &rep, &self.path)
    }
    /// Rebuilds the `.index` and `.timeindex` contents exactly as Kafka's recovery does.
    /// Returns (report, index bytes, timeindex bytes).
    #[pyo3(signature = (index_interval_bytes = DEFAULT_INDEX_INTERVAL))]
    fn rebuild_indexes<'py>(&self, py: Python<'py>, index_interval_bytes: usize) -> PyResult<(Bound<'py, PyDict>, Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
        let buf = self.buf();
        let base = self.base_offset;
        let rec = py.allow_threads(|| {
            self.data.prefetch();
            segment::recover(buf, base, index_interval_bytes)
        });
        Ok((report_dict(py, &rec.report, &self.path)?, PyBytes::new(py, &rec.index.offset_index), PyBytes::new(py, &rec.index.time_index)))
    }
    /// Entries of the sibling `.index` file as (offset, position); empty if it is missing.
    fn offset_index(&self) -> PyResult<Vec<(i64, u32)>> {
        Ok(self.read_sibling(".index")?.map_or(Vec::new(), |d| index::read_offset_index(&d, self.base_offset).into_iter().map(|e| (e.offset, e.position)).collect()))
    }
    /// Entries of the sibling `.timeindex` file as (timestamp, offset).
    fn time_index(&self) -> PyResult<Vec<(i64, i64)>> {
        Ok(self.read_sibling(".timeindex")?.map_or(Vec::new(), |d| index::read_time_index(&d, self.base_offset).into_iter().map(|e| (e.timestamp, e.offset)).collect()))
    }
    /// Checks the sibling index files against the log (like kafka-dump-log --verify-index-only
    /// and --index-sanity-check). Returns a list of problems as (file suffix, entry, reason).
    fn verify_indexes(&self, py: Python<'_>) -> PyResult<Vec<(String, usize, String)>> {
        let oi = self.read_sibling(".index")?;
        let ti = self.read_sibling(".timeindex")?;
        let buf = self.buf();
        let base = self.base_offset;
        let probs = py.allow_threads(|| segment::verify_indexes(buf, base, oi.as_deref(), ti.as_deref(), None));
        Ok(probs.into_iter().map(|p| (p.file.to_string(), p.entry, p.reason)).collect())
    }
    /// Byte position of the batch holding `offset` (via the offset index, then a scan);
    /// None when the segment ends before it.
    fn position_of(&self, py: Python<'_>, offset: i64) -> PyResult<Option<u64>> {
        let entries = self.read_sibling(".index")?.map_or(Vec::new(), |d| index::read_offset_index(&d, self.base_offset));
        let (pos, h) = segment::position_of_offset(self.buf(), &entries, offset).map_err(|e| to_pyerr(py, &e, Some(&self.path)))?;
        Ok(h.map(|_| pos as u64))
    }
    /// (offset, timestamp) of the first record with timestamp >= `timestamp`, or None.
    fn offset_for_timestamp(&self, py: Python<'_>, timestamp: i64) -> PyResult<Option<(i64, i64)>> {
        let oe = self.read_sibling(".index")?.map_or(Vec::new(), |d| index::read_offset_index(&d, self.base_offset));
        let te = self.read_sibling(".timeindex")?.map_or(Vec::new(), |d| index::read_time_index(&d, self.base_offset));
        segment::offset_for_timestamp(self.buf(), &oe, &te, timestamp).map_err(|e| to_pyerr(py, &e, Some(&self.path)))
    }
    /// Renders the segment as kafka-dump-log prints it (or JSON lines): an iterator of bytes chunks.
    /// `chunk_bytes`: input rendered per parallel step (default: 32 MB for batch lines, 4 MB
    /// with records), i.e. per chunk of output.
    /// `dense`: a KRaft file, whose batches must hold one offset per record (lastOffsetDelta = count - 1).
    #[pyo3(signature = (deep = false, print_data = false, json = false, max_bytes = None, chunk_bytes = None, dense = false))]
    #[allow(clippy::too_many_arguments)]
    fn dump(&self, py: Python<'_>, deep: bool, print_data: bool, json: bool, max_bytes: Option<usize>, chunk_bytes: Option<usize>, dense: bool) -> PyResult<DumpIter> {
        if chunk_bytes == Some(0) {
            return Err(pyo3::exceptions::PyValueError::new_err("chunk_bytes must be positive"));
        }
        if max_bytes.is_none() {
            py.allow_threads(|| self.data.prefetch());
        }
        let opts = DumpOptions { deep: deep || print_data, print_data, json, max_bytes: max_bytes.unwrap_or(usize::MAX), dense };
        let inner = Dumper::new(Shared(self.data.clone()), opts);
        let chunk = chunk_bytes.unwrap_or_else(|| inner.chunk_size());
        Ok(DumpIter { inner, chunk, parts: Vec::new(), file: self.file.clone() })
    }
    fn __repr__(&self) -> String {
        format!("Segment({:?}, base_offset={}, size={})", self.path, self.base_offset, self.buf().len())
    }
}

/// Iterator over the batches of a segment.
#[pyclass(module = "kraftkit.log")]
pub struct BatchIter {
    data: Arc<Backing>,
    file: Arc<str>,
    pos: usize,
    limit: usize,
    verify_crc: bool,
    failed: bool,
}

#[pymethods]
impl BatchIter {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }
    fn __next__(&mut self, py: Python<'_>) -> PyResult<Option<RecordBatch>> {
        if self.failed {
            return Ok(None);
        }
        let buf = &self.data.bytes()[..self.limit];
        match batch::next_batch(buf, self.pos, 0) {
            Ok(NextBatch::End) => Ok(None),
            Ok(NextBatch::Batch(h, r)) => {
                if self.verify_crc {
                    if let Err(e) = batch::validate(&h, &buf[r.clone()], self.pos as u64) {
                        self.failed = true;
                        return Err(to_pyerr(py, &e, Some(&self.file)));
                    }
                }
                let b = RecordBatch { h, data: self.data.clone(), start: r.start, end: r.end, position: self.pos as u64, file: Some(self.file.clone()) };
                self.pos = r.end;
                Ok(Some(b))
            }
            Err(e) => {
                self.failed = true;
                Err(to_pyerr(py, &e, Some(&self.file)))
            }
        }
    }
    /// Byte position of the next batch.
    #[getter]
    fn position(&self) -> usize {
        self.pos
    }
}

/// Chunks of dump output, and the dump's findings once exhausted.
#[pyclass(module = "kraftkit.log")]
pub struct DumpIter {
    inner: Dumper<Shared>,
    /// Input bytes per rendering step.
    chunk: usize,
    /// The batches' texts of the last chunk (buffers reused chunk after chunk).
    parts: Vec<Vec<u8>>,
    file: Arc<str>,
}

#[pymethods]
impl DumpIter {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }
    fn __next__<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyBytes>>> {
        if self.inner.is_done() {
            return Ok(None);
        }
        let (inner, parts, chunk) = (&mut self.inner, &mut self.parts, self.chunk);
        py.allow_threads(|| inner.next_chunk(chunk, parts));
        let len: usize = parts.iter().map(Vec::len).sum();
        if len == 0 {
            return Ok(None);
        }
        // one copy, from the batches' texts straight into the bytes object
        PyBytes::new_with(py, len, |buf| {
            let mut at = 0;
            for p in parts.iter() {
                buf[at..at + p.len()].copy_from_slice(p);
                at += p.len();
            }
            Ok(())
        })
        .map(Some)
    }
    /// Writes the rest of the dump to the open file descriptor `fd` (e.g. stdout's), from Rust
    /// with the GIL released and without a Python bytes object per chunk; what was already
    /// taken through iteration is not written again. The caller flushes its own buffers first.
    fn write_to(&mut self, py: Python<'_>, fd: i32) -> PyResult<()> {
        use std::os::fd::BorrowedFd;
        if fd < 0 {
            return Err(pyo3::exceptions::PyValueError::new_err(format!("invalid file descriptor {fd}")));
        }
        // SAFETY: the caller hands in an open descriptor and keeps it open for this call; it is
        // only borrowed long enough to duplicate it (an fd that is not open fails with EBADF).
        let owned = unsafe { BorrowedFd::borrow_raw(fd) }.try_clone_to_owned()?;
        let mut file = std::fs::File::from(owned);
        let (inner, chunk) = (&mut self.inner, self.chunk);
        py.allow_threads(|| inner.write_to(&mut file, chunk))?;
        Ok(())
    }
    /// Summary: batches, records, invalid_batches, non_consecutive ((offset, next offset) pairs),
    /// non_consecutive_at (base offset and byte position of the batch of each next offset),
    /// trailing_bytes, error.
    fn summary<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let st = &self.inner.state;
        let d = PyDict::new(py);
        d.set_item("batches", st.batches)?;
        d.set_item("records", st.records)?;
        d.set_item("invalid_batches", st.invalid_batches)?;
        d.set_item("non_consecutive", st.non_consecutive.iter().map(|x| (x.0, x.1)).collect::<Vec<_>>())?;
        d.set_item("non_consecutive_at", st.non_consecutive.iter().map(|x| (x.2, x.3)).collect::<Vec<_>>())?;
        d.set_item("trailing_bytes", st.trailing_bytes)?;
        d.set_item("error", st.error.as_ref().map(|e| to_pyerr(py, e, Some(&self.file)).into_value(py)))?;
        Ok(d)
    }
}

/// Scans many segment files in parallel (one per thread, GIL released): CRCs, sizes, offsets
/// (and every record with deep=True) plus their index files. Returns one dict per file:
/// the scan report plus "index_problems" and "index_unchecked" (entries past the point where
/// the log could not be read: not problems of their own). `dense`: KRaft files (see `scan`).
type Probs = Vec<(String, usize, String, bool)>;

#[pyfunction]
#[pyo3(signature = (paths, deep = false, check_indexes = true, dense = false))]
fn verify_segments<'py>(py: Python<'py>, paths: Vec<PathBuf>, deep: bool, check_indexes: bool, dense: bool) -> PyResult<Bound<'py, PyList>> {
    type Out = (String, std::result::Result<(ScanReport, Probs), String>);
    let results: Vec<Out> = py.allow_threads(|| {
        paths
            .par_iter()
            .map(|p| {
                let name = p.to_string_lossy().into_owned();
                let r = (|| -> std::result::Result<_, String> {
                    // every error names its file: the segment's or an index's
                    let (f, len) = fsutil::open_input(p).map_err(|e| format!("{name}: {e}"))?;
                    let base_offset = name.ends_with(".log").then(|| base_offset_of(&name));
                    let opts = ScanOptions { verify_crc: true, deep, check_offsets: true, base_offset, dense };
                    let (oi, ti) = if check_indexes && name.ends_with(".log") {
                        let sibling = |ext: &str| -> std::result::Result<Option<Vec<u8>>, String> {
                            let q = p.with_extension(ext);
                            match fsutil::read_input(&q, None) {
                                Ok(v) => Ok(Some(v)),
                                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                                Err(e) => Err(format!("{}: {e}", q.display())),
                            }
                        };
                        (sibling("index")?, sibling("timeindex")?)
                    } else {
                        (None, None)
                    };
                    // the index entries are checked against the valid part of the log (they point
                    // anywhere in it); without index files there is nothing to check
                    let indexes = |buf: &[u8], rep: &ScanReport| -> Probs {
                        if oi.is_none() && ti.is_none() {
                            return Vec::new();
                        }
                        let unreadable_from = rep.error.as_ref().map(|_| rep.valid_bytes);
                        segment::verify_indexes(&buf[..rep.valid_bytes as usize], base_offset_of(&name), oi.as_deref(), ti.as_deref(), unreadable_from)
                            .into_iter()
                            .map(|x| (x.file.to_string(), x.entry, x.reason, x.unchecked))
                            .collect()
                    };
                    // the file mapped once for both, guarded (see segment::mapped); or else read
                    // through a buffer, and mapped afterwards for the index entries only
                    let mapped = segment::mapped::with_map(&f, len, |buf| {
                        let rep = segment::scan(buf, opts, None);
                        let probs = indexes(buf, &rep);
                        (rep, probs)
                    });
                    let (rep, probs) = match mapped {
                        Some(x) => x,
                        None => {
                            let rep = segment::read::scan_file_buffered(&f, len, opts);
                            let valid = rep.valid_bytes as usize;
                            let probs = if valid == 0 || (oi.is_none() && ti.is_none()) {
                                indexes(&[], &rep)
                            } else {
                                // SAFETY: read-only map of a regular file (see fsutil::map_input)
                                let m = unsafe { memmap2::MmapOptions::new().len(valid).map(&f) }.map_err(|e| format!("{name}: {e}"))?;
                                indexes(&m, &rep)
                            };
                            (rep, probs)
                        }
                    };
                    Ok((rep, probs))
                })();
                (name, r)
            })
            .collect()
    });
    let out = PyList::empty(py);
    for (name, r) in results {
        match r {
            Ok((rep, probs)) => {
                let d = report_dict(py, &rep, &name)?;
                let (unchecked, checked): (Probs, Probs) = probs.into_iter().partition(|x| x.3);
                let strip = |v: Probs| v.into_iter().map(|(f, e, r, _)| (f, e, r)).collect::<Vec<_>>();
                d.set_item("index_problems", strip(checked))?;
                d.set_item("index_unchecked", strip(unchecked))?;
                out.append(d)?;
            }
            Err(msg) => return Err(pyo3::exceptions::PyOSError::new_err(msg)),
        }
    }
    Ok(out)
}

/// An open segment that appends batches and maintains its indexes the way Kafka's
/// `LogSegment.append` does. Use `SegmentWriter.create` or `SegmentWriter.open`.
#[pyclass(module = "kraftkit.log")]
pub struct SegmentWriter {
    inner: Option<ActiveSegment>,
    path: String,
}

impl SegmentWriter {
    fn seg(&mut self) -> PyResult<&mut ActiveSegment> {
        self.inner.as_mut().ok_or_else(|| PyValueError::new_err(format!("{}: segment is closed", self.path)))
    }
    fn seg_ref(&self) -> PyResult<&ActiveSegment> {
        self.inner.as_ref().ok_or_else(|| PyValueError::new_err(format!("{}: segment is closed", self.path)))
    }
}

#[pymethods]
impl SegmentWriter {
    /// Creates a new empty segment file `<base offset>.log` in `dir`.
    #[staticmethod]
    #[pyo3(signature = (dir, base_offset, index_interval_bytes = DEFAULT_INDEX_INTERVAL))]
    fn create(py: Python<'_>, dir: PathBuf, base_offset: i64, index_interval_bytes: usize) -> PyResult<Self> {
        let seg = ActiveSegment::create(&dir, base_offset, index_interval_bytes).map_err(|e| to_pyerr(py, &e, Some(&dir.to_string_lossy())))?;
        let path = seg.log_path().to_string_lossy().into_owned();
        Ok(SegmentWriter { inner: Some(seg), path })
    }
    /// Opens an existing segment for appends after a recovery scan. A torn or corrupt tail
    /// raises CorruptRecordError unless truncate=True, which cuts it off. Returns (writer, report).
    #[staticmethod]
    #[pyo3(signature = (dir, base_offset, index_interval_bytes = DEFAULT_INDEX_INTERVAL, truncate = false))]
    fn open<'py>(py: Python<'py>, dir: PathBuf, base_offset: i64, index_interval_bytes: usize, truncate: bool) -> PyResult<(Self, Bound<'py, PyDict>)> {
        let path = dir.join(segment::segment_file_name(base_offset, ".log")).to_string_lossy().into_owned();
        let (seg, rep) = py.allow_threads(|| ActiveSegment::open(&dir, base_offset, index_interval_bytes, truncate)).map_err(|e| to_pyerr(py, &e, Some(&path)))?;
        let d = report_dict(py, &rep, &path)?;
        Ok((SegmentWriter { inner: Some(seg), path }, d))
    }
    /// Appends a set of complete batches (validated: CRC, increasing offsets at or above the
    /// segment's next offset). Returns a dict: first_offset, last_offset, batches, records,
    /// position, size, epochs.
    fn append<'py>(&mut self, py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyDict>> {
        let path = self.path.clone();
        let seg = self.seg()?;
        // Positions in an append error are within `data`, so the error names no file.
        let info = seg.append(data).map_err(|e| {
            let mut e = e;
            e.reason = format!("append to {path} rejected: {} (position within the appended data)", e.reason);
            to_pyerr(py, &e, None)
        })?;
        let d = PyDict::new(py);
        d.set_item("first_offset", info.first_offset)?;
        d.set_item("last_offset", info.last_offset)?;
        d.set_item("batches", info.batches)?;
        d.set_item("records", info.records)?;
        d.set_item("position", info.position)?;
        d.set_item("size", info.size)?;
        d.set_item("epochs", info.epochs)?;
        Ok(d)
    }
    /// fsyncs the log and writes the index files.
    fn flush(&mut self, py: Python<'_>) -> PyResult<()> {
        let path = self.path.clone();
        let seg = self.seg()?;
        py.allow_threads(|| seg.flush()).map_err(|e| to_pyerr(py, &e, Some(&path)))
    }
    /// Finishes the segment (final time-index entry, trimmed indexes, fsync).
    fn close(&mut self, py: Python<'_>) -> PyResult<()> {
        if let Some(seg) = self.inner.take() {
            let path = self.path.clone();
            py.allow_threads(|| seg.close()).map_err(|e| to_pyerr(py, &e, Some(&path)))?;
        }
        Ok(())
    }
    #[getter]
    fn size(&self) -> PyResult<u64> {
        Ok(self.seg_ref()?.size)
    }
    #[getter]
    fn base_offset(&self) -> PyResult<i64> {
        Ok(self.seg_ref()?.base_offset)
    }
    /// The offset after the last appended record, or None when the segment is empty.
    #[getter]
    fn next_offset(&self) -> PyResult<Option<i64>> {
        Ok(self.seg_ref()?.next_offset)
    }
    #[getter]
    fn path(&self) -> &str {
        &self.path
    }
    #[getter]
    fn closed(&self) -> bool {
        self.inner.is_none()
    }
}

/// Truncates segment `<base_offset>.log` in `dir` to hold only offsets below `offset`
/// (a batch containing `offset` goes entirely, as in Kafka) and rebuilds its indexes.
#[pyfunction]
#[pyo3(signature = (dir, base_offset, offset, index_interval_bytes = DEFAULT_INDEX_INTERVAL))]
fn truncate_segment(py: Python<'_>, dir: PathBuf, base_offset: i64, offset: i64, index_interval_bytes: usize) -> PyResult<u64> {
    let path = dir.join(segment::segment_file_name(base_offset, ".log")).to_string_lossy().into_owned();
    py.allow_threads(|| segment::truncate_segment(&dir, base_offset, offset, index_interval_bytes)).map_err(|e| to_pyerr(py, &e, Some(&path)))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Segment>()?;
    m.add_class::<BatchIter>()?;
    m.add_class::<DumpIter>()?;
    m.add_class::<SegmentWriter>()?;
    m.add_function(wrap_pyfunction!(verify_segments, m)?)?;
    m.add_function(wrap_pyfunction!(truncate_segment, m)?)?;
    Ok(())
}
