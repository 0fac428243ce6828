//! `Record` and `ControlRecord`: per-record Python objects built with the C API directly.
//!
//! Decoding a batch makes one object per record, so the cost of making and reading these objects
//! is the cost of decoding. `#[pyclass]` objects go through PyO3's generic allocation, dealloc and
//! getter trampolines (thread-local GIL counters, type lookups, a getset call per attribute read).
//! These two types are plain C extension types instead (`PyType_FromSpec`, in the stable ABI):
//!
//! * `offset`, `timestamp`, `key` and `value` are Python objects made while decoding and exposed as
//!   `Py_T_OBJECT_EX` member slots, which CPython's specialising interpreter reads inline
//!   (`LOAD_ATTR_SLOT`), as fast as a `__slots__` attribute of a Python class;
//! * the other fields are C members (`sequence`, `attributes`, sizes, `is_control`, control key);
//! * the object holds no reference that can form a cycle (ints, bytes, None), so it is not
//!   GC-tracked; `headers` (rare, lazily decoded) keep the record bytes alive through a boxed
//!   `RecBuf` only when the record has headers.
//!
//! All the `unsafe` of the per-record objects is in this module and its two submodules: `bytes`
//! (the freelist of key and value bytes objects) and `iter` (`RecordIterator`).

use super::source::{Fields, RecBuf};
use crate::batch::{self, RecordView};
use pyo3::exceptions::PySystemError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString};
use std::ffi::CStr;
use std::mem::offset_of;
use std::os::raw::{c_int, c_uint, c_void};
use std::ptr::{null_mut, NonNull};
use std::sync::atomic::{AtomicPtr, Ordering};

mod bytes;
mod ints;
mod iter;

use bytes::{refill_bytes, release_bytes};
use ints::{release_int, take_int};
use iter::{iter_dealloc, iter_next, IterObject, ITER_TYPE};
pub use iter::record_iter;

/// Memory layout of a `Record` instance.
#[repr(C)]
struct RecordObject {
    ob_base: ffi::PyObject,
    // Owned references, never null once the object is handed out (null only while building).
    offset: *mut ffi::PyObject,
    timestamp: *mut ffi::PyObject,
    key: *mut ffi::PyObject,
    value: *mut ffi::PyObject,
    /// The record bytes and view, for `headers`; null when the record has none.
    hdrs: *mut (RecBuf, RecordView),
    off: i64,
    ts: i64,
    sequence: i32,
    key_size: i32,
    value_size: i32,
    size_in_bytes: u32,
    attributes: i8,
    is_control: u8,
}

/// Memory layout of a `ControlRecord` instance (a `Record` followed by the control key).
#[repr(C)]
struct ControlObject {
    base: RecordObject,
    control_type: i16,
    key_version: i16,
}

/// Memory blocks of freed `Record` objects (exact type only), reused for the next ones, as
/// CPython does for its own small objects: a batch's records are freed together when its list
/// goes, and the next batch takes their blocks back instead of going through the allocator.
struct FreeList(std::cell::UnsafeCell<Vec<*mut ffi::PyObject>>);
// SAFETY: only touched with the GIL held (object creation and tp_dealloc), which serialises access;
// the two functions below are the only users and hold no borrow across any call out.
unsafe impl Sync for FreeList {}
const FREELIST_MAX: usize = 1024;
static FREELIST: FreeList = FreeList(std::cell::UnsafeCell::new(Vec::new()));

/// A block of `size_of::<RecordObject>()` bytes from PyObject_Malloc, not an object.
/// SAFETY: the caller holds the GIL.
#[inline]
unsafe fn freelist_pop() -> Option<*mut ffi::PyObject> {
    (*FREELIST.0.get()).pop()
}

/// Keeps `block` (a dead `Record`'s memory, from PyObject_Malloc) for reuse; false when full.
/// SAFETY: the caller holds the GIL.
#[inline]
unsafe fn freelist_push(block: *mut ffi::PyObject) -> bool {
    let fl = &mut *FREELIST.0.get();
    if fl.len() >= FREELIST_MAX {
        return false;
    }
    if fl.capacity() == 0 {
        fl.reserve_exact(FREELIST_MAX);
    }
    fl.push(block);
    true
}

