//! `RecordIterator`: `iter(batch)`, decoding one record per `next()` and recycling the records
//! nothing else holds any more.

use super::{alloc_record, fill, type_for, RecordObject};
use crate::batch;
use crate::py::source::RecordSource;
use pyo3::exceptions::PySystemError;
use pyo3::ffi;
use pyo3::prelude::*;
use std::ptr::{null_mut, NonNull};
use std::sync::atomic::{AtomicPtr, Ordering};

/// Memory layout of a `RecordIterator` instance: `iter(batch)`.
///
/// It decodes one record per `next()`, and recycles: the record handed out the step before the
/// last (the last one is typically still bound to the loop variable) is, when nothing but the
/// iterator references it any more, rewritten with the next record instead of being freed and a
/// new one allocated, and so are its key and value when nothing else references them either. A
/// record (or key, or value) the caller keeps is left alone, so this cannot be seen from Python
/// (`id()` aside); CPython's own dict, zip and enumerate iterators reuse their result tuples the
/// same way. `batch.records()` builds fresh records, in a list.
#[repr(C)]
pub(super) struct IterObject {
    ob_base: ffi::PyObject,
    st: *mut IterState,
}

struct IterState {
    src: RecordSource,
    cursor: batch::RecordCursor,
    /// The last two records handed out (owned references, or null), by the parity of their index.
    ring: [*mut ffi::PyObject; 2],
    /// Index of the next record.
    next: usize,
    /// A corrupt record was met (and raised): the iteration is over.
    failed: bool,
}

pub(super) static ITER_TYPE: AtomicPtr<ffi::PyTypeObject> = AtomicPtr::new(null_mut());

/// An iterator over the records of `src`.
pub fn record_iter(py: Python<'_>, src: RecordSource) -> PyResult<Bound<'_, PyAny>> {
    let cursor = batch::RecordCursor::new(&src.h, src.data(), src.position).map_err(|e| src.error(py, &e))?;
    let tp = ITER_TYPE.load(Ordering::Acquire);
    if tp.is_null() {
        return Err(PySystemError::new_err("kraftkit record types are not initialised"));
    }
    let st = Box::new(IterState { src, cursor, ring: [null_mut(); 2], next: 0, failed: false });
    // SAFETY: GIL held; `tp` is our iterator type (kept alive by its static), whose basicsize is
    // that of IterObject; `st` is written before the object is handed out.
    unsafe {
        let obj = ffi::_PyObject_New(tp);
        if obj.is_null() {
            return Err(PyErr::fetch(py));
        }
        std::ptr::addr_of_mut!((*(obj as *mut IterObject)).st).write(Box::into_raw(st));
        Ok(Bound::from_owned_ptr(py, obj))
    }
}

impl IterState {
    /// The next record (a new reference), null at the end, or null with an exception set.
    ///
    /// SAFETY: the caller holds the GIL.
    unsafe fn next_record(&mut self) -> *mut ffi::PyObject {
        if self.failed {
            return null_mut();
        }
        let src = &self.src;
        let f = match self.cursor.next(&src.h, src.data(), src.position).map(|v| v.and_then(|v| src.fields(v))) {
            None => return null_mut(),
            Some(Ok(f)) => f,
            Some(Err(e)) => {
                self.failed = true;
                Python::with_gil(|py| src.error(py, &e).restore(py));
                return null_mut();
            }
        };
        let i = self.next & 1;
        // the previous record's timestamp int, shared when equal (it holds it; the ring holds it)
        let prev = self.ring[i ^ 1];
        let ts_obj = if prev.is_null() || (*(prev as *const RecordObject)).ts != f.timestamp {
            None
        } else {
            NonNull::new((*(prev as *const RecordObject)).timestamp)
        };
        let old = self.ring[i];
        let rec = if !old.is_null() && ffi::Py_REFCNT(old) == 1 && ffi::Py_TYPE(old) == type_for(&f) {
            if fill(old, f, ts_obj) {
                old
            } else {
                self.ring[i] = null_mut();
                ffi::Py_DECREF(old);
                return null_mut();
            }
        } else {
            self.ring[i] = null_mut();
            ffi::Py_XDECREF(old);
            let rec = alloc_record(f, ts_obj);
            if rec.is_null() {
                return null_mut();
            }
            rec
        };
        self.ring[i] = rec;
        self.next += 1;
        ffi::Py_INCREF(rec);
        rec
    }
}

pub(super) unsafe extern "C" fn iter_next(obj: *mut ffi::PyObject) -> *mut ffi::PyObject {
    // SAFETY: called by CPython with the GIL held on a live RecordIterator, whose state was set
    // when it was made. The state is only touched here and in the dealloc, with the GIL held, and
    // nothing in `next_record` can call back into this iterator.
    let st = &mut *(*(obj as *mut IterObject)).st;
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| st.next_record())) {
        Ok(r) => r,
        Err(_) => {
            st.failed = true;
            ffi::PyErr_SetString(ffi::PyExc_SystemError, c"panic in kraftkit record code".as_ptr());
            null_mut()
        }
    }
}

pub(super) unsafe extern "C" fn iter_dealloc(obj: *mut ffi::PyObject) {
    // SAFETY: called by CPython with the GIL held, once, when the refcount reached zero; the state
    // is a live Box made in `record_iter`, and the ring holds owned references or nulls.
    let st = Box::from_raw((*(obj as *mut IterObject)).st);
    for r in st.ring {
        ffi::Py_XDECREF(r);
    }
    drop(st);
    let tp = ffi::Py_TYPE(obj);
    ffi::PyObject_Free(obj.cast());
    ffi::Py_DECREF(tp.cast());
}
