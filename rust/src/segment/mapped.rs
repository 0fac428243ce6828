//! Scanning a segment file mapped into memory, with the map's one hazard guarded: a file that
//! another process truncates while it is mapped makes the access to its missing pages raise
//! SIGBUS, which kills the process. Here a SIGBUS handler (installed once, chaining to the one
//! before it) checks whether the faulting address is in the map this thread is scanning; if so it
//! maps zero pages over the rest of that map, notes it, and returns, so the scan goes on over zeros
//! and its report is thrown away: the caller scans the file again through a buffer
//! ([`super::read`]), which reports the truncated batch precisely. A fault anywhere else goes to the
//! previous handler (or the default action, which ends the process as it would have).
//!
//! Why map at all: on the machines measured (benches/README.md, section 2), mapping the file with
//! its pages populated in one call cost 3-19 ms per 268 MB (with the page cache in large folios or
//! in 4 KiB pages) against 45-70 ms for the kernel's copy into a buffer; the CRC runs at the same
//! speed on either.
//!
//! When the guard cannot be used (not Linux; another SIGBUS handler installed after this one, e.g.
//! Python's faulthandler enabled later; the map failing), [`scan_mapped`] returns None and the
//! caller reads the file through a buffer.

use super::{ScanOptions, ScanReport};
use std::fs::File;

/// `super::scan` of the mapped file, or None when it could not be scanned mapped (the guard is not
/// in place, the map failed, or the file shrank under the scan): then read it through a buffer.
pub fn scan_mapped(file: &File, len: u64, opts: ScanOptions) -> Option<ScanReport> {
    with_map(file, len, |buf| super::scan(buf, opts, None))
}

/// `f` over the first `len` bytes of the open regular file `file`, mapped, its pages populated in
/// one call, with the guard on: None when that could not be done, or when the file turned out
/// shorter than `len` during `f` (whose result is then dropped: what it saw was not the file).
pub fn with_map<T>(file: &File, len: u64, f: impl FnOnce(&[u8]) -> T) -> Option<T> {
    imp::with_map(file, len, f)
}

/// `f` over the bytes of the existing map `m`, its pages populated first, with the guard on: None
/// when the guard is not in place (then read the file through a buffer), or when part of the map
/// vanished under `f` (read as zeros from there on, in this map for good: whoever else reads it
/// sees zeros there rather than a fatal SIGBUS).
pub fn on_map<T>(m: &memmap2::Mmap, f: impl FnOnce(&[u8]) -> T) -> Option<T> {
    imp::on_map(m, f)
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use super::*;
    pub fn with_map<T>(_file: &File, _len: u64, _f: impl FnOnce(&[u8]) -> T) -> Option<T> {
        None
    }
    pub fn on_map<T>(m: &memmap2::Mmap, f: impl FnOnce(&[u8]) -> T) -> Option<T> {
        Some(f(m))
    }
}

#[cfg(target_os = "linux")]
mod imp {
    use super::*;
    use std::cell::Cell;
    use std::os::raw::{c_int, c_void};
    use std::ptr::null_mut;
    use std::sync::atomic::{compiler_fence, AtomicUsize, Ordering};
    use std::sync::{Once, OnceLock};

    thread_local! {
        /// The map this thread is scanning: [start, end) rounded to pages; (0, 0) when none.
        static RANGE: Cell<(usize, usize)> = const { Cell::new((0, 0)) };
        /// Set by the handler when it replaced part of this thread's map with zero pages.
        static HIT: Cell<bool> = const { Cell::new(false) };
    }

    static INSTALL: Once = Once::new();
    /// The SIGBUS disposition before ours, to chain to.
    static PREVIOUS: OnceLock<libc::sigaction> = OnceLock::new();
    static PAGE: AtomicUsize = AtomicUsize::new(4096);

    extern "C" fn on_sigbus(sig: c_int, info: *mut libc::siginfo_t, ctx: *mut c_void) {
        // SAFETY: the kernel hands a valid siginfo; the thread-locals are const-initialised cells
        // without destructors (plain TLS reads, safe in a handler); mmap is a system call.
        unsafe {
            let addr = (*info).si_addr() as usize;
            let (lo, hi) = RANGE.with(Cell::get);
            // si_code > 0: raised by the kernel for a fault, not sent by kill() or raise()
            if (*info).si_code > 0 && lo <= addr && addr < hi {
                let page = addr & !(PAGE.load(Ordering::Relaxed) - 1);
                let p = libc::mmap(page as *mut c_void, hi - page, libc::PROT_READ, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED, -1, 0);
                if p != libc::MAP_FAILED {
                    HIT.with(|h| h.set(true));
                    return;
                }
            }
            chain(sig, info, ctx);
        }
    }

