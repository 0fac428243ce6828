//! The Arrow export from Python (`kraftkit.spark`): record scans of segments and snapshots as
//! Arrow column buffers, and the column functions behind the UDFs. Buffers leave Rust as
//! `ArrowBuffer` objects (read-only buffer protocol, no copy; `pyarrow.py_buffer` wraps them);
//! input columns come in as any buffer-protocol object (`pyarrow.Buffer`). Loops run with the
//! GIL released.

use super::batch::fill_readonly_view;
use super::source::Backing;
use super::segment::map_file;
use super::rewrite::RewritePlan;
use crate::arrow::{self, Bitmap, Bools, ColumnMask, Columns, Prim, RecordScanner, ScanOptions, ScanStats, ValuesIn, Var};
use crate::rewrite::RecordLosses;
use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyValueError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};
use std::os::raw::c_int;
use std::sync::Arc;

enum Owned {
    U8(Vec<u8>),
    I32(Vec<i32>),
    I64(Vec<i64>),
}

/// Bytes made in Rust, handed to Arrow without a copy (`memoryview(buf)`, `pyarrow.py_buffer(buf)`).
#[pyclass(module = "kraftkit._core", frozen)]
pub struct ArrowBuffer {
    data: Owned,
}

impl ArrowBuffer {
    fn bytes(&self) -> &[u8] {
        // SAFETY: plain integers reinterpreted as their bytes (no padding, alignment 1 for u8)
        unsafe {
            match &self.data {
                Owned::U8(v) => v,
                Owned::I32(v) => std::slice::from_raw_parts(v.as_ptr() as *const u8, v.len() * 4),
                Owned::I64(v) => std::slice::from_raw_parts(v.as_ptr() as *const u8, v.len() * 8),
            }
        }
    }
}

#[pymethods]
impl ArrowBuffer {
    fn __len__(&self) -> usize {
        self.bytes().len()
    }
    unsafe fn __getbuffer__(slf: PyRef<'_, Self>, view: *mut ffi::Py_buffer, flags: c_int) -> PyResult<()> {
        let bytes = slf.bytes();
        let (ptr, len, py) = (bytes.as_ptr(), bytes.len(), slf.py());
        let owner: Py<PyAny> = slf.into_pyobject(py)?.into_any().unbind();
        fill_readonly_view(view, flags, owner, ptr, len, "Arrow buffers are read-only")
    }
    unsafe fn __releasebuffer__(&self, _view: *mut ffi::Py_buffer) {}
}

fn buf(py: Python<'_>, data: Owned) -> PyResult<PyObject> {
    Ok(Bound::new(py, ArrowBuffer { data })?.into_any().unbind())
}

fn validity_buffer(py: Python<'_>, b: Bitmap) -> PyResult<PyObject> {
    if b.unset == 0 {
        Ok(py.None())
    } else {
        buf(py, Owned::U8(b.bytes))
    }
}

/// `(validity or None, offsets or None, values, null_count)`, the layout `pyarrow.Array.from_buffers` takes.
fn array(py: Python<'_>, valid: Bitmap, offsets: Option<Vec<i32>>, values: Owned) -> PyResult<PyObject> {
    let nulls = valid.unset;
    let offsets = match offsets {
        Some(o) => buf(py, Owned::I32(o))?,
        None => py.None(),
    };
    Ok((validity_buffer(py, valid)?, offsets, buf(py, values)?, nulls).into_pyobject(py)?.into_any().unbind())
}
fn prim_i64(py: Python<'_>, p: Prim<i64>) -> PyResult<PyObject> {
    array(py, p.validity, None, Owned::I64(p.values))
}
fn prim_i32(py: Python<'_>, p: Prim<i32>) -> PyResult<PyObject> {
    array(py, p.validity, None, Owned::I32(p.values))
}
fn bools(py: Python<'_>, b: Bools) -> PyResult<PyObject> {
    array(py, b.validity, None, Owned::U8(b.values.bytes))
}
fn var(py: Python<'_>, v: Var) -> PyResult<PyObject> {
    array(py, v.validity, Some(v.offsets), Owned::U8(v.data))
}

