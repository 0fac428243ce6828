//! Opening input files, the one way every reader of the crate does it: without blocking and
//! regular files only; and writing output files, the one way every writer of the crate (and,
//! through `kraftkit._core`, of the Python side) does it: atomically.
//!
//! Opening a FIFO for reading blocks until a writer comes, and a character device such as
//! `/dev/zero` never ends: either, given where a segment, snapshot or index is expected, would
//! hang a reader or make it read forever. So a file is opened with `O_NONBLOCK` (the open of a
//! FIFO returns at once; on a regular file the flag changes nothing) and `O_CLOEXEC`, and the
//! opened file is checked with `fstat` (no race with a rename between a check and the open):
//! anything but a regular file is refused with an error saying what it is.

use memmap2::Mmap;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

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
    map_open(&f).map(Some)
}

/// The file `f`, opened by [`open_input`] and not empty, mapped read-only.
pub fn map_open(f: &File) -> io::Result<Mmap> {
    // SAFETY: the map is read-only; a file truncated by another process while mapped could
    // fault, as with any mmap reader (Kafka's own tools share this limit).
    let m = unsafe { Mmap::map(f) }?;
    let _ = m.advise(memmap2::Advice::Sequential);
    Ok(m)
}

/// Creates (or truncates) `path` for writing a temporary output: never through a symbolic
/// link, never blocking on a FIFO left in its place, and only ever a regular file.
pub fn create_output(path: &Path) -> io::Result<File> {
    create_output_mode(path, 0o666)
}

/// [`create_output`] with the permission bits a new file gets (less the umask).
pub fn create_output_mode(path: &Path, mode: u32) -> io::Result<File> {
    let f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(mode)
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

// ---------------------------------------------------------------------------------------------
// Atomic outputs: a temporary file in the target's directory, written, fsynced, renamed over the
// target, then the directory fsynced (as Kafka's `Utils.atomicMoveWithFallback` with the parent
// flushed). A reader sees the old file or the new one, never a part of either; after a crash the
// target is whole. Whole contents go through `write_atomic`; streamed outputs write their own
// temporary file and finish it with `commit_part`.

/// An output that could not be written: the file (or directory) at fault and why.
#[derive(Debug)]
pub struct OutputError {
    pub path: PathBuf,
    pub error: io::Error,
}

impl std::fmt::Display for OutputError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.error)
    }
}

impl std::error::Error for OutputError {}

impl From<OutputError> for crate::error::Error {
    fn from(e: OutputError) -> Self {
        crate::error::Error::new(crate::error::ErrorKind::Io, e.to_string())
    }
}

fn at(path: &Path) -> impl FnOnce(io::Error) -> OutputError + '_ {
    move |error| OutputError { path: path.to_path_buf(), error }
}

/// The directory holding `path` ("." for a bare file name).
pub fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// fsyncs the directory `dir`, making the names created, renamed or removed in it durable.
pub fn sync_dir(dir: &Path) -> Result<(), OutputError> {
    let d = File::open(dir).map_err(at(dir))?;
    d.sync_all().map_err(at(dir))
}

/// Finishes a streamed output: fsyncs `file` (the open temporary file `part`, written in full),
/// closes it, gives it the permission bits `mode` when set (0o444: a read-only snapshot),
/// renames it over `dst` and fsyncs their directory. Until the rename, a failure removes `part`
/// and leaves `dst` as it was.
pub fn commit_part(file: File, part: &Path, dst: &Path, mode: Option<u32>) -> Result<(), OutputError> {
    let staged = file.sync_all().and_then(|()| {
        drop(file);
        match mode {
            Some(m) => std::fs::set_permissions(part, std::fs::Permissions::from_mode(m)),
            None => Ok(()),
        }
    });
    if let Err(e) = staged.and_then(|()| std::fs::rename(part, dst)) {
        let _ = std::fs::remove_file(part);
        return Err(at(part)(e));
    }
    sync_dir(parent_dir(dst))
}

/// Opens the temporary output `part` that another writer (Python) wrote and closed, to
/// [`commit_part`] it: a regular file only, never through a symbolic link.
pub fn open_part(part: &Path) -> Result<File, OutputError> {
    let f = OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW).open(part).map_err(at(part))?;
    let md = f.metadata().map_err(at(part))?;
    if !md.file_type().is_file() {
        return Err(at(part)(not_regular(&md.file_type())));
    }
    Ok(f)
}

