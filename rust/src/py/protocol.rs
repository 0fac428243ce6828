//! Kafka RPC messages from Python: requests and responses (header + body, without the 4-byte
//! size prefix) as dicts keyed by schema field names, and the RPC schema tables.

use super::metadata::{codec_err, message_py, struct_from_py, struct_to_py};
use crate::schema::{self, CodecError, CodecErrorKind};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

fn schema_of(py: Python<'_>, api_key: i16, response: bool) -> PyResult<&'static schema::MessageSchema> {
    schema::rpc_message(api_key, response).ok_or_else(|| {
        codec_err(py, &CodecError::new(CodecErrorKind::Unsupported, None, format!("apiKey {api_key} is not an RPC kraftkit speaks")), None)
    })
}

/// Encodes a request: the header for `api_key`/`version` (v2 when the version is flexible, v1
/// otherwise) and the body dict.
#[pyfunction]
#[pyo3(signature = (api_key, version, correlation_id, client_id, body))]
fn encode_request<'py>(py: Python<'py>, api_key: i16, version: i16, correlation_id: i32, client_id: Option<&str>, body: &Bound<'py, PyDict>) -> PyResult<Bound<'py, PyBytes>> {
    let m = schema_of(py, api_key, false)?;
    let st = struct_from_py(body, m.body, m.name)?;
    let b = schema::encode_request(api_key, version, correlation_id, client_id, &st).map_err(|e| codec_err(py, &e, None))?;
    Ok(PyBytes::new(py, &b))
}

/// api_key, version, correlation_id, client_id, body dict.
type DecodedRequest<'py> = (i16, i16, i32, Option<String>, Bound<'py, PyDict>);

/// Decodes a request: (api_key, version, correlation_id, client_id, body dict).
#[pyfunction]
fn decode_request<'py>(py: Python<'py>, data: &[u8]) -> PyResult<DecodedRequest<'py>> {
    let r = schema::decode_request(data).map_err(|e| codec_err(py, &e, None))?;
    let client = match r.header.get("ClientId") {
        Some(schema::Value::Str(s)) => Some(s.clone()),
        _ => None,
    };
    Ok((r.api_key, r.version, r.correlation_id, client, struct_to_py(py, &r.body)?))
}

/// Encodes a response to a request of `api_key` at `version`.
#[pyfunction]
fn encode_response<'py>(py: Python<'py>, api_key: i16, version: i16, correlation_id: i32, body: &Bound<'py, PyDict>) -> PyResult<Bound<'py, PyBytes>> {
    let m = schema_of(py, api_key, true)?;
    let st = struct_from_py(body, m.body, m.name)?;
    let b = schema::encode_response(api_key, version, correlation_id, &st).map_err(|e| codec_err(py, &e, None))?;
    Ok(PyBytes::new(py, &b))
}

/// Decodes a response to a request of `api_key` at `version`: (correlation_id, body dict).
#[pyfunction]
fn decode_response<'py>(py: Python<'py>, api_key: i16, version: i16, data: &[u8]) -> PyResult<(i32, Bound<'py, PyDict>)> {
    let (c, st) = schema::decode_response(api_key, version, data).map_err(|e| codec_err(py, &e, None))?;
    Ok((c, struct_to_py(py, &st)?))
}

/// Every RPC schema kraftkit speaks (name, api_key, kind, versions, fields), like `metadata_schema()`.
#[pyfunction]
fn rpc_schema<'py>(py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
    let out = PyList::empty(py);
    for m in schema::RPC_MESSAGES {
        out.append(message_py(py, m)?)?;
    }
    Ok(out)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(encode_request, m)?)?;
    m.add_function(wrap_pyfunction!(decode_request, m)?)?;
    m.add_function(wrap_pyfunction!(encode_response, m)?)?;
    m.add_function(wrap_pyfunction!(decode_response, m)?)?;
    m.add_function(wrap_pyfunction!(rpc_schema, m)?)?;
    Ok(())
}