static RECORD_TYPE: AtomicPtr<ffi::PyTypeObject> = AtomicPtr::new(null_mut());
static CONTROL_TYPE: AtomicPtr<ffi::PyTypeObject> = AtomicPtr::new(null_mut());

/// A list of `n` records being filled in order; dropping it unfinished releases what was made.
pub struct RecordList<'py> {
    py: Python<'py>,
    list: NonNull<ffi::PyObject>,
    len: usize,
    filled: usize,
    /// The previous record's timestamp and its int object (borrowed: that record, in the list,
    /// holds it), shared with the next record when equal. Records of a batch often have one
    /// timestamp (KRaft metadata batches, LogAppendTime batches).
    prev_ts: Option<(i64, NonNull<ffi::PyObject>)>,
}

impl<'py> RecordList<'py> {
    pub fn new(py: Python<'py>, len: usize) -> PyResult<Self> {
        let n = ffi::Py_ssize_t::try_from(len).map_err(|_| PySystemError::new_err("too many records"))?;
        // SAFETY: GIL held (`py`); PyList_New returns a new reference or null with an exception set.
        // Its items are null until set, which the list's dealloc accepts.
        let list = unsafe { ffi::PyList_New(n) };
        NonNull::new(list).map(|list| RecordList { py, list, len, filled: 0, prev_ts: None }).ok_or_else(|| PyErr::fetch(py))
    }

    /// Makes the next record object and stores it in the list.
    pub fn push(&mut self, f: Fields<'_>) -> PyResult<()> {
        if self.filled >= self.len {
            return Err(PySystemError::new_err("more records than the list was made for"));
        }
        let ts = f.timestamp;
        let reuse = match self.prev_ts {
            Some((t, o)) if t == ts => Some(o),
            _ => None,
        };
        let obj = new_record(self.py, f, reuse)?;
        // SAFETY: `obj` is a fully initialised record (new_record succeeded): its timestamp is a
        // live int that the record, stored in our list below, keeps alive while the list exists.
        self.prev_ts = Some((ts, unsafe { NonNull::new_unchecked((*(obj.as_ptr() as *const RecordObject)).timestamp) }));
        // SAFETY: GIL held; the index is in bounds (checked above) and its slot still null, so
        // PyList_SetItem (which steals `obj`) drops nothing. It cannot fail for a list in bounds.
        unsafe { ffi::PyList_SetItem(self.list.as_ptr(), self.filled as ffi::Py_ssize_t, obj.as_ptr()) };
        self.filled += 1;
        Ok(())
    }

    pub fn finish(self) -> PyResult<Bound<'py, PyList>> {
        if self.filled != self.len {
            return Err(PySystemError::new_err("fewer records than the list was made for"));
        }
        let me = std::mem::ManuallyDrop::new(self);
        // SAFETY: GIL held; the list is a new reference we own, every slot filled; ownership moves
        // to the Bound (ManuallyDrop: our Drop must not release it too).
        Ok(unsafe { Bound::from_owned_ptr(me.py, me.list.as_ptr()).downcast_into_unchecked() })
    }
}

impl Drop for RecordList<'_> {
    fn drop(&mut self) {
        // SAFETY: GIL held for 'py; we own this reference. Unfilled (null) slots are fine for
        // list_dealloc (Py_XDECREF).
        unsafe { ffi::Py_DECREF(self.list.as_ptr()) }
    }
}

/// Makes one `Record` (or `ControlRecord`) object; `ts_obj` is an int equal to `f.timestamp`
/// to share (borrowed), if there is one.
fn new_record(py: Python<'_>, f: Fields<'_>, ts_obj: Option<NonNull<ffi::PyObject>>) -> PyResult<NonNull<ffi::PyObject>> {
    // SAFETY: GIL held (`py`).
    NonNull::new(unsafe { alloc_record(f, ts_obj) }).ok_or_else(|| PyErr::fetch(py))
}

/// The type of the record object for `f`.
#[inline]
fn type_for(f: &Fields<'_>) -> *mut ffi::PyTypeObject {
    if f.control.is_some() {
        CONTROL_TYPE.load(Ordering::Acquire)
    } else {
        RECORD_TYPE.load(Ordering::Acquire)
    }
}

