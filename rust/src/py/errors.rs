//! Core errors as precise Python exceptions carrying file, offset, position and reason.

use crate::error::{Error, ErrorKind};
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(kraftkit._core, KraftkitError, PyException, "Base class of every kraftkit error.");
create_exception!(kraftkit._core, CorruptRecordError, KraftkitError, "Bytes that are not a valid record batch or record: bad sizes, CRC mismatch, torn writes.");
create_exception!(kraftkit._core, TruncatedError, CorruptRecordError, "The data ends inside a batch (a torn write).");
create_exception!(kraftkit._core, CompressionError, CorruptRecordError, "A compressed batch whose payload cannot be decompressed.");
create_exception!(kraftkit._core, UnsupportedFormatError, KraftkitError, "A format kraftkit recognises but does not handle (e.g. magic 0/1 message sets).");
create_exception!(kraftkit._core, CorruptIndexError, KraftkitError, "An offset or time index inconsistent with its log.");

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("KraftkitError", py.get_type::<KraftkitError>())?;
    m.add("CorruptRecordError", py.get_type::<CorruptRecordError>())?;
    m.add("TruncatedError", py.get_type::<TruncatedError>())?;
    m.add("CompressionError", py.get_type::<CompressionError>())?;
    m.add("UnsupportedFormatError", py.get_type::<UnsupportedFormatError>())?;
    m.add("CorruptIndexError", py.get_type::<CorruptIndexError>())?;
    Ok(())
}

/// Builds the Python exception for a core error; `file` names the file when there is one.
pub fn to_pyerr(py: Python<'_>, e: &Error, file: Option<&str>) -> PyErr {
    let mut msg = String::new();
    if let Some(f) = file {
        msg.push_str(f);
        msg.push_str(": ");
    }
    msg.push_str(&without_os_error(&e.to_string()));
    let err = match e.kind {
        ErrorKind::Corrupt => CorruptRecordError::new_err(msg),
        ErrorKind::Truncated => TruncatedError::new_err(msg),
        ErrorKind::Compression => CompressionError::new_err(msg),
        ErrorKind::Unsupported => UnsupportedFormatError::new_err(msg),
        ErrorKind::Index => CorruptIndexError::new_err(msg),
        ErrorKind::InvalidArgument => pyo3::exceptions::PyValueError::new_err(msg),
        ErrorKind::Io => pyo3::exceptions::PyOSError::new_err(msg),
    };
    let v = err.value(py);
    let _ = v.setattr("file", file);
    let _ = v.setattr("offset", e.offset);
    let _ = v.setattr("position", e.position);
    let _ = v.setattr("reason", e.reason.as_str());
    err
}

/// An I/O error on `path` as Python's own OSError for it (errno, reason, file name: the subclass
/// follows the errno, e.g. FileNotFoundError), without Rust's " (os error N)" suffix.
pub fn io_err(path: &str, e: std::io::Error) -> PyErr {
    match e.raw_os_error() {
        Some(errno) => pyo3::exceptions::PyOSError::new_err((errno, without_os_error(&e.to_string()), path.to_owned())),
        None => pyo3::exceptions::PyOSError::new_err(format!("{path}: {}", without_os_error(&e.to_string()))),
    }
}

/// `text` without the " (os error N)" Rust's io::Error display appends (anywhere in it).
pub fn without_os_error(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find(" (os error ") {
        let tail = &rest[i + " (os error ".len()..];
        let digits = tail.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 && tail[digits..].starts_with(')') {
            out.push_str(&rest[..i]);
            rest = &tail[digits + 1..];
        } else {
            out.push_str(&rest[..i + 1]);
            rest = &rest[i + 1..];
        }
    }
    out.push_str(rest);
    out
}

/// An output that could not be written, as Python's own OSError for it: the errno (so the
/// subclass, e.g. PermissionError), the reason and the file name; a reason of the core's own
/// ("not a regular file (a FIFO)") as `<path>: <reason>`.
pub fn output_err(e: &crate::fsutil::OutputError) -> PyErr {
    let path = e.path.to_string_lossy().into_owned();
    match e.error.raw_os_error() {
        Some(errno) => pyo3::exceptions::PyOSError::new_err((errno, without_os_error(&e.error.to_string()), path)),
        None => pyo3::exceptions::PyOSError::new_err(e.to_string()),
    }
}