/// The columns of a chunk, in `arrow::COLUMNS` order, those of the mask only.
fn columns_py<'py>(py: Python<'py>, c: Columns, mask: ColumnMask) -> PyResult<Bound<'py, PyList>> {
    let out = PyList::empty(py);
    let Columns { base_offset, offset, epoch, timestamp, crc_valid, is_control, control_type, record_type, record_version, record, value, position, error, .. } = c;
    let mut parts: Vec<Option<PyObject>> = Vec::with_capacity(arrow::COLUMNS.len());
    parts.push(mask.has(arrow::BASE_OFFSET).then(|| prim_i64(py, base_offset)).transpose()?);
    parts.push(mask.has(arrow::OFFSET).then(|| prim_i64(py, offset)).transpose()?);
    parts.push(mask.has(arrow::EPOCH).then(|| prim_i32(py, epoch)).transpose()?);
    parts.push(mask.has(arrow::TIMESTAMP).then(|| prim_i64(py, timestamp)).transpose()?);
    parts.push(mask.has(arrow::CRC_VALID).then(|| bools(py, crc_valid)).transpose()?);
    parts.push(mask.has(arrow::IS_CONTROL).then(|| bools(py, is_control)).transpose()?);
    parts.push(mask.has(arrow::CONTROL_TYPE).then(|| var(py, control_type)).transpose()?);
    parts.push(mask.has(arrow::RECORD_TYPE).then(|| var(py, record_type)).transpose()?);
    parts.push(mask.has(arrow::RECORD_VERSION).then(|| prim_i32(py, record_version)).transpose()?);
    parts.push(mask.has(arrow::RECORD).then(|| var(py, record)).transpose()?);
    parts.push(mask.has(arrow::VALUE).then(|| var(py, value)).transpose()?);
    parts.push(mask.has(arrow::POSITION).then(|| prim_i64(py, position)).transpose()?);
    parts.push(mask.has(arrow::ERROR).then(|| var(py, error)).transpose()?);
    for (name, p) in arrow::COLUMNS.iter().zip(parts) {
        if let Some(p) = p {
            out.append((*name, p))?;
        }
    }
    Ok(out)
}


fn backing(source: &Bound<'_, PyAny>) -> PyResult<(Backing, String)> {
    if let Ok(b) = source.downcast::<PyBytes>() {
        return Ok((Backing::Vec(b.as_bytes().to_vec()), "<bytes>".into()));
    }
    let path: std::path::PathBuf = source.extract()?;
    let name = path.to_string_lossy().into_owned();
    Ok((map_file(&name)?, name))
}

/// The records of one file (a path, memory-mapped, or bytes) as chunks of Arrow column buffers.
/// Iterating yields `(rows, [(column, (validity, offsets, values, null_count))...])` for the
/// `columns` asked for (default: all of `record_columns()`), over the byte range
/// `[start, end)` (a batch boundary; see `batch_splits`), records with offsets in
/// `[min_offset, max_offset)` only. Damage becomes rows with an `error` (see `rust/src/arrow.rs`).
#[pyclass(module = "kraftkit._core")]
pub struct RecordScan {
    data: Arc<Backing>,
    pos: usize,
    end: usize,
    opts: ScanOptions,
    done: bool,
    stats: ScanStats,
    #[pyo3(get)]
    file: String,
}

#[pymethods]
impl RecordScan {
    #[new]
    #[pyo3(signature = (source, *, start = 0, end = None, columns = None, min_offset = None, max_offset = None, chunk_rows = 65536))]
    fn new(
        source: &Bound<'_, PyAny>,
        start: usize,
        end: Option<usize>,
        columns: Option<Vec<String>>,
        min_offset: Option<i64>,
        max_offset: Option<i64>,
        chunk_rows: usize,
    ) -> PyResult<Self> {
        let (data, file) = backing(source)?;
        let mask = match columns {
            None => ColumnMask::ALL,
            Some(c) => ColumnMask::from_names(c.iter().map(String::as_str)).map_err(|n| PyValueError::new_err(format!("unknown column {n:?}; known: {}", arrow::COLUMNS.join(", "))))?,
        };
        let len = data.bytes().len();
        let opts = ScanOptions {
            columns: mask,
            min_offset: min_offset.unwrap_or(i64::MIN),
            max_offset: max_offset.unwrap_or(i64::MAX),
            chunk_rows: chunk_rows.max(1),
            ..ScanOptions::default()
        };
        Ok(RecordScan { data: Arc::new(data), pos: start.min(len), end: end.unwrap_or(len).min(len), opts, done: false, stats: ScanStats::default(), file })
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        if self.done {
            return Ok(None);
        }
        let (data, pos, end, opts, stats) = (self.data.clone(), self.pos, self.end, self.opts, self.stats);
        let (chunk, pos, done, stats) = py.allow_threads(move || {
            let mut s = RecordScanner::new(data.bytes(), pos, end, opts);
            s.stats = stats;
            let c = s.next_chunk();
            (c, s.position(), s.is_done(), s.stats)
        });
        self.pos = pos;
        self.done = done || chunk.is_none();
        self.stats = stats;
        match chunk {
            None => Ok(None),
            Some(c) => {
                let rows = c.rows;
                let cols = columns_py(py, c, self.opts.columns)?;
                Ok(Some(PyTuple::new(py, [rows.into_pyobject(py)?.into_any(), cols.into_any()])?))
            }
        }
    }

