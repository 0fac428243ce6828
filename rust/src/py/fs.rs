//! Atomic file writes for the Python side: the core's one sequence (temporary file, fsync,
//! rename, fsync of the directory; see `fsutil`), so that no Python module keeps a copy.

use super::errors::output_err;
use crate::fsutil;
use pyo3::prelude::*;
use std::path::PathBuf;

/// Writes `data` to `path` atomically: `<path>.tmp` (a new file gets `mode`, less the umask),
/// fsync, rename over `path`, fsync of the directory. On failure `path` is as it was and no
/// temporary file is left. Raises OSError (errno and filename set when the system gave one).
#[pyfunction]
#[pyo3(signature = (path, data, *, mode = 0o666))]
fn write_atomic(py: Python<'_>, path: PathBuf, data: &[u8], mode: u32) -> PyResult<()> {
    py.allow_threads(|| fsutil::write_atomic(&path, data, mode)).map_err(|e| output_err(&e))
}

/// Finishes a temporary output that was written in full and closed: fsync, `mode` when given
/// (0o444: read-only), rename over `dst`, fsync of the directory. Until the rename, a failure
/// removes `part` and leaves `dst` as it was. Only a regular file is committed.
#[pyfunction]
#[pyo3(signature = (part, dst, *, mode = None))]
fn commit_part(py: Python<'_>, part: PathBuf, dst: PathBuf, mode: Option<u32>) -> PyResult<()> {
    py.allow_threads(|| fsutil::commit_part(fsutil::open_part(&part)?, &part, &dst, mode)).map_err(|e| output_err(&e))
}

/// fsyncs the directory `path` (the names made, renamed or removed in it become durable).
#[pyfunction]
fn fsync_dir(py: Python<'_>, path: PathBuf) -> PyResult<()> {
    py.allow_threads(|| fsutil::sync_dir(&path)).map_err(|e| output_err(&e))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(write_atomic, m)?)?;
    m.add_function(wrap_pyfunction!(commit_part, m)?)?;
    m.add_function(wrap_pyfunction!(fsync_dir, m)?)?;
    Ok(())
}
