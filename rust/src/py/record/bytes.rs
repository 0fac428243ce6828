//! The freelist of key and value bytes objects, by length, that records take from and give back to.

use pyo3::ffi;
use std::ptr::null_mut;

/// `new` as a bytes object (or None) in place of `old` (an owned reference, or null): `old` itself,
/// rewritten, when it is a bytes object of the same length that nothing else references (so that
/// nobody can see it change), a new object otherwise (from `BYTES`, where `old` goes if it can).
/// Null with an exception set on failure; `old` is released either way.
///
/// SAFETY: the caller holds the GIL and owns the reference `old`.
#[inline]
pub(super) unsafe fn refill_bytes(old: *mut ffi::PyObject, new: Option<&[u8]>) -> *mut ffi::PyObject {
    if let Some(b) = new {
        if !old.is_null() && ffi::Py_REFCNT(old) == 1 && ffi::PyBytes_CheckExact(old) != 0 && ffi::Py_SIZE(old) == b.len() as ffi::Py_ssize_t && b.len() > 1 {
            rewrite_bytes(old, b);
            return old;
        }
    }
    release_bytes(old);
    match new {
        Some(b) => take_bytes(b),
        None => {
            let none = ffi::Py_None();
            ffi::Py_INCREF(none);
            none
        }
    }
}

/// Overwrites the contents of the bytes object `o`, of `b.len()` bytes, and resets its cached hash.
///
/// SAFETY: the caller holds the GIL and the only reference to `o` (the rules of CPython's own
/// `_PyBytes_Resize`, which also resets the hash): nobody can see the change.
#[inline(always)]
unsafe fn rewrite_bytes(o: *mut ffi::PyObject, b: &[u8]) {
    let o = o as *mut ffi::PyBytesObject;
    #[allow(deprecated)]
    {
        (*o).ob_shash = -1;
    }
    std::ptr::copy_nonoverlapping(b.as_ptr(), std::ptr::addr_of_mut!((*o).ob_sval) as *mut u8, b.len());
}

/// Bytes objects of the keys and values of dead records, by length, for the next records of that
/// length: a record that nothing references any more gives them here when it is freed (or, under
/// `RecordIterator`, refilled) if it held their only reference, and making a key or value of
/// that length takes one back and rewrites it instead of allocating one. CPython keeps such
/// freelists for its tuples (by length), floats and lists; it has none for bytes, and making and
/// freeing a record's two bytes was about a quarter of decoding it. At most `BYTES_PER_LEN` objects of each length
/// from 2 to `BYTES_MAX_LEN - 1` are kept (under 1 MB in all).
struct BytesFreeList(std::cell::UnsafeCell<([[*mut ffi::PyObject; BYTES_PER_LEN]; BYTES_MAX_LEN], [u8; BYTES_MAX_LEN])>);
// SAFETY: only touched with the GIL held (record creation and tp_dealloc), which serialises access;
// the two functions below are the only users and hold no borrow across any call out.
unsafe impl Sync for BytesFreeList {}
const BYTES_MAX_LEN: usize = 512;
const BYTES_PER_LEN: usize = 4;
static BYTES: BytesFreeList = BytesFreeList(std::cell::UnsafeCell::new(([[null_mut(); BYTES_PER_LEN]; BYTES_MAX_LEN], [0; BYTES_MAX_LEN])));

/// A new reference to a bytes object equal to `b`.
///
/// SAFETY: the caller holds the GIL.
#[inline]
unsafe fn take_bytes(b: &[u8]) -> *mut ffi::PyObject {
    let n = b.len();
    if n > 1 && n < BYTES_MAX_LEN {
        let (objs, counts) = &mut *BYTES.0.get();
        let c = &mut counts[n];
        if *c > 0 {
            *c -= 1;
            let o = objs[n][*c as usize];
            rewrite_bytes(o, b);
            return o;
        }
    }
    ffi::PyBytes_FromStringAndSize(b.as_ptr().cast(), n as ffi::Py_ssize_t)
}

/// Releases the reference `o` (null allowed), keeping the object in `BYTES` when it is a bytes
/// object nobody else references and there is room.
///
/// SAFETY: the caller holds the GIL and owns the reference `o`.
#[inline]
pub(super) unsafe fn release_bytes(o: *mut ffi::PyObject) {
    if !o.is_null() && ffi::Py_REFCNT(o) == 1 && ffi::PyBytes_CheckExact(o) != 0 {
        let n = ffi::Py_SIZE(o) as usize;
        if n > 1 && n < BYTES_MAX_LEN {
            let (objs, counts) = &mut *BYTES.0.get();
            let c = &mut counts[n];
            if (*c as usize) < BYTES_PER_LEN {
                objs[n][*c as usize] = o;
                *c += 1;
                return;
            }
        }
    }
    ffi::Py_XDECREF(o);
}