    /// Hands a SIGBUS that is not ours to the handler before ours; with none, restores the
    /// default action and returns: the faulting access runs again and ends the process, as it would
    /// have without us.
    unsafe fn chain(sig: c_int, info: *mut libc::siginfo_t, ctx: *mut c_void) {
        match PREVIOUS.get() {
            Some(old) if old.sa_sigaction != libc::SIG_DFL && old.sa_sigaction != libc::SIG_IGN => {
                if old.sa_flags & libc::SA_SIGINFO != 0 {
                    let f: extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) = std::mem::transmute(old.sa_sigaction);
                    f(sig, info, ctx);
                } else {
                    let f: extern "C" fn(c_int) = std::mem::transmute(old.sa_sigaction);
                    f(sig);
                }
            }
            _ => {
                let mut dfl: libc::sigaction = std::mem::zeroed();
                dfl.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(libc::SIGBUS, &dfl, null_mut());
            }
        }
    }

    /// Installs the handler once; true when it is the one in place now (nobody replaced it).
    fn guard_in_place() -> bool {
        INSTALL.call_once(|| {
            // SAFETY: sigaction with valid pointers; the previous disposition is stored before ours
            // is installed, so the handler never runs without it.
            unsafe {
                let page = libc::sysconf(libc::_SC_PAGESIZE);
                if page > 0 {
                    PAGE.store(page as usize, Ordering::Relaxed);
                }
                let mut old: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(libc::SIGBUS, null_mut(), &mut old) != 0 {
                    return;
                }
                let _ = PREVIOUS.set(old);
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = on_sigbus as *const () as usize;
                sa.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
                libc::sigemptyset(&mut sa.sa_mask);
                libc::sigaction(libc::SIGBUS, &sa, null_mut());
            }
        });
        // SAFETY: a query of the current disposition.
        unsafe {
            let mut cur: libc::sigaction = std::mem::zeroed();
            libc::sigaction(libc::SIGBUS, null_mut(), &mut cur) == 0 && cur.sa_sigaction == on_sigbus as *const () as usize
        }
    }

    pub fn with_map<T>(file: &File, len: u64, f: impl FnOnce(&[u8]) -> T) -> Option<T> {
        if len == 0 || !guard_in_place() {
            return None;
        }
        // SAFETY: a read-only map of a regular file; the bytes it shows may vanish (truncation):
        // that fault is caught below, and the result of such a pass is dropped.
        let m = unsafe { memmap2::MmapOptions::new().len(usize::try_from(len).ok()?).map(file) }.ok()?;
        let rep = guarded(&m, |buf| {
            // every page faulted in by one call (it fails past a new end of file: `f` then
            // meets the missing pages, caught as any other)
            let _ = m.advise(memmap2::Advice::PopulateRead);
            f(buf)
        })?;
        // A file cut inside a page shows zeros up to that page's end rather than faulting: if it is
        // shorter now than when mapped, what the scan saw there is not the file.
        match file.metadata() {
            Ok(md) if md.len() >= len => Some(rep),
            _ => None,
        }
    }

    pub fn on_map<T>(m: &memmap2::Mmap, f: impl FnOnce(&[u8]) -> T) -> Option<T> {
        let populated = |buf: &[u8]| {
            let _ = m.advise(memmap2::Advice::PopulateRead);
            f(buf)
        };
        if guard_in_place() {
            guarded(m, populated)
        } else {
            None
        }
    }

    /// Runs `f` over the bytes of `m` with this thread's guard on `m`: None if part of the map
    /// vanished meanwhile (read as zeros by `f`, whose result is dropped).
    pub(super) fn guarded<T>(m: &memmap2::Mmap, f: impl FnOnce(&[u8]) -> T) -> Option<T> {
        let page = PAGE.load(Ordering::Relaxed);
        let lo = m.as_ptr() as usize;
        let hi = lo + m.len().div_ceil(page) * page;
        /// Clears the thread's guard however `f` ends (a panic too): the addresses may be mapped
        /// to something else once `m` is gone.
        struct Off;
        impl Drop for Off {
            fn drop(&mut self) {
                compiler_fence(Ordering::SeqCst);
                RANGE.with(|r| r.set((0, 0)));
            }
        }
        RANGE.with(|r| r.set((lo, hi)));
        HIT.with(|h| h.set(false));
        // the accesses of `f` stay between setting and clearing the guard
        compiler_fence(Ordering::SeqCst);
        let off = Off;
        let out = f(m);
        drop(off);
        if HIT.with(|h| h.replace(false)) {
            None
        } else {
            Some(out)
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;
        use std::io::Write;

        #[test]
        fn a_map_truncated_under_a_scan_is_caught_not_fatal() {
            assert!(guard_in_place());
            let n = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
            let p = std::env::temp_dir().join(format!("kraftkit-mapped-{}-{n}", std::process::id()));
            std::fs::File::create(&p).unwrap().write_all(&vec![7u8; 1 << 20]).unwrap();
            let f = File::open(&p).unwrap();
            let m = unsafe { memmap2::MmapOptions::new().map(&f) }.unwrap();
            // intact: the bytes as written
            assert_eq!(guarded(&m, |b| b.iter().map(|&x| x as u64).sum::<u64>()), Some(7 << 20));
            // cut to 5000 bytes by "another process": the pages past it fault, are replaced by zeros
            std::fs::OpenOptions::new().write(true).open(&p).unwrap().set_len(5000).unwrap();
            assert_eq!(guarded(&m, |b| b.iter().map(|&x| x as u64).sum::<u64>()), None);
            // the guard is off again for this thread, and on for the next scan
            assert_eq!(RANGE.with(Cell::get), (0, 0));
            assert!(guarded(&m, |b| b[..4096].iter().all(|&x| x == 7)).unwrap());
            drop(m);
            std::fs::remove_file(p).unwrap();
        }
    }
}