    /// Counters so far: batches, records, crc_errors, errors, bytes.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("batches", self.stats.batches)?;
        d.set_item("records", self.stats.records)?;
        d.set_item("crc_errors", self.stats.crc_errors)?;
        d.set_item("errors", self.stats.errors)?;
        d.set_item("bytes", self.stats.bytes)?;
        Ok(d)
    }
}

/// The columns a `RecordScan` can build, in order.
#[pyfunction]
fn record_columns() -> Vec<&'static str> {
    arrow::COLUMNS.to_vec()
}

/// Byte positions cutting a file into ranges of about `target` bytes at batch boundaries:
/// `[0, p1, ..., size]` (only batch headers are read).
#[pyfunction]
fn batch_splits(py: Python<'_>, source: &Bound<'_, PyAny>, target: usize) -> PyResult<Vec<usize>> {
    let (data, _) = backing(source)?;
    Ok(py.allow_threads(|| arrow::batch_splits(data.bytes(), target)))
}

/// A read-only view of a buffer-protocol object's bytes (kept alive by the guard). pyarrow
/// exports its buffers as signed chars ("b"), bytes and memoryviews as "B".
enum InBuf {
    U8(PyBuffer<u8>),
    I8(PyBuffer<i8>),
}

impl InBuf {
    fn get(obj: &Bound<'_, PyAny>) -> PyResult<InBuf> {
        match PyBuffer::<u8>::get(obj) {
            Ok(b) => Ok(InBuf::U8(b)),
            Err(_) => Ok(InBuf::I8(PyBuffer::<i8>::get(obj)?)),
        }
    }
    fn bytes(&self) -> &[u8] {
        let (ptr, len, contiguous) = match self {
            InBuf::U8(b) => (b.buf_ptr(), b.len_bytes(), b.is_c_contiguous()),
            InBuf::I8(b) => (b.buf_ptr(), b.len_bytes(), b.is_c_contiguous()),
        };
        assert!(contiguous, "buffer is not contiguous");
        // SAFETY: the buffer is held (contiguous, checked) for the guard's lifetime
        unsafe { std::slice::from_raw_parts(ptr as *const u8, len) }
    }
}

// SAFETY: the exporter (pyarrow) keeps the memory valid and unchanged while the view is held
unsafe impl Send for InBuf {}
unsafe impl Sync for InBuf {}

/// An Arrow binary array's buffers as the core's input: `length` values starting at `offset`.
struct ArrayIn {
    validity: Option<InBuf>,
    offsets: InBuf,
    data: InBuf,
    offset: usize,
    length: usize,
}

impl ArrayIn {
    fn new(validity: Option<&Bound<'_, PyAny>>, offsets: &Bound<'_, PyAny>, data: &Bound<'_, PyAny>, offset: usize, length: usize) -> PyResult<ArrayIn> {
        let a = ArrayIn { validity: validity.map(InBuf::get).transpose()?, offsets: InBuf::get(offsets)?, data: InBuf::get(data)?, offset, length };
        let ob = a.offsets.bytes();
        if ob.len() < (offset + length + 1) * 4 || !(ob.as_ptr() as usize).is_multiple_of(4) {
            return Err(PyValueError::new_err("offsets buffer too short or misaligned for an int32-offset binary array"));
        }
        if let Some(v) = &a.validity {
            if v.bytes().len() * 8 < offset + length {
                return Err(PyValueError::new_err("validity bitmap too short"));
            }
        }
        Ok(a)
    }
    fn values(&self) -> ValuesIn<'_> {
        let ob = self.offsets.bytes();
        // SAFETY: alignment and length checked in `new`
        let all: &[i32] = unsafe { std::slice::from_raw_parts(ob.as_ptr() as *const i32, ob.len() / 4) };
        ValuesIn { offsets: &all[self.offset..self.offset + self.length + 1], data: self.data.bytes(), validity: self.validity.as_ref().map(|v| (v.bytes(), self.offset)) }
    }
}