/// `new_record` without PyO3: a new reference, or null with an exception set.
///
/// SAFETY: the caller holds the GIL; `ts_obj`, if given, is a live int.
unsafe fn alloc_record(f: Fields<'_>, ts_obj: Option<NonNull<ffi::PyObject>>) -> *mut ffi::PyObject {
    let tp = type_for(&f);
    if tp.is_null() {
        ffi::PyErr_SetString(ffi::PyExc_SystemError, c"kraftkit record types are not initialised".as_ptr());
        return null_mut();
    }
    // `tp` is one of our two heap types, created in `register` and never released (the statics
    // own a reference). _PyObject_New allocates tp_basicsize bytes (the size of RecordObject or
    // ControlObject, as set in the spec); a freelist block has the size of a RecordObject and is
    // only used for a Record. PyObject_Init (also called by _PyObject_New) sets the type (taking
    // a reference to it) and a refcount of 1; the rest is uninitialised, so the object fields are
    // set to null before anything can see the object (an early decref in `fill` is then safe: the
    // dealloc releases with null allowed), and `fill` writes every field.
    let block = if f.control.is_none() { freelist_pop() } else { None };
    let obj = match block {
        Some(b) => ffi::PyObject_Init(b, tp),
        None => ffi::_PyObject_New(tp),
    };
    if obj.is_null() {
        return null_mut();
    }
    let r = obj as *mut RecordObject;
    std::ptr::addr_of_mut!((*r).offset).write(null_mut());
    std::ptr::addr_of_mut!((*r).timestamp).write(null_mut());
    std::ptr::addr_of_mut!((*r).key).write(null_mut());
    std::ptr::addr_of_mut!((*r).value).write(null_mut());
    std::ptr::addr_of_mut!((*r).hdrs).write(null_mut());
    if fill(obj, f, ts_obj) {
        obj
    } else {
        ffi::Py_DECREF(obj);
        null_mut()
    }
}

/// Writes the fields of `f` into the record `obj`, releasing what it held; false (with an exception
/// set) as soon as an object cannot be made, the record then fit only to be released.
///
/// SAFETY: the caller holds the GIL; `obj` is a record of the type for `f` whose object fields
/// are live references or null, and nothing but the caller sees it (a new record, or one only the
/// caller references); `ts_obj`, if given, is a live int.
unsafe fn fill(obj: *mut ffi::PyObject, f: Fields<'_>, ts_obj: Option<NonNull<ffi::PyObject>>) -> bool {
    let r = obj as *mut RecordObject;
    // the old offset goes first (to the freelist, when nothing else holds it: the new offset is
    // then written into it); the old timestamp after the new one is made: it may be the same int
    release_int(std::mem::replace(&mut (*r).offset, null_mut()));
    let offset = take_int(f.offset);
    let timestamp = match ts_obj {
        Some(t) => {
            ffi::Py_INCREF(t.as_ptr());
            t.as_ptr()
        }
        None => take_int(f.timestamp),
    };
    (*r).offset = offset;
    release_int(std::mem::replace(&mut (*r).timestamp, timestamp));
    if offset.is_null() || timestamp.is_null() {
        return false;
    }
    (*r).key = refill_bytes((*r).key, f.key);
    if (*r).key.is_null() {
        return false;
    }
    (*r).value = refill_bytes((*r).value, f.value);
    if (*r).value.is_null() {
        return false;
    }
    if !(*r).hdrs.is_null() {
        drop(Box::from_raw((*r).hdrs));
    }
    (*r).hdrs = f.headers.map_or(null_mut(), |h| Box::into_raw(Box::new(h)));
    (*r).off = f.offset;
    (*r).ts = f.timestamp;
    (*r).sequence = f.sequence;
    (*r).key_size = f.key.map_or(-1, |k| k.len() as i32);
    (*r).value_size = f.value.map_or(-1, |v| v.len() as i32);
    (*r).size_in_bytes = f.size_in_bytes;
    (*r).attributes = f.attributes;
    (*r).is_control = f.control.is_some() as u8;
    if let Some((t, v)) = f.control {
        let c = obj as *mut ControlObject;
        (*c).control_type = t;
        (*c).key_version = v;
    }
    true
}

