//! `metadata dump`'s lines from Rust (`crate::metadump`): `metadata_dump(path, json)` iterates
//! chunks of output bytes, rendered with the GIL released, then raises the dump's problem (the
//! same exception, naming file, offset, position and reason, as decoding batch by batch).

use super::errors::{to_pyerr, KraftkitError};
use super::metadata::codec_err;
use super::segment::map_file;
use super::source::Backing;
use crate::metadump::{write_parts, MetaDumpError, MetaDumper, CHUNK};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::path::PathBuf;
use std::sync::Arc;

struct Shared(Arc<Backing>);
impl AsRef<[u8]> for Shared {
    fn as_ref(&self) -> &[u8] {
        self.0.bytes()
    }
}

/// Input per bytes object given out by iteration (~1.5 MB of text for metadata records).
const BYTES_CHUNK: usize = 512 << 10;

/// One bytes object holding `parts` one after the other, its buffer written once (not zeroed
/// first, as `PyBytes::new_with` does).
fn bytes_of_parts<'py>(py: Python<'py>, parts: &[Vec<u8>]) -> PyResult<Bound<'py, PyBytes>> {
    let len: usize = parts.iter().map(Vec::len).sum();
    let size = pyo3::ffi::Py_ssize_t::try_from(len).map_err(|_| pyo3::exceptions::PyOverflowError::new_err("chunk too large"))?;
    // SAFETY: PyBytes_FromStringAndSize(NULL, n) makes a bytes object with room for n bytes (and
    // the NUL after them) that is ours to fill before anyone else sees it; it is filled whole
    // below, then owned by the Bound.
    unsafe {
        let ptr = pyo3::ffi::PyBytes_FromStringAndSize(std::ptr::null(), size);
        let obj = Bound::from_owned_ptr_or_err(py, ptr)?;
        let mut at = pyo3::ffi::PyBytes_AsString(ptr).cast::<u8>();
        for p in parts {
            std::ptr::copy_nonoverlapping(p.as_ptr(), at, p.len());
            at = at.add(p.len());
        }
        Ok(obj.downcast_into_unchecked())
    }
}

/// Chunks of `metadata dump` output for one file (bytes, UTF-8), then the dump's problem raised.
#[pyclass(module = "kraftkit._core")]
pub struct MetadataDump {
    inner: MetaDumper<Shared>,
    parts: Vec<Vec<u8>>,
    file: Arc<str>,
}

#[pymethods]
impl MetadataDump {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }
    fn __next__<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyBytes>>> {
        loop {
            if self.inner.is_done() {
                return match self.inner.error.take() {
                    Some(e) => Err(self.to_err(py, e)),
                    None => Ok(None),
                };
            }
            let (inner, parts) = (&mut self.inner, &mut self.parts);
            // a smaller step than write_chunk's: the text is copied once more, into the bytes
            // object, while it is still in the cache
            py.allow_threads(|| inner.next_chunk(BYTES_CHUNK, parts));
            let len: usize = self.parts.iter().map(Vec::len).sum();
            if len > 0 {
                return bytes_of_parts(py, &self.parts).map(Some);
            }
        }
    }
    /// Renders the next chunk and writes it to the open file descriptor `fd` (e.g. stdout's),
    /// GIL released, no bytes object made; False once the dump is done (its problem is raised
    /// then, after the lines before it were written). The caller flushes its own buffers first.
    fn write_chunk(&mut self, py: Python<'_>, fd: i32) -> PyResult<bool> {
        use std::os::fd::BorrowedFd;
        if self.inner.is_done() {
            return match self.inner.error.take() {
                Some(e) => Err(self.to_err(py, e)),
                None => Ok(false),
            };
        }
        if fd < 0 {
            return Err(pyo3::exceptions::PyValueError::new_err(format!("invalid file descriptor {fd}")));
        }
        // SAFETY: the caller hands in an open descriptor and keeps it open for this call; it is
        // only borrowed long enough to duplicate it (an fd that is not open fails with EBADF).
        let owned = unsafe { BorrowedFd::borrow_raw(fd) }.try_clone_to_owned()?;
        let mut file = std::fs::File::from(owned);
        let (inner, parts) = (&mut self.inner, &mut self.parts);
        py.allow_threads(|| {
            inner.next_chunk(CHUNK, parts);
            write_parts(&mut file, parts)
        })?;
        Ok(true)
    }
    /// Records given out so far (a line each).
    #[getter]
    fn records(&self) -> u64 {
        self.inner.records
    }
    /// Byte position in the file up to which batches were read.
    #[getter]
    fn position(&self) -> usize {
        self.inner.position()
    }
}

impl MetadataDump {
    fn to_err(&self, py: Python<'_>, e: MetaDumpError) -> PyErr {
        match e {
            MetaDumpError::Batch(e) => to_pyerr(py, &e, Some(&self.file)),
            MetaDumpError::Codec(e, offset) => {
                let err = codec_err(py, &e, Some(offset));
                let _ = err.value(py).setattr("file", &*self.file);
                err
            }
            MetaDumpError::HeldTwice { base_offset, expected, position } => KraftkitError::new_err(format!(
                "{}: batch base offset {base_offset} is below the next expected offset {expected}: offsets are held twice (byte position {position})",
                self.file
            )),
        }
    }
}

/// The records of a metadata log segment or snapshot as `metadata dump` prints them (`json`:
/// its `--json` lines), in chunks of bytes.
#[pyfunction]
#[pyo3(signature = (path, json = false))]
fn metadata_dump(py: Python<'_>, path: PathBuf, json: bool) -> PyResult<MetadataDump> {
    let file = path.to_string_lossy().into_owned();
    let data = Arc::new(map_file(&file)?);
    py.allow_threads(|| data.prefetch());
    Ok(MetadataDump { inner: MetaDumper::new(Shared(data), json), parts: Vec::new(), file: Arc::from(file.as_str()) })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<MetadataDump>()?;
    m.add_function(wrap_pyfunction!(metadata_dump, m)?)?;
    Ok(())
}