/// The temporary file of an atomic write of `path`: `<name>.tmp` beside it, as Kafka names
/// its own (`quorum-state.tmp`, `leader-epoch-checkpoint.tmp`).
pub fn tmp_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".tmp");
    PathBuf::from(s)
}

/// Writes `data` to `path` atomically; a new file gets the permission bits `mode` (less the
/// umask). On failure the temporary file is gone and `path` is as it was (unless only the
/// final fsync of the directory failed: the error names the directory).
pub fn write_atomic(path: &Path, data: &[u8], mode: u32) -> Result<(), OutputError> {
    let tmp = tmp_path(path);
    let mut f = create_output_mode(&tmp, mode).map_err(at(path))?;
    if let Err(e) = f.write_all(data) {
        drop(f);
        let _ = std::fs::remove_file(&tmp);
        return Err(at(path)(e));
    }
    commit_part(f, &tmp, path, None).map_err(|e| if e.path == tmp { at(path)(e.error) } else { e })
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

    #[test]
    fn atomic_writes_replace_the_whole_file_and_leave_nothing_behind() {
        let d = tmpdir("atomic");
        let p = d.join("quorum-state");
        write_atomic(&p, b"old contents", 0o600).unwrap();
        assert_eq!(std::fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o600);
        write_atomic(&p, b"new", 0o600).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new");
        let names: Vec<_> = std::fs::read_dir(&d).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, vec![std::ffi::OsString::from("quorum-state")]);
        // a bare name is written in the current directory's sense: its parent is "."
        assert_eq!(parent_dir(Path::new("x")), Path::new("."));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_failed_atomic_write_keeps_the_target_and_removes_the_temporary_file() {
        let d = tmpdir("atomic-fail");
        // the rename fails: the target is a directory that is not empty
        let p = d.join("target");
        std::fs::create_dir(&p).unwrap();
        std::fs::write(p.join("inside"), b"keep").unwrap();
        let e = write_atomic(&p, b"new", 0o644).unwrap_err();
        assert_eq!(e.path, p);
        assert!(e.to_string().starts_with(&format!("{}: ", p.display())));
        assert_eq!(std::fs::read(p.join("inside")).unwrap(), b"keep");
        assert!(!tmp_path(&p).exists());
        // a symbolic link where the temporary file goes is never written through
        let q = d.join("q");
        let victim = d.join("victim");
        std::fs::write(&victim, b"keep").unwrap();
        std::os::unix::fs::symlink(&victim, tmp_path(&q)).unwrap();
        assert!(write_atomic(&q, b"new", 0o644).is_err());
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
        assert!(!q.exists());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_part_file_is_committed_read_only_or_removed() {
        let d = tmpdir("part");
        let part = d.join("1-2-x.checkpoint.part");
        let dst = d.join("1-2.checkpoint");
        let mut f = create_output(&part).unwrap();
        f.write_all(b"snapshot").unwrap();
        commit_part(f, &part, &dst, Some(0o444)).unwrap();
        assert_eq!(std::fs::read(&dst).unwrap(), b"snapshot");
        assert_eq!(std::fs::metadata(&dst).unwrap().permissions().mode() & 0o777, 0o444);
        assert!(!part.exists());
        // reopened by name (a writer that closed it), then renamed over a directory: fails, removed
        std::fs::write(&part, b"again").unwrap();
        let busy = d.join("busy");
        std::fs::create_dir(&busy).unwrap();
        std::fs::write(busy.join("inside"), b"").unwrap();
        let e = commit_part(open_part(&part).unwrap(), &part, &busy, None).unwrap_err();
        assert_eq!(e.path, part);
        assert!(!part.exists() && busy.join("inside").exists());
        // only a regular file is committed
        mkfifo(&part);
        assert_eq!(open_part(&part).unwrap_err().error.to_string(), "not a regular file (a FIFO)");
        let e = sync_dir(&d.join("missing")).unwrap_err();
        assert_eq!(e.path, d.join("missing"));
        std::fs::remove_dir_all(&d).unwrap();
    }
}