/// tp_dealloc of both types (and of Python subclasses, through `subtype_dealloc`).
unsafe extern "C" fn record_dealloc(obj: *mut ffi::PyObject) {
    // SAFETY: called by CPython with the GIL held, once, on an object of one of our types (or a
    // subclass) whose refcount reached zero; all its fields were initialised by `new_record`
    // (objects cannot be made any other way: the types disallow instantiation).
    let r = obj as *mut RecordObject;
    release_int((*r).offset);
    release_int((*r).timestamp);
    release_bytes((*r).key);
    release_bytes((*r).value);
    if !(*r).hdrs.is_null() {
        drop(Box::from_raw((*r).hdrs));
    }
    let tp = ffi::Py_TYPE(obj);
    let record = tp == RECORD_TYPE.load(Ordering::Relaxed);
    // The memory goes to the freelist (a Record), or to the type's own tp_free: PyObject_Free for
    // ours (not GC types), the GC's for a Python subclass with a __dict__.
    if record && freelist_push(obj) {
        // kept for the next Record
    } else if record || tp == CONTROL_TYPE.load(Ordering::Relaxed) {
        ffi::PyObject_Free(obj.cast());
    } else {
        let free = ffi::PyType_GetSlot(tp, ffi::Py_tp_free);
        if free.is_null() {
            ffi::PyObject_Free(obj.cast());
        } else {
            let free: ffi::freefunc = std::mem::transmute(free);
            free(obj.cast());
        }
    }
    // Instances of heap types own a reference to their type.
    ffi::Py_DECREF(tp.cast());
}
/// Runs `f` with the GIL marked held for PyO3, turning an error or a panic into a raised exception.
unsafe fn guarded(f: impl FnOnce(Python<'_>) -> PyResult<PyObject>) -> *mut ffi::PyObject {
    Python::with_gil(|py| match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(py))) {
        Ok(Ok(o)) => o.into_ptr(),
        Ok(Err(e)) => {
            e.restore(py);
            null_mut()
        }
        Err(_) => {
            PySystemError::new_err("panic in kraftkit record code").restore(py);
            null_mut()
        }
    })
}

unsafe extern "C" fn get_headers(obj: *mut ffi::PyObject, _closure: *mut c_void) -> *mut ffi::PyObject {
    // SAFETY: `obj` is an initialised instance of Record (CPython checks the descriptor's type),
    // kept alive by the caller for this call.
    let r = &*(obj as *const RecordObject);
    let hdrs = r.hdrs.as_ref();
    guarded(|py| {
        let list = PyList::empty(py);
        if let Some((buf, view)) = hdrs {
            let d = buf.bytes();
            for h in batch::read_headers(d, view) {
                let k = String::from_utf8_lossy(&d[h.key.start as usize..h.key.end as usize]).into_owned();
                let v = h.value.map(|v| PyBytes::new(py, &d[v.start as usize..v.end as usize]));
                list.append((k, v))?;
            }
        }
        Ok(list.into_any().unbind())
    })
}

unsafe extern "C" fn get_control_type_name(obj: *mut ffi::PyObject, _closure: *mut c_void) -> *mut ffi::PyObject {
    // SAFETY: `obj` is an initialised ControlRecord (the descriptor is only on that type).
    let t = (*(obj as *const ControlObject)).control_type;
    guarded(|py| Ok(PyString::new(py, batch::control_type_name(t)).into_any().unbind()))
}

unsafe extern "C" fn record_repr(obj: *mut ffi::PyObject) -> *mut ffi::PyObject {
    // SAFETY: `obj` is an initialised Record (or subclass) instance.
    let r = &*(obj as *const RecordObject);
    let s = format!("Record(offset={}, timestamp={}, key_size={}, value_size={})", r.off, r.ts, r.key_size, r.value_size);
    guarded(|py| Ok(PyString::new(py, &s).into_any().unbind()))
}

