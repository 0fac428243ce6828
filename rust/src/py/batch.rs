//! RecordBatch, Record and ControlRecord objects, and batch encoding/decoding functions.

use super::errors::to_pyerr;
use super::record::{record_iter, RecordList};
use super::source::{Backing, RecBuf, RecordSource};
use crate::batch::{self, BatchHeader, NextBatch};
use crate::builder::{self, BatchParams, RecordInput};
use crate::compression::Codec;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::buffer::PyBuffer;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};
use std::os::raw::{c_int, c_void};
use std::sync::Arc;

/// A v2 record batch: every header field, lazily decoded records, and its bytes
/// (exposed without a copy through the buffer protocol: `memoryview(batch)`).
#[pyclass(module = "kraftkit.log", frozen)]
pub struct RecordBatch {
    pub h: BatchHeader,
    pub data: Arc<Backing>,
    pub start: usize,
    pub end: usize,
    /// Position of the batch in its file (or buffer).
    #[pyo3(get)]
    pub position: u64,
    pub file: Option<Arc<str>>,
}

/// Why building a batch's records stopped.
enum BuildError {
    Corrupt(crate::error::Error),
    Py(PyErr),
}

impl From<crate::error::Error> for BuildError {
    fn from(e: crate::error::Error) -> Self {
        BuildError::Corrupt(e)
    }
}

impl RecordBatch {
    fn bytes(&self) -> &[u8] {
        &self.data.bytes()[self.start..self.end]
    }
    fn file_name(&self) -> Option<&str> {
        self.file.as_deref()
    }

    /// The records area of this batch (decompressed if need be), to decode records from.
    pub fn record_source(&self, py: Python<'_>) -> PyResult<RecordSource> {
        let h = self.h;
        let bytes = self.bytes();
        let (buf, len) = match h.codec() {
            Some(Codec::None) => (RecBuf::Shared(self.data.clone(), self.start + batch::RECORD_BATCH_OVERHEAD), bytes.len() - batch::RECORD_BATCH_OVERHEAD),
            _ => {
                let d = py.allow_threads(|| batch::records_data(&h, bytes, self.position)).map_err(|e| to_pyerr(py, &e, self.file_name()))?;
                let v = match d {
                    batch::RecordsData::Owned(v) => v,
                    batch::RecordsData::Borrowed(b) => b.to_vec(),
                };
                let n = v.len();
                (RecBuf::Owned(Arc::new(v)), n)
            }
        };
        Ok(RecordSource { h, buf, len, position: self.position, file: self.file.clone() })
    }

    /// Builds the Python record objects of this batch.
    pub fn build_records<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let src = self.record_source(py)?;
        let d = src.data();
        let n = batch::record_count(&src.h, d, src.position).map_err(|e| src.error(py, &e))?;
        let mut list = RecordList::new(py, n)?;
        let built = batch::for_each_record(&src.h, d, src.position, |v| {
            let f = src.fields(v)?;
            list.push(f).map_err(BuildError::Py)
        });
        match built {
            Ok(()) => list.finish(),
            Err(e) => {
                // The unfinished list goes before the exception is made (making it may run the GC,
                // which must not see a list with empty slots).
                drop(list);
                Err(match e {
                    BuildError::Corrupt(e) => src.error(py, &e),
                    BuildError::Py(e) => e,
                })
            }
        }
    }
}

