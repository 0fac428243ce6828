//! The freelist of offset and timestamp int objects that records take from and give back to.
//!
//! Making and freeing a record's two ints (`PyLong_FromLongLong`, then the int's dealloc) was, with
//! its key and value bytes, the largest per-record cost left. An int that a dead (or recycled)
//! record held the only reference to is kept here, by its number of digits, and the next offset or
//! timestamp with that many digits is written into it instead of allocating one. Nobody can see
//! the change: the int had no other reference (the rule `bytes::refill_bytes` follows for bytes),
//! and CPython's own cached small ints (-5..=256) are never touched (they have many references,
//! and values in that range are always made by `PyLong_FromLongLong`, which returns them).
//!
//! CPython's int layout is not part of its API, so it is checked once, at start-up, on ints made
//! by CPython itself (`probe`): the word after the object header holds the digit count (3.11:
//! `ob_size`; 3.12 and later: `lv_tag`, the count shifted left by 3 with the sign in the low bits)
//! and the 30-bit digits follow. On any other layout (15-bit digits, a free-threaded build's larger
//! header) the probe fails and every int is made by `PyLong_FromLongLong`, as before.

use pyo3::ffi;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicU8, Ordering};

/// How an int's digit count is stored: not known (freelist off), as 3.11's `ob_size`, or as 3.12's `lv_tag`.
const LAYOUT_OFF: u8 = 0;
const LAYOUT_OB_SIZE: u8 = 1;
const LAYOUT_LV_TAG: u8 = 2;
static LAYOUT: AtomicU8 = AtomicU8::new(LAYOUT_OFF);

/// Ints of up to 3 digits (90 bits: every non-negative int64) are kept, `PER_SIZE` of each size.
const MAX_DIGITS: usize = 3;
const PER_SIZE: usize = 64;
const DIGIT_BITS: u32 = 30;

struct IntFreeList(std::cell::UnsafeCell<([[*mut ffi::PyObject; PER_SIZE]; MAX_DIGITS + 1], [u8; MAX_DIGITS + 1])>);
// SAFETY: only touched with the GIL held (record creation, refilling and tp_dealloc), which
// serialises access; the functions below are the only users and hold no borrow across a call out.
unsafe impl Sync for IntFreeList {}
static INTS: IntFreeList = IntFreeList(std::cell::UnsafeCell::new(([[null_mut(); PER_SIZE]; MAX_DIGITS + 1], [0; MAX_DIGITS + 1])));

/// The header word (digit count) and the digits of the int `o`.
#[inline(always)]
unsafe fn parts(o: *mut ffi::PyObject) -> (*mut usize, *mut u32) {
    let base = o as *mut u8;
    let word = base.add(std::mem::size_of::<ffi::PyObject>()) as *mut usize;
    (word, word.add(1) as *mut u32)
}

/// Digits needed for `v` (> 0) in base 2**30.
#[inline(always)]
fn ndigits(v: u64) -> usize {
    (64 - v.leading_zeros()).div_ceil(DIGIT_BITS) as usize
}

/// The word that says "`n` digits, positive" in the probed layout.
#[inline(always)]
fn size_word(layout: u8, n: usize) -> usize {
    if layout == LAYOUT_LV_TAG {
        n << 3
    } else {
        n
    }
}

/// Works out the running CPython's int layout from ints it made, and turns the freelist on if it
/// is one of the two known ones. SAFETY: the caller holds the GIL.
pub(super) unsafe fn probe() {
    if std::mem::size_of::<ffi::PyObject>() != 16 {
        return;
    }
    // 1, 2 and 3 digits: each value's digits are known
    let samples: [(i64, &[u32]); 3] = [(1000, &[1000]), ((5 << 30) | 7, &[7, 5]), ((3 << 60) | (2 << 30) | 1, &[1, 2, 3])];
    for layout in [LAYOUT_OB_SIZE, LAYOUT_LV_TAG] {
        let ok = samples.iter().all(|&(v, digits)| {
            let o = ffi::PyLong_FromLongLong(v);
            if o.is_null() {
                ffi::PyErr_Clear();
                return false;
            }
            let (word, d) = parts(o);
            let good = *word == size_word(layout, digits.len()) && digits.iter().enumerate().all(|(i, &x)| *d.add(i) == x);
            ffi::Py_DECREF(o);
            good
        });
        if ok {
            LAYOUT.store(layout, Ordering::Relaxed);
            return;
        }
    }
}

/// A new reference to an int equal to `v`: one from the freelist, rewritten, when there is one
/// of the right size, else `PyLong_FromLongLong` (null with an exception set on failure).
///
/// SAFETY: the caller holds the GIL.
#[inline]
pub(super) unsafe fn take_int(v: i64) -> *mut ffi::PyObject {
    let layout = LAYOUT.load(Ordering::Relaxed);
    if v > 256 && layout != LAYOUT_OFF {
        let n = ndigits(v as u64);
        let (objs, counts) = &mut *INTS.0.get();
        let c = &mut counts[n];
        if *c > 0 {
            *c -= 1;
            let o = objs[n][*c as usize];
            let (word, d) = parts(o);
            debug_assert_eq!(*word, size_word(layout, n));
            let mut x = v as u64;
            for i in 0..n {
                *d.add(i) = (x & ((1 << DIGIT_BITS) - 1)) as u32;
                x >>= DIGIT_BITS;
            }
            return o;
        }
    }
    ffi::PyLong_FromLongLong(v)
}

/// Releases the reference `o` (null allowed), keeping the object when it is an int (exactly) of
/// 1 to 3 digits, positive, that nobody else references, and there is room.
///
/// SAFETY: the caller holds the GIL and owns the reference `o`.
#[inline]
pub(super) unsafe fn release_int(o: *mut ffi::PyObject) {
    let layout = LAYOUT.load(Ordering::Relaxed);
    if !o.is_null() && layout != LAYOUT_OFF && ffi::Py_REFCNT(o) == 1 && ffi::PyLong_CheckExact(o) != 0 {
        let word = *parts(o).0;
        for n in 1..=MAX_DIGITS {
            if word == size_word(layout, n) {
                let (objs, counts) = &mut *INTS.0.get();
                let c = &mut counts[n];
                if (*c as usize) < PER_SIZE {
                    objs[n][*c as usize] = o;
                    *c += 1;
                    return;
                }
                break;
            }
        }
    }
    ffi::Py_XDECREF(o);
}