/// Decodes metadata record values (an Arrow binary array's buffers): the columns
/// record_type (utf8), record_version (int32), record (utf8 JSON), error (utf8).
#[pyfunction]
#[pyo3(signature = (validity, offsets, data, offset, length))]
fn decode_values<'py>(py: Python<'py>, validity: Option<&Bound<'py, PyAny>>, offsets: &Bound<'py, PyAny>, data: &Bound<'py, PyAny>, offset: usize, length: usize) -> PyResult<Bound<'py, PyTuple>> {
    let a = ArrayIn::new(validity, offsets, data, offset, length)?;
    let (t, v, j, e) = py.allow_threads(|| arrow::decode_values(&a.values()));
    PyTuple::new(py, [var(py, t)?, prim_i32(py, v)?, var(py, j)?, var(py, e)?])
}

/// Whether each value is a v2 record batch with a matching CRC (null: not a batch).
#[pyfunction]
#[pyo3(signature = (validity, offsets, data, offset, length))]
fn batch_crc_values<'py>(py: Python<'py>, validity: Option<&Bound<'py, PyAny>>, offsets: &Bound<'py, PyAny>, data: &Bound<'py, PyAny>, offset: usize, length: usize) -> PyResult<PyObject> {
    let a = ArrayIn::new(validity, offsets, data, offset, length)?;
    let b = py.allow_threads(|| arrow::batch_crcs(&a.values()));
    bools(py, b)
}

/// What each metadata record value would lose under `plan`: a list<utf8> column of
/// `Record.Field` (or `Record` when the whole record would be dropped), empty when nothing is
/// lost, null for null or undecodable values.
/// Returns `(list validity, list offsets, (child utf8 buffers))`, and the null count.
#[pyfunction]
#[pyo3(signature = (validity, offsets, data, offset, length, plan))]
fn record_losses<'py>(
    py: Python<'py>,
    validity: Option<&Bound<'py, PyAny>>,
    offsets: &Bound<'py, PyAny>,
    data: &Bound<'py, PyAny>,
    offset: usize,
    length: usize,
    plan: &RewritePlan,
) -> PyResult<Bound<'py, PyTuple>> {
    let a = ArrayIn::new(validity, offsets, data, offset, length)?;
    let plan = &plan.plan;
    let (lv, lo, child) = py.allow_threads(|| {
        let values = a.values();
        let mut rl = RecordLosses::new(plan);
        let mut lv = Bitmap::default();
        let mut lo: Vec<i32> = vec![0];
        let mut child = Var::default();
        let mut text = String::new();
        for i in 0..values.len() {
            let got = values.get(i).map(|v| rl.data(v));
            match got {
                Some(Ok(losses)) => {
                    lv.push(true);
                    for (record, field) in losses {
                        text.clear();
                        text.push_str(record);
                        if !field.is_empty() {
                            text.push('.');
                            text.push_str(&field);
                        }
                        child.push(Some(text.as_bytes()));
                    }
                }
                _ => lv.push(false),
            }
            lo.push(child.len() as i32);
        }
        (lv, lo, child)
    });
    let nulls = lv.unset;
    PyTuple::new(py, [validity_buffer(py, lv)?, buf(py, Owned::I32(lo))?, var(py, child)?, nulls.into_pyobject(py)?.into_any().unbind()])
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<ArrowBuffer>()?;
    m.add_class::<RecordScan>()?;
    m.add_function(wrap_pyfunction!(record_columns, m)?)?;
    m.add_function(wrap_pyfunction!(batch_splits, m)?)?;
    m.add_function(wrap_pyfunction!(decode_values, m)?)?;
    m.add_function(wrap_pyfunction!(batch_crc_values, m)?)?;
    m.add_function(wrap_pyfunction!(record_losses, m)?)?;
    Ok(())
}