#[pymethods]
impl RecordBatch {
    #[getter]
    fn base_offset(&self) -> i64 {
        self.h.base_offset
    }
    #[getter]
    fn last_offset(&self) -> i64 {
        self.h.last_offset()
    }
    #[getter]
    fn last_offset_delta(&self) -> i32 {
        self.h.last_offset_delta
    }
    /// The Length field of the header (size minus the 12-byte log overhead).
    #[getter]
    fn length(&self) -> i32 {
        self.h.length
    }
    /// Size of the whole batch in bytes.
    #[getter]
    fn size_in_bytes(&self) -> usize {
        self.end - self.start
    }
    #[getter]
    fn partition_leader_epoch(&self) -> i32 {
        self.h.partition_leader_epoch
    }
    #[getter]
    fn magic(&self) -> i8 {
        self.h.magic
    }
    /// The stored CRC-32C (unsigned).
    #[getter]
    fn crc(&self) -> u32 {
        self.h.crc
    }
    /// CRC-32C of bytes [21, end), computed now.
    fn compute_crc(&self, py: Python<'_>) -> u32 {
        let b = self.bytes();
        py.allow_threads(|| batch::compute_crc(b))
    }
    /// True when the stored CRC matches the bytes.
    #[getter]
    fn is_valid(&self, py: Python<'_>) -> bool {
        self.compute_crc(py) == self.h.crc
    }
    /// Raises CorruptRecordError unless the CRC and header are valid.
    fn ensure_valid(&self, py: Python<'_>) -> PyResult<()> {
        batch::validate(&self.h, self.bytes(), self.position).map_err(|e| to_pyerr(py, &e, self.file_name()))
    }
    #[getter]
    fn attributes(&self) -> i16 {
        self.h.attributes
    }
    /// "none", "gzip", "snappy", "lz4" or "zstd".
    #[getter]
    fn compression(&self) -> &'static str {
        self.h.codec().map_or("unknown", |c| c.name())
    }
    /// "CreateTime" or "LogAppendTime".
    #[getter]
    fn timestamp_type(&self) -> &'static str {
        self.h.timestamp_type_name()
    }
    #[getter]
    fn is_transactional(&self) -> bool {
        self.h.is_transactional()
    }
    #[getter]
    fn is_control(&self) -> bool {
        self.h.is_control()
    }
    #[getter]
    fn delete_horizon_ms(&self) -> Option<i64> {
        self.h.delete_horizon_ms()
    }
    #[getter]
    fn base_timestamp(&self) -> i64 {
        self.h.base_timestamp
    }
    #[getter]
    fn max_timestamp(&self) -> i64 {
        self.h.max_timestamp
    }
    #[getter]
    fn producer_id(&self) -> i64 {
        self.h.producer_id
    }
    #[getter]
    fn producer_epoch(&self) -> i16 {
        self.h.producer_epoch
    }
    #[getter]
    fn base_sequence(&self) -> i32 {
        self.h.base_sequence
    }
    #[getter]
    fn last_sequence(&self) -> i32 {
        self.h.last_sequence()
    }
    /// The RecordsCount field.
    #[getter]
    fn count(&self) -> i32 {
        self.h.records_count
    }
    /// The file this batch was read from, if any.
    #[getter]
    fn file(&self) -> Option<&str> {
        self.file_name()
    }
    /// Decodes (and decompresses) every record. Raises CorruptRecordError on bad records.
    fn records<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        self.build_records(py)
    }
    /// Decodes the records one at a time (see `record::RecordIterator`).
    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        record_iter(py, self.record_source(py)?)
    }
    fn __len__(&self) -> usize {
        self.h.records_count.max(0) as usize
    }
    /// A copy of the batch bytes.
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, self.bytes())
    }
    fn __repr__(&self) -> String {
        format!(
            "RecordBatch(base_offset={}, last_offset={}, count={}, position={}, compression={}, control={})",
            self.h.base_offset,
            self.h.last_offset(),
            self.h.records_count,
            self.position,
            self.compression(),
            self.h.is_control()
        )
    }
    unsafe fn __getbuffer__(slf: PyRef<'_, Self>, view: *mut ffi::Py_buffer, flags: c_int) -> PyResult<()> {
        let bytes = slf.bytes();
        let (ptr, len, py) = (bytes.as_ptr(), bytes.len(), slf.py());
        let owner: Py<PyAny> = slf.into_pyobject(py)?.into_any().unbind();
        fill_readonly_view(view, flags, owner, ptr, len, "record batch bytes are read-only")
    }
    unsafe fn __releasebuffer__(&self, _view: *mut ffi::Py_buffer) {}
}

/// Splits `data` into batches. With `strict`, a trailing partial batch raises; otherwise it is ignored.
pub fn split_batches(py: Python<'_>, data: Arc<Backing>, file: Option<Arc<str>>, start: usize, limit: usize, verify_crc: bool, strict: bool) -> PyResult<Vec<RecordBatch>> {
    let buf = &data.bytes()[..limit];
    let mut out = Vec::new();
    let mut pos = start;
    loop {
        match batch::next_batch(buf, pos, 0) {
            Ok(NextBatch::End) => break,
            Ok(NextBatch::Batch(h, r)) => {
                if verify_crc {
                    batch::validate(&h, &buf[r.clone()], pos as u64).map_err(|e| to_pyerr(py, &e, file.as_deref()))?;
                }
                out.push(RecordBatch { h, data: data.clone(), start: r.start, end: r.end, position: pos as u64, file: file.clone() });
                pos = r.end;
            }
            Err(e) => {
                if strict {
                    return Err(to_pyerr(py, &e, file.as_deref()));
                }
                break;
            }
        }
    }
    Ok(out)
}

/// Parses every batch in `data` (bytes-like). Raises CorruptRecordError (naming the byte
/// position) on a truncated or invalid batch; with verify_crc, also on a CRC mismatch.
#[pyfunction]
#[pyo3(signature = (data, *, verify_crc = false))]
fn decode_batches(py: Python<'_>, data: PyBuffer<u8>, verify_crc: bool) -> PyResult<Vec<RecordBatch>> {
    let v = data.to_vec(py)?;
    let n = v.len();
    let backing = Arc::new(Backing::Vec(v));
    split_batches(py, backing, None, 0, n, verify_crc, true)
}

