//! The Python face of the core (`kraftkit._core`): conversions, exceptions, GIL release.

mod batch;
mod errors;
mod segment;

use pyo3::prelude::*;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(m)?;
    batch::register(m)?;
    segment::register(m)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
