//! Snapshot files from Python: structural validation and the framing control-record values.

use super::errors::{io_err, to_pyerr};
use crate::snapshot;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use std::path::PathBuf;

/// Validates a snapshot file (see `kraftkit.metadata.snapshot`). Returns a report dict:
/// batches, records, data_records, valid_bytes, last_contained_log_timestamp, kraft_version,
/// has_voters, has_footer, next_offset, error (exception instance or None). The GIL is released.
#[pyfunction]
#[pyo3(signature = (path, epoch = None))]
fn validate_snapshot<'py>(py: Python<'py>, path: PathBuf, epoch: Option<i32>) -> PyResult<Bound<'py, PyDict>> {
    let name = path.to_string_lossy().into_owned();
    let data = crate::fsutil::read_input(&path, None).map_err(|e| io_err(&name, e))?;
    let rep = py.allow_threads(|| snapshot::validate(&data, epoch));
    let d = PyDict::new(py);
    d.set_item("file", &name)?;
    d.set_item("batches", rep.batches)?;
    d.set_item("records", rep.records)?;
    d.set_item("data_records", rep.data_records)?;
    d.set_item("valid_bytes", rep.valid_bytes)?;
    d.set_item("total_bytes", data.len())?;
    d.set_item("last_contained_log_timestamp", rep.last_contained_log_timestamp)?;
    d.set_item("kraft_version", rep.kraft_version)?;
    d.set_item("has_voters", rep.has_voters)?;
    d.set_item("has_footer", rep.has_footer)?;
    d.set_item("next_offset", rep.next_offset)?;
    d.set_item("error", rep.error.as_ref().map(|e| to_pyerr(py, e, Some(&name)).into_value(py)))?;
    Ok(d)
}

/// The value of a `SnapshotHeaderRecord` v0.
#[pyfunction]
fn snapshot_header_value(py: Python<'_>, last_contained_log_timestamp: i64) -> Bound<'_, PyBytes> {
    PyBytes::new(py, &snapshot::header_value(last_contained_log_timestamp))
}

/// The value of a `SnapshotFooterRecord` v0.
#[pyfunction]
fn snapshot_footer_value(py: Python<'_>) -> Bound<'_, PyBytes> {
    PyBytes::new(py, &snapshot::footer_value())
}

/// The value of a `KRaftVersionRecord` v0.
#[pyfunction]
fn kraft_version_value(py: Python<'_>, level: i16) -> Bound<'_, PyBytes> {
    PyBytes::new(py, &snapshot::kraft_version_value(level))
}

/// The 4-byte key of a control record of type `control_type`.
#[pyfunction]
fn control_record_key(py: Python<'_>, control_type: i16) -> Bound<'_, PyBytes> {
    PyBytes::new(py, &snapshot::control_key(control_type))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(validate_snapshot, m)?)?;
    m.add_function(wrap_pyfunction!(snapshot_header_value, m)?)?;
    m.add_function(wrap_pyfunction!(snapshot_footer_value, m)?)?;
    m.add_function(wrap_pyfunction!(kraft_version_value, m)?)?;
    m.add_function(wrap_pyfunction!(control_record_key, m)?)?;
    Ok(())
}
