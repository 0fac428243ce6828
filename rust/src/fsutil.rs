//! Opening input files, the one way every reader of the crate does it: without blocking and
//! regular files only.
//!
//! Opening a FIFO for reading blocks until a writer comes, and a character device such as
//! `/dev/zero` never ends: either, given where a segment, snapshot or index is expected, would
//! hang a reader or make it read forever. So a file is opened with `O_NONBLOCK` (the open of a
//! FIFO returns at once; on a regular file the flag changes nothing) and `O_CLOEXEC`, and the
//! opened file is checked with `fstat` (no race with a rename between a check and the open):
//! anything but a regular file is refused with an error saying what it is.

use memmap2::Mmap;
use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// What a non-regular file is, for messages: "a FIFO", "a directory", ...
pub fn kind_of(ft: &std::fs::FileType) -> &'static str {
    if ft.is_dir() {
        "a directory"
    } else if ft.is_fifo() {
        "a FIFO"
    } else if ft.is_char_device() {
        "a character device"
    } else if ft.is_block_device() {
        "a block device"
    } else if ft.is_socket() {
        "a socket"
    } else if ft.is_symlink() {
        "a symbolic link"
    } else {
        "not a file"
    }
}

fn not_regular(ft: &std::fs::FileType) -> io::Error {
    if ft.is_dir() {
        return io::Error::new(io::ErrorKind::IsADirectory, "is a directory, not a file");
    }
    io::Error::new(io::ErrorKind::InvalidInput, format!("not a regular file ({})", kind_of(ft)))
}

/// Opens `path` for reading: a regular file (symbolic links followed), never blocking on a
/// FIFO. Returns the file and its length. The error's text says why (`not a regular file (a
/// FIFO)`, `is a directory, not a file`, or the system's reason); callers put the path in front.
pub fn open_input(path: &Path) -> io::Result<(File, u64)> {
    // O_CLOEXEC is set by std on every open
    let f = OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path)?;
    let md = f.metadata()?;
    if !md.file_type().is_file() {
        return Err(not_regular(&md.file_type()));
    }
    Ok((f, md.len()))
}

/// The whole of a regular input file. `limit`: refuse files longer than that many bytes.
pub fn read_input(path: &Path, limit: Option<u64>) -> io::Result<Vec<u8>> {
    let (f, len) = open_input(path)?;
    if let Some(max) = limit.filter(|&m| len > m) {
        return Err(io::Error::new(io::ErrorKind::InvalidData, format!("{len} bytes: too large (at most {max} bytes)")));
    }
    let mut out = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    // at most what fstat said (a file growing meanwhile is read as it was)
    f.take(len).read_to_end(&mut out)?;
    Ok(out)
}

/// The regular input file mapped read-only; None when it is empty (a zero-length map is an error).
pub fn map_input(path: &Path) -> io::Result<Option<Mmap>> {
    let (f, len) = open_input(path)?;
    if len == 0 {
        return Ok(None);
    }
    // SAFETY: the map is read-only; a file truncated by another process while mapped could
    // fault, as with any mmap reader (Kafka's own tools share this limit).
    let m = unsafe { Mmap::map(&f) }?;
    let _ = m.advise(memmap2::Advice::Sequential);
    Ok(Some(m))
}

/// Creates (or truncates) `path` for writing a temporary output: never through a symbolic
/// link, never blocking on a FIFO left in its place, and only ever a regular file.
pub fn create_output(path: &Path) -> io::Result<File> {
    let f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| match std::fs::symlink_metadata(path) {
            // a FIFO without a reader fails the non-blocking open (ENXIO): say what it is
            Ok(md) if !md.file_type().is_file() && !md.file_type().is_symlink() => not_regular(&md.file_type()),
            _ => e,
        })?;
    let md = f.metadata()?;
    if !md.file_type().is_file() {
        return Err(not_regular(&md.file_type()));
    }
    f.set_len(0)?;
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{SystemTime, UNIX_EPOCH};

    fn tmpdir(tag: &str) -> std::path::PathBuf {
        let n = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos();
        let d = std::env::temp_dir().join(format!("kraftkit-fsutil-{tag}-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn mkfifo(p: &Path) {
        let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    }

    #[test]
    fn regular_files_are_read_and_mapped() {
        let d = tmpdir("reg");
        let p = d.join("a.log");
        std::fs::write(&p, b"hello").unwrap();
        assert_eq!(read_input(&p, None).unwrap(), b"hello");
        assert_eq!(&map_input(&p).unwrap().unwrap()[..], b"hello");
        std::fs::write(&p, b"").unwrap();
        assert!(map_input(&p).unwrap().is_none());
        assert!(read_input(&p, Some(0)).unwrap().is_empty());
        std::fs::write(&p, b"12345").unwrap();
        let e = read_input(&p, Some(4)).unwrap_err();
        assert_eq!(e.to_string(), "5 bytes: too large (at most 4 bytes)");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_fifo_is_refused_at_once() {
        let d = tmpdir("fifo");
        let p = d.join("00000000000000000000.log");
        mkfifo(&p);
        for e in [open_input(&p).unwrap_err(), read_input(&p, None).unwrap_err(), map_input(&p).unwrap_err()] {
            assert_eq!(e.to_string(), "not a regular file (a FIFO)");
        }
        // a FIFO left where a temporary output goes: refused, not opened for writing (which blocks)
        assert_eq!(create_output(&p).unwrap_err().to_string(), "not a regular file (a FIFO)");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn devices_and_directories_are_refused() {
        assert_eq!(open_input(Path::new("/dev/zero")).unwrap_err().to_string(), "not a regular file (a character device)");
        let d = tmpdir("dir");
        assert_eq!(open_input(&d).unwrap_err().to_string(), "is a directory, not a file");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn outputs_are_never_written_through_a_symlink() {
        let d = tmpdir("link");
        let target = d.join("target");
        std::fs::write(&target, b"keep").unwrap();
        std::os::unix::fs::symlink(&target, d.join("x.part")).unwrap();
        assert!(create_output(&d.join("x.part")).is_err());
        assert_eq!(std::fs::read(&target).unwrap(), b"keep");
        let mut f = create_output(&d.join("y.part")).unwrap();
        std::io::Write::write_all(&mut f, b"new").unwrap();
        assert_eq!(std::fs::read(d.join("y.part")).unwrap(), b"new");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