/// A leader's intake of a client's batches: checked, then given consecutive offsets from
/// `base_offset`, the partition leader epoch and new CRCs. Returns (bytes, record count).
#[pyfunction]
fn assign_offsets<'py>(py: Python<'py>, data: PyBuffer<u8>, base_offset: i64, partition_leader_epoch: i32) -> PyResult<(Bound<'py, PyBytes>, i64)> {
    let v = data.to_vec(py)?;
    let (out, n) = py.allow_threads(|| batch::assign_offsets(&v, base_offset, partition_leader_epoch)).map_err(|e| to_pyerr(py, &e, None))?;
    Ok((PyBytes::new(py, &out), n))
}

/// CRC-32C (Castagnoli) of `data`, continuing from `crc` (default 0).
#[pyfunction(name = "crc32c")]
#[pyo3(signature = (data, crc = 0))]
fn py_crc32c(py: Python<'_>, data: PyBuffer<u8>, crc: u32) -> PyResult<u32> {
    if !data.is_c_contiguous() {
        return Err(PyValueError::new_err("crc32c needs a contiguous buffer"));
    }
    // SAFETY: a contiguous u8 buffer, held (and so kept alive) by `data` for this call; its
    // contents may be read without the GIL as the caller cannot resize it while we hold the view.
    let bytes = unsafe { std::slice::from_raw_parts(data.buf_ptr() as *const u8, data.len_bytes()) };
    Ok(if bytes.len() > 64 * 1024 { py.allow_threads(|| crate::crc::crc32c_append(crc, bytes)) } else { crate::crc::crc32c_append(crc, bytes) })
}

fn as_opt_bytes<'a>(o: &'a Bound<'_, PyAny>, what: &str) -> PyResult<Option<&'a [u8]>> {
    if o.is_none() {
        return Ok(None);
    }
    let b = o.downcast::<PyBytes>().map_err(|_| PyTypeError::new_err(format!("{what} must be bytes or None")))?;
    Ok(Some(b.as_bytes()))
}

/// Encodes one v2 batch. `records` is a sequence of (timestamp, key, value, headers) with
/// headers a sequence of (str, bytes | None); the i-th record gets offset base_offset + i.
#[pyfunction]
#[pyo3(signature = (records, *, base_offset = 0, compression = "none", compression_level = None,
    partition_leader_epoch = -1, producer_id = -1, producer_epoch = -1, base_sequence = -1,
    transactional = false, control = false, log_append_time = None, delete_horizon_ms = None))]
#[allow(clippy::too_many_arguments)]
fn encode_batch<'py>(
    py: Python<'py>,
    records: &Bound<'py, PyAny>,
    base_offset: i64,
    compression: &str,
    compression_level: Option<i32>,
    partition_leader_epoch: i32,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    transactional: bool,
    control: bool,
    log_append_time: Option<i64>,
    delete_horizon_ms: Option<i64>,
) -> PyResult<Bound<'py, PyBytes>> {
    let codec = Codec::from_name(compression).ok_or_else(|| PyValueError::new_err(format!("unknown compression {compression:?}; use none, gzip, snappy, lz4 or zstd")))?;
    let items: Vec<Bound<'py, PyAny>> = records.try_iter()?.collect::<PyResult<_>>()?;
    let mut tuples = Vec::with_capacity(items.len());
    for it in &items {
        let t = it.downcast::<PyTuple>().map_err(|_| PyTypeError::new_err("each record must be a tuple (timestamp, key, value, headers)"))?;
        if t.len() != 4 {
            return Err(PyTypeError::new_err("each record must be a tuple (timestamp, key, value, headers)"));
        }
        tuples.push(t.clone());
    }
    // Hold every element alive while borrowing its bytes.
    type Owned<'py> = (i64, Bound<'py, PyAny>, Bound<'py, PyAny>, Vec<(Bound<'py, PyAny>, Bound<'py, PyAny>)>);
    let mut owned: Vec<Owned<'py>> = Vec::with_capacity(tuples.len());
    for t in &tuples {
        let ts: i64 = t.get_item(0)?.extract()?;
        let hdrs: Vec<Bound<'py, PyAny>> = t.get_item(3)?.try_iter()?.collect::<PyResult<_>>()?;
        let mut hv = Vec::with_capacity(hdrs.len());
        for h in hdrs {
            let (k, v): (Bound<'py, PyAny>, Bound<'py, PyAny>) = h.extract()?;
            hv.push((k, v));
        }
        owned.push((ts, t.get_item(1)?, t.get_item(2)?, hv));
    }
    let mut header_keys: Vec<Vec<String>> = Vec::with_capacity(owned.len());
    for (_, _, _, hv) in &owned {
        let mut ks = Vec::with_capacity(hv.len());
        for (k, _) in hv {
            ks.push(k.extract::<String>().map_err(|_| PyTypeError::new_err("header keys must be str"))?);
        }
        header_keys.push(ks);
    }
    let mut inputs = Vec::with_capacity(owned.len());
    for (i, (ts, k, v, hv)) in owned.iter().enumerate() {
        let mut headers = Vec::with_capacity(hv.len());
        for (j, (_, hvv)) in hv.iter().enumerate() {
            headers.push((header_keys[i][j].as_bytes(), as_opt_bytes(hvv, "header value")?));
        }
        inputs.push(RecordInput { timestamp: *ts, key: as_opt_bytes(k, "key")?, value: as_opt_bytes(v, "value")?, headers });
    }
    let params = BatchParams {
        base_offset,
        partition_leader_epoch,
        producer_id,
        producer_epoch,
        base_sequence,
        transactional,
        control,
        log_append_time: log_append_time.is_some(),
        codec,
        level: compression_level,
        max_timestamp: log_append_time,
        delete_horizon_ms,
    };
    let mut out = Vec::new();
    builder::encode_batch(&params, &inputs, &mut out).map_err(|e| to_pyerr(py, &e, None))?;
    Ok(PyBytes::new(py, &out))
}