unsafe extern "C" fn control_repr(obj: *mut ffi::PyObject) -> *mut ffi::PyObject {
    // SAFETY: `obj` is an initialised ControlRecord instance.
    let c = &*(obj as *const ControlObject);
    let s = format!("ControlRecord(offset={}, type={}, timestamp={})", c.base.off, batch::control_type_name(c.control_type), c.base.ts);
    guarded(|py| Ok(PyString::new(py, &s).into_any().unbind()))
}

const fn member(name: &'static CStr, type_code: c_int, offset: usize, doc: &'static CStr) -> ffi::PyMemberDef {
    ffi::PyMemberDef { name: name.as_ptr(), type_code, offset: offset as ffi::Py_ssize_t, flags: ffi::Py_READONLY, doc: doc.as_ptr() }
}

const MEMBER_END: ffi::PyMemberDef = ffi::PyMemberDef { name: std::ptr::null(), type_code: 0, offset: 0, flags: 0, doc: std::ptr::null() };

const GETSET_END: ffi::PyGetSetDef = ffi::PyGetSetDef { name: std::ptr::null(), get: None, set: None, doc: std::ptr::null(), closure: null_mut() };

fn slot(slot: c_int, pfunc: *mut c_void) -> ffi::PyType_Slot {
    ffi::PyType_Slot { slot, pfunc }
}

/// Creates a heap type from `slots` (leaked: types live as long as the process).
fn make_type(py: Python<'_>, name: &'static CStr, basicsize: usize, flags: u64, slots: Vec<ffi::PyType_Slot>, base: *mut ffi::PyTypeObject) -> PyResult<*mut ffi::PyTypeObject> {
    let mut slots = slots;
    slots.push(slot(0, null_mut()));
    let slots: &'static mut [ffi::PyType_Slot] = Box::leak(slots.into_boxed_slice());
    let spec: &'static mut ffi::PyType_Spec =
        Box::leak(Box::new(ffi::PyType_Spec { name: name.as_ptr(), basicsize: basicsize as c_int, itemsize: 0, flags: flags as c_uint, slots: slots.as_mut_ptr() }));
    // SAFETY: GIL held; the spec, its slots and the member/getset arrays they point to are 'static
    // (leaked); `base` is null or a live type object. Returns a new reference or null with an
    // exception set. The reference is kept forever by the caller's static.
    let tp = unsafe { ffi::PyType_FromSpecWithBases(spec, base.cast()) };
    if tp.is_null() {
        return Err(PyErr::fetch(py));
    }
    Ok(tp.cast())
}

