//! The Python face of the core (`kraftkit._core`): conversions, exceptions, GIL release.

mod arrow;
mod batch;
mod errors;
mod fs;
mod image;
mod metadata;
mod metadump;
mod protocol;
mod record;
mod rewrite;
mod segment;
mod snapshot;
mod source;

use pyo3::prelude::*;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(m)?;
    batch::register(m)?;
    record::register(m)?;
    segment::register(m)?;
    fs::register(m)?;
    metadata::register(m)?;
    metadump::register(m)?;
    snapshot::register(m)?;
    rewrite::register(m)?;
    protocol::register(m)?;
    image::register(m)?;
    arrow::register(m)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