/// The most a compressed batch's records area may inflate to in this process, in bytes.
#[pyfunction]
fn max_uncompressed_bytes() -> usize {
    crate::compression::max_uncompressed_bytes()
}

/// Sets the most a compressed batch's records area may inflate to in this process (bytes, >= 1).
#[pyfunction]
fn set_max_uncompressed_bytes(limit: i64) -> PyResult<()> {
    if limit < 1 {
        return Err(PyValueError::new_err(format!("the limit on a decompressed batch must be at least 1 byte, not {limit}")));
    }
    crate::compression::set_max_uncompressed_bytes(limit as usize);
    Ok(())
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<RecordBatch>()?;
    m.add_function(wrap_pyfunction!(max_uncompressed_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(set_max_uncompressed_bytes, m)?)?;
    m.add("DEFAULT_MAX_UNCOMPRESSED_BYTES", crate::compression::DEFAULT_MAX_UNCOMPRESSED_BYTES)?;
    m.add_function(wrap_pyfunction!(decode_batches, m)?)?;
    m.add_function(wrap_pyfunction!(assign_offsets, m)?)?;
    m.add_function(wrap_pyfunction!(encode_batch, m)?)?;
    m.add_function(wrap_pyfunction!(py_crc32c, m)?)?;
    Ok(())
}

/// Fills `view` as a read-only, one-dimensional byte buffer of `len` bytes at `ptr`, kept alive
/// by `owner` (the Python object whose memory it is) until the view is released.
///
/// # Safety
/// `view` must be the pointer the interpreter passed to `__getbuffer__`, and `ptr..ptr+len` must
/// stay valid and unchanged for as long as `owner` lives.
pub(crate) unsafe fn fill_readonly_view(view: *mut ffi::Py_buffer, flags: c_int, owner: Py<PyAny>, ptr: *const u8,
                                        len: usize, read_only_msg: &'static str) -> PyResult<()> {
    if view.is_null() {
        return Err(PyValueError::new_err("null buffer view"));
    }
    if (flags & ffi::PyBUF_WRITABLE) == ffi::PyBUF_WRITABLE {
        return Err(pyo3::exceptions::PyBufferError::new_err(read_only_msg));
    }
    (*view).obj = owner.into_ptr();
    (*view).buf = ptr as *mut c_void;
    (*view).len = len as isize;
    (*view).readonly = 1;
    (*view).itemsize = 1;
    (*view).format = if (flags & ffi::PyBUF_FORMAT) == ffi::PyBUF_FORMAT { c"B".as_ptr() as *mut _ } else { std::ptr::null_mut() };
    (*view).ndim = 1;
    (*view).shape = if (flags & ffi::PyBUF_ND) == ffi::PyBUF_ND { &mut (*view).len } else { std::ptr::null_mut() };
    (*view).strides = if (flags & ffi::PyBUF_STRIDES) == ffi::PyBUF_STRIDES { &mut (*view).itemsize } else { std::ptr::null_mut() };
    (*view).suboffsets = std::ptr::null_mut();
    (*view).internal = std::ptr::null_mut();
    Ok(())
}