/// Creates the two types and adds them to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    if RECORD_TYPE.load(Ordering::Acquire).is_null() {
        // SAFETY: GIL held (`py`).
        unsafe { ints::probe() };
        type R = RecordObject;
        let members: &'static mut [ffi::PyMemberDef] = Box::leak(Box::new([
            member(c"offset", ffi::Py_T_OBJECT_EX, offset_of!(R, offset), c"Offset of the record."),
            member(c"timestamp", ffi::Py_T_OBJECT_EX, offset_of!(R, timestamp), c"Timestamp (ms): the batch's max timestamp for LogAppendTime batches."),
            member(c"key", ffi::Py_T_OBJECT_EX, offset_of!(R, key), c"Key bytes, or None."),
            member(c"value", ffi::Py_T_OBJECT_EX, offset_of!(R, value), c"Value bytes, or None."),
            member(c"sequence", ffi::Py_T_INT, offset_of!(R, sequence), c"Producer sequence number (-1 when the batch has none)."),
            member(c"attributes", ffi::Py_T_BYTE, offset_of!(R, attributes), c"Record attributes (int8, unused by Kafka)."),
            member(c"key_size", ffi::Py_T_INT, offset_of!(R, key_size), c"Key length in bytes, -1 for a null key (as kafka-dump-log prints it)."),
            member(c"value_size", ffi::Py_T_INT, offset_of!(R, value_size), c"Value length in bytes, -1 for a null value."),
            member(c"size_in_bytes", ffi::Py_T_UINT, offset_of!(R, size_in_bytes), c"Size of the record in the batch, including its length prefix."),
            member(c"is_control", ffi::Py_T_BOOL, offset_of!(R, is_control), c"True for a record of a control batch."),
            MEMBER_END,
        ]));
        let getsets: &'static mut [ffi::PyGetSetDef] = Box::leak(Box::new([
            ffi::PyGetSetDef {
                name: c"headers".as_ptr(),
                get: Some(get_headers),
                set: None,
                doc: c"Headers as a new list of (key, value): key a str, value bytes or None.".as_ptr(),
                closure: null_mut(),
            },
            GETSET_END,
        ]));
        let rec = make_type(
            py,
            c"kraftkit.log.Record",
            std::mem::size_of::<RecordObject>(),
            ffi::Py_TPFLAGS_DEFAULT | ffi::Py_TPFLAGS_BASETYPE | ffi::Py_TPFLAGS_DISALLOW_INSTANTIATION,
            vec![
                slot(ffi::Py_tp_doc, c"One record of a batch, decoded by RecordBatch.records().".as_ptr() as *mut c_void),
                slot(ffi::Py_tp_dealloc, record_dealloc as *mut c_void),
                slot(ffi::Py_tp_repr, record_repr as *mut c_void),
                slot(ffi::Py_tp_members, members.as_mut_ptr().cast()),
                slot(ffi::Py_tp_getset, getsets.as_mut_ptr().cast()),
            ],
            null_mut(),
        )?;
        type C = ControlObject;
        let cmembers: &'static mut [ffi::PyMemberDef] = Box::leak(Box::new([
            member(
                c"control_type",
                ffi::Py_T_SHORT,
                offset_of!(C, control_type),
                c"Control type id (Kafka's ControlRecordType: kraftkit.log.control.ControlType).",
            ),
            member(c"key_version", ffi::Py_T_SHORT, offset_of!(C, key_version), c"Version of the control key."),
            MEMBER_END,
        ]));
        let cgetsets: &'static mut [ffi::PyGetSetDef] = Box::leak(Box::new([
            ffi::PyGetSetDef { name: c"control_type_name".as_ptr(), get: Some(get_control_type_name), set: None, doc: c"Name of the control type.".as_ptr(), closure: null_mut() },
            GETSET_END,
        ]));
        let ctl = make_type(
            py,
            c"kraftkit.log.ControlRecord",
            std::mem::size_of::<ControlObject>(),
            ffi::Py_TPFLAGS_DEFAULT | ffi::Py_TPFLAGS_DISALLOW_INSTANTIATION,
            vec![
                slot(ffi::Py_tp_doc, c"A record of a control batch: its key names the control type.".as_ptr() as *mut c_void),
                slot(ffi::Py_tp_repr, control_repr as *mut c_void),
                slot(ffi::Py_tp_members, cmembers.as_mut_ptr().cast()),
                slot(ffi::Py_tp_getset, cgetsets.as_mut_ptr().cast()),
            ],
            rec,
        )?;
        let it = make_type(
            py,
            c"kraftkit.log.RecordIterator",
            std::mem::size_of::<IterObject>(),
            ffi::Py_TPFLAGS_DEFAULT | ffi::Py_TPFLAGS_DISALLOW_INSTANTIATION,
            vec![
                slot(ffi::Py_tp_doc, c"iter(batch): its records, decoded one at a time (records nothing else holds any more are recycled).".as_ptr() as *mut c_void),
                slot(ffi::Py_tp_dealloc, iter_dealloc as *mut c_void),
                slot(ffi::Py_tp_iter, ffi::PyObject_SelfIter as *mut c_void),
                slot(ffi::Py_tp_iternext, iter_next as *mut c_void),
            ],
            null_mut(),
        )?;
        RECORD_TYPE.store(rec, Ordering::Release);
        CONTROL_TYPE.store(ctl, Ordering::Release);
        ITER_TYPE.store(it, Ordering::Release);
    }
    // SAFETY: GIL held; the statics hold a reference to each type for the life of the process, so
    // borrowing them as new Bound references (incremented) is sound.
    unsafe {
        m.add("Record", Bound::from_borrowed_ptr(py, RECORD_TYPE.load(Ordering::Acquire).cast()))?;
        m.add("ControlRecord", Bound::from_borrowed_ptr(py, CONTROL_TYPE.load(Ordering::Acquire).cast()))?;
    }
    Ok(())
}
