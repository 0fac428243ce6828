//! Metadata and control records through the schema codec (`crate::schema`): Python dicts keyed
//! by the schema's field names (`"BrokerId"`), JSON as kafka-dump-log prints it, the tables.
//!
//! Value mapping: integers -> int, float64 -> float, bool -> bool, string -> str, bytes and
//! records -> bytes, uuid -> uuid.UUID (encoding also takes Kafka's base64 text or 16 bytes),
//! arrays -> list, structs -> dict, null -> None. A struct's unknown tagged fields are the
//! `"_unknown_tags"` entry: a list of (tag, bytes), present only when there are some.

use super::batch::RecordBatch;
use super::errors::{CorruptRecordError, TruncatedError, UnsupportedFormatError};
use crate::batch;
use crate::schema::{self, codec, json, json_direct, CodecError, CodecErrorKind, DefaultValue, Field, FieldType, MessageSchema, StructSchema, Struct, Value, Versions};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

pub const UNKNOWN_TAGS: &str = "_unknown_tags";

static UUID_CLASS: GILOnceCell<PyObject> = GILOnceCell::new();

fn uuid_class(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    Ok(UUID_CLASS.get_or_try_init(py, || -> PyResult<PyObject> { Ok(py.import("uuid")?.getattr("UUID")?.unbind()) })?.bind(py))
}

/// The Python exception for a codec error (attributes: position, reason, field, offset, file).
pub fn codec_err(py: Python<'_>, e: &CodecError, offset: Option<i64>) -> PyErr {
    let mut msg = e.to_string();
    if let Some(o) = offset {
        msg = format!("record at offset {o}: {msg}");
    }
    let err = match e.kind {
        CodecErrorKind::Truncated => TruncatedError::new_err(msg),
        CodecErrorKind::Corrupt => CorruptRecordError::new_err(msg),
        CodecErrorKind::Unsupported => UnsupportedFormatError::new_err(msg),
        CodecErrorKind::Invalid => return PyValueError::new_err(msg),
    };
    let v = err.value(py);
    let _ = v.setattr("file", py.None());
    let _ = v.setattr("offset", offset);
    let _ = v.setattr("position", e.position);
    let _ = v.setattr("reason", e.reason.as_str());
    let _ = v.setattr("field", if e.path.is_empty() { None } else { Some(e.path.as_str()) });
    err
}

// ---------------------------------------------------------------------------------------------
// Value -> Python

thread_local! {
    /// Recently made `uuid.UUID` objects. They are immutable, so one object can serve every
    /// record that names the same topic or directory; `uuid.UUID(bytes=...)` runs Python code
    /// and dominated decoding before this cache.
    static UUIDS: std::cell::RefCell<std::collections::HashMap<[u8; 16], PyObject>> = std::cell::RefCell::new(std::collections::HashMap::new());
}
const UUID_CACHE_MAX: usize = 1 << 16;

pub(crate) fn uuid_to_py(py: Python<'_>, u: &[u8; 16]) -> PyResult<PyObject> {
    if let Some(o) = UUIDS.with(|c| c.borrow().get(u).map(|o| o.clone_ref(py))) {
        return Ok(o);
    }
    let kw = PyDict::new(py);
    kw.set_item("bytes", PyBytes::new(py, u))?;
    let o = uuid_class(py)?.call((), Some(&kw))?.unbind();
    UUIDS.with(|c| {
        let mut m = c.borrow_mut();
        if m.len() >= UUID_CACHE_MAX {
            m.clear();
        }
        m.insert(*u, o.clone_ref(py));
    });
    Ok(o)
}

fn to_py(py: Python<'_>, v: &Value) -> PyResult<PyObject> {
    Ok(match v {
        Value::Null => py.None(),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any().unbind(),
        Value::Int(i) => i.into_pyobject(py)?.into_any().unbind(),
        Value::Float(x) => PyFloat::new(py, *x).into_any().unbind(),
        Value::Str(s) => PyString::new(py, s).into_any().unbind(),
        Value::Bytes(b) => PyBytes::new(py, b).into_any().unbind(),
        Value::Uuid(u) => uuid_to_py(py, u)?,
        Value::Array(items) => {
            let l = PyList::empty(py);
            for it in items {
                l.append(to_py(py, it)?)?;
            }
            l.into_any().unbind()
        }
        Value::Struct(st) => struct_to_py(py, st)?.into_any().unbind(),
    })
}

thread_local! {
    /// Field names as Python strings, keyed by the address of the generated table's `&'static str`:
    /// made once, their hashes computed once, instead of a new string per field per record.
    static FIELD_NAMES: std::cell::RefCell<std::collections::HashMap<usize, Py<PyString>>> = std::cell::RefCell::new(std::collections::HashMap::new());
}

fn field_name<'py>(py: Python<'py>, name: &'static str) -> Bound<'py, PyString> {
    let key = name.as_ptr() as usize;
    FIELD_NAMES.with(|c| {
        if let Some(s) = c.borrow().get(&key) {
            return s.bind(py).clone();
        }
        let s = PyString::intern(py, name);
        c.borrow_mut().insert(key, s.clone().unbind());
        s
    })
}

pub fn struct_to_py<'py>(py: Python<'py>, st: &Struct) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (name, v) in &st.fields {
        d.set_item(field_name(py, name), to_py(py, v)?)?;
    }
    if !st.unknown_tags.is_empty() {
        let l = PyList::empty(py);
        for (tag, data) in &st.unknown_tags {
            l.append((*tag, PyBytes::new(py, data)))?;
        }
        d.set_item(UNKNOWN_TAGS, l)?;
    }
    Ok(d)
}

// ---------------------------------------------------------------------------------------------
// Python -> Value

/// Where a value sits in the dict being converted; formatted only for error messages, so that
/// converting a record allocates no path strings.
#[derive(Clone, Copy)]
enum FieldPath<'a> {
    Root(&'a str),
    Field(&'a FieldPath<'a>, &'static str),
    Index(&'a FieldPath<'a>, usize),
}

impl std::fmt::Display for FieldPath<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FieldPath::Root(s) => f.write_str(s),
            FieldPath::Field(FieldPath::Root(""), n) => f.write_str(n),
            FieldPath::Field(p, n) => write!(f, "{p}.{n}"),
            FieldPath::Index(p, i) => write!(f, "{p}[{i}]"),
        }
    }
}

fn bad(path: &FieldPath<'_>, msg: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(format!("{path}: {msg}"))
}

fn from_py(obj: &Bound<'_, PyAny>, t: &FieldType, path: &FieldPath<'_>) -> PyResult<Value> {
    if obj.is_none() {
        return Ok(Value::Null);
    }
    Ok(match t {
        FieldType::Bool => {
            let b = obj.downcast::<PyBool>().map_err(|_| PyTypeError::new_err(format!("{path}: expected bool, got {}", type_name(obj))))?;
            Value::Bool(b.is_true())
        }
        FieldType::Float64 => {
            if obj.is_instance_of::<PyBool>() {
                return Err(PyTypeError::new_err(format!("{path}: expected float, got bool")));
            }
            Value::Float(obj.extract::<f64>().map_err(|_| PyTypeError::new_err(format!("{path}: expected float, got {}", type_name(obj))))?)
        }
        FieldType::String => Value::Str(
            obj.downcast::<PyString>()
                .map_err(|_| PyTypeError::new_err(format!("{path}: expected str, got {}", type_name(obj))))?
                .to_str()
                .map_err(|e| bad(path, e))?
                .to_owned(),
        ),
        FieldType::Bytes | FieldType::Records => {
            if obj.is_instance_of::<PyString>() {
                return Err(PyTypeError::new_err(format!("{path}: expected bytes, got str")));
            }
            if let Ok(b) = obj.downcast::<PyBytes>() {
                Value::Bytes(b.as_bytes().to_vec())
            } else if let Ok(buf) = pyo3::buffer::PyBuffer::<u8>::get(obj) {
                // bytearray, memoryview, mmap...: one copy, not an item-by-item sequence walk
                Value::Bytes(buf.to_vec(obj.py())?)
            } else {
                Value::Bytes(obj.extract::<Vec<u8>>().map_err(|_| PyTypeError::new_err(format!("{path}: expected bytes, got {}", type_name(obj))))?)
            }
        }
        FieldType::Uuid => Value::Uuid(uuid_from_py(obj, path)?),
        FieldType::Array(elem) => {
            if obj.is_instance_of::<PyString>() || obj.is_instance_of::<PyBytes>() || obj.is_instance_of::<PyDict>() {
                return Err(PyTypeError::new_err(format!("{path}: expected a list, got {}", type_name(obj))));
            }
            let mut items = Vec::new();
            for (i, it) in obj.try_iter().map_err(|_| PyTypeError::new_err(format!("{path}: expected a list, got {}", type_name(obj))))?.enumerate() {
                items.push(from_py(&it?, elem, &FieldPath::Index(path, i))?);
            }
            Value::Array(items)
        }
        FieldType::Struct(s) => {
            let d = obj.downcast::<PyDict>().map_err(|_| PyTypeError::new_err(format!("{path}: expected a dict, got {}", type_name(obj))))?;
            Value::Struct(struct_from_path(d, s, path)?)
        }
        _ => {
            if obj.is_instance_of::<PyBool>() || !obj.is_instance_of::<PyInt>() {
                return Err(PyTypeError::new_err(format!("{path}: expected int ({}), got {}", t.kafka_name(), type_name(obj))));
            }
            Value::Int(obj.extract::<i64>().map_err(|_| bad(path, format!("{} is out of range for {}", obj, t.kafka_name())))?)
        }
    })
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into())
}

fn uuid_from_py(obj: &Bound<'_, PyAny>, path: &FieldPath<'_>) -> PyResult<[u8; 16]> {
    if obj.is_instance(uuid_class(obj.py())?)? {
        // `UUID.int` is a slot; `UUID.bytes` a property computed in Python.
        if let Ok(i) = obj.getattr(pyo3::intern!(obj.py(), "int")).and_then(|i| i.extract::<u128>()) {
            return Ok(i.to_be_bytes());
        }
    }
    if let Ok(s) = obj.downcast::<PyString>() {
        let s = s.to_str()?;
        return json::parse_uuid_text(s).ok_or_else(|| bad(path, format!("{s:?} is not a Kafka uuid (22 characters of URL-safe base64)")));
    }
    if let Ok(b) = obj.downcast::<PyBytes>() {
        return b.as_bytes().try_into().map_err(|_| bad(path, "a uuid given as bytes must have 16 bytes"));
    }
    if obj.is_instance(uuid_class(obj.py())?)? {
        let b = obj.getattr("bytes")?;
        let b = b.downcast::<PyBytes>()?;
        return Ok(b.as_bytes().try_into().unwrap_or([0; 16]));
    }
    Err(PyTypeError::new_err(format!("{path}: expected uuid.UUID, Kafka uuid text or 16 bytes, got {}", type_name(obj))))
}

/// A dict keyed by schema field names -> Struct (missing fields are left out: the encoder
/// writes their defaults). Unknown keys are errors.
pub fn struct_from_py(d: &Bound<'_, PyDict>, s: &'static StructSchema, path: &str) -> PyResult<Struct> {
    struct_from_path(d, s, &FieldPath::Root(path))
}

fn struct_from_path(d: &Bound<'_, PyDict>, s: &'static StructSchema, path: &FieldPath<'_>) -> PyResult<Struct> {
    let mut st = Struct::default();
    for (k, v) in d.iter() {
        let key = k.downcast::<PyString>().map_err(|_| PyTypeError::new_err(format!("{path}: keys must be str")))?;
        let key = key.to_str()?;
        if key == UNKNOWN_TAGS {
            if v.is_none() {
                continue;
            }
            for it in v.try_iter()? {
                let it = it?;
                let (tag, data): (u32, Vec<u8>) =
                    it.extract().map_err(|_| PyTypeError::new_err(format!("{path}.{UNKNOWN_TAGS}: expected (tag, bytes) pairs")))?;
                st.unknown_tags.push((tag, data));
            }
            continue;
        }
        let f = s.fields.iter().find(|f| f.name == key).ok_or_else(|| {
            let names: Vec<&str> = s.fields.iter().map(|f| f.name).collect();
            bad(path, format!("{} has no field {key:?} (fields: {})", s.name, names.join(", ")))
        })?;
        st.fields.push((f.name, from_py(&v, &f.ty, &FieldPath::Field(path, f.name))?));
    }
    Ok(st)
}

// ---------------------------------------------------------------------------------------------
// Functions

fn metadata_schema_of(py: Python<'_>, api_key: i16) -> PyResult<&'static MessageSchema> {
    schema::metadata_schema(api_key)
        .ok_or_else(|| codec_err(py, &CodecError::new(CodecErrorKind::Unsupported, None, format!("Unknown metadata id {api_key}")), None))
}

/// Decodes a metadata record value (ApiMessageAndVersion frame + body) -> (api_key, version, dict).
#[pyfunction]
fn decode_metadata_record<'py>(py: Python<'py>, value: &[u8]) -> PyResult<(i16, i16, Bound<'py, PyDict>)> {
    let r = schema::decode_metadata_record(value).map_err(|e| codec_err(py, &e, None))?;
    Ok((r.schema.api_key, r.version, struct_to_py(py, &r.data)?))
}

/// Encodes a metadata record value from a dict shaped like `decode_metadata_record`'s.
#[pyfunction]
fn encode_metadata_record<'py>(py: Python<'py>, api_key: i16, version: i16, data: &Bound<'py, PyDict>) -> PyResult<Bound<'py, PyBytes>> {
    let m = metadata_schema_of(py, api_key)?;
    let st = struct_from_py(data, m.body, m.name)?;
    let b = schema::encode_metadata_record(api_key, version, &st).map_err(|e| codec_err(py, &e, None))?;
    Ok(PyBytes::new(py, &b))
}

/// The record as kafka-dump-log --cluster-metadata-decoder prints it.
#[pyfunction]
fn metadata_record_json(py: Python<'_>, value: &[u8]) -> PyResult<String> {
    let r = schema::decode_metadata_record(value).map_err(|e| codec_err(py, &e, None))?;
    Ok(json::metadata_record_json(r.schema, r.version, &r.data))
}

/// Decodes a control record value for control type `control_type` (2..=6) -> dict.
#[pyfunction]
fn decode_control_record<'py>(py: Python<'py>, control_type: i16, value: &[u8]) -> PyResult<Bound<'py, PyDict>> {
    let (_, _, st) = schema::decode_control_record(control_type, value).map_err(|e| codec_err(py, &e, None))?;
    struct_to_py(py, &st)
}

/// Encodes a control record value (its version is the dict's "Version", default 0).
#[pyfunction]
fn encode_control_record<'py>(py: Python<'py>, control_type: i16, data: &Bound<'py, PyDict>) -> PyResult<Bound<'py, PyBytes>> {
    let c = schema::control_schema(control_type)
        .ok_or_else(|| codec_err(py, &CodecError::new(CodecErrorKind::Unsupported, None, format!("control type {control_type} has no schema")), None))?;
    let st = struct_from_py(data, c.schema.body, c.schema.name)?;
    let b = schema::encode_control_record(control_type, &st).map_err(|e| codec_err(py, &e, None))?;
    Ok(PyBytes::new(py, &b))
}

/// (label, JSON) of a control record value, as kafka-dump-log prints it.
#[pyfunction]
fn control_record_json(py: Python<'_>, control_type: i16, value: &[u8]) -> PyResult<(&'static str, String)> {
    let (c, v, st) = schema::decode_control_record(control_type, value).map_err(|e| codec_err(py, &e, None))?;
    Ok((c.label, json::message_json(c.schema, v, &st)))
}

/// [(api_key, name, min_version, max_version)] of every metadata record type.
#[pyfunction]
fn metadata_record_types() -> Vec<(i16, &'static str, i16, i16)> {
    schema::METADATA_RECORDS.iter().map(|m| (m.api_key, m.name, m.valid_versions.min, m.valid_versions.max)).collect()
}

enum Decoded {
    Data(i64, &'static MessageSchema, i16, Struct),
    Control(i64, i16, Option<(i16, Struct)>),
    /// json=True: the text, written straight from the bytes (`schema::json_direct`)
    DataJson(i64, i16, i16, String),
    ControlJson(i64, i16, Option<String>),
}

/// A JSON text the direct writer made (it writes UTF-8 only).
fn utf8(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Decodes every record of a batch with the GIL released (`json=True`: JSON text instead of dicts):
/// data batch -> [(offset, api_key, version, dict)];
/// control batch -> [(offset, None, control_type, dict, or None for transaction markers)].
#[pyfunction]
#[pyo3(signature = (batch, json = false))]
fn decode_metadata_batch<'py>(py: Python<'py>, batch: &Bound<'py, RecordBatch>, json: bool) -> PyResult<Bound<'py, PyList>> {
    let b = batch.get();
    let bytes = &b.data.bytes()[b.start..b.end];
    let h = &b.h;
    let file = b.file.clone();
    let pos = b.position;
    /// Why decoding stopped: a corrupt batch, or a record the codec refused (at an offset).
    enum Failure {
        Corrupt(crate::error::Error),
        Codec(CodecError, i64),
    }
    let res: Result<Vec<Decoded>, Box<Failure>> = py.allow_threads(|| {
        let data = batch::records_data(h, bytes, pos).map_err(|e| Box::new(Failure::Corrupt(e)))?;
        let mut views = Vec::new();
        batch::parse_records(h, data.bytes(), pos, &mut views).map_err(|e| Box::new(Failure::Corrupt(e)))?;
        let d = data.bytes();
        let mut out = Vec::with_capacity(views.len());
        let (mut text, mut tmp) = (Vec::new(), json_direct::Scratch::default());
        for v in views {
            let offset = h.base_offset + v.offset_delta as i64;
            let value = v.value.as_ref().map(|r| &d[r.start as usize..r.end as usize]).unwrap_or(&[]);
            if h.is_control() {
                let key = v.key.as_ref().map(|r| &d[r.start as usize..r.end as usize]);
                let (_, t) = batch::parse_control_key(key)
                    .map_err(|reason| Box::new(Failure::Corrupt(crate::error::Error::corrupt(pos, Some(h.base_offset), format!("record at offset {offset}: {reason}")))))?;
                if schema::control_schema(t).is_none() {
                    out.push(if json { Decoded::ControlJson(offset, t, None) } else { Decoded::Control(offset, t, None) });
                } else if json {
                    text.clear();
                    json_direct::control_json(t, value, &mut text, &mut tmp, |_, _, _| {}).map_err(|e| Box::new(Failure::Codec(e, offset)))?;
                    out.push(Decoded::ControlJson(offset, t, Some(utf8(&text))));
                } else {
                    let (_, cv, st) = schema::decode_control_record(t, value).map_err(|e| Box::new(Failure::Codec(e, offset)))?;
                    out.push(Decoded::Control(offset, t, Some((cv, st))));
                }
            } else if json {
                text.clear();
                let (m, ver) = json_direct::metadata_record_json(value, &mut text, &mut tmp).map_err(|e| Box::new(Failure::Codec(e, offset)))?;
                out.push(Decoded::DataJson(offset, m.api_key, ver, utf8(&text)));
            } else {
                let r = schema::decode_metadata_record(value).map_err(|e| Box::new(Failure::Codec(e, offset)))?;
                out.push(Decoded::Data(offset, r.schema, r.version, r.data));
            }
        }
        Ok(out)
    });
    let items = match res.map_err(|b| *b) {
        Ok(items) => items,
        Err(Failure::Corrupt(e)) => return Err(super::errors::to_pyerr(py, &e, file.as_deref())),
        Err(Failure::Codec(e, offset)) => {
            let err = codec_err(py, &e, Some(offset));
            if let Some(f) = file.as_deref() {
                let _ = err.value(py).setattr("file", f);
            }
            return Err(err);
        }
    };
    let l = PyList::empty(py);
    for it in items {
        match it {
            Decoded::Data(offset, m, v, st) => l.append((offset, m.api_key, v, struct_to_py(py, &st)?))?,
            Decoded::DataJson(offset, api_key, v, text) => l.append((offset, api_key, v, text))?,
            Decoded::Control(offset, t, st) => {
                let val: PyObject = match st {
                    Some((_, st)) => struct_to_py(py, &st)?.into_any().unbind(),
                    None => py.None(),
                };
                l.append((offset, py.None(), t, val))?;
            }
            Decoded::ControlJson(offset, t, text) => l.append((offset, py.None(), t, text))?,
        }
    }
    Ok(l)
}

// ---------------------------------------------------------------------------------------------
// Tables

fn versions_py(py: Python<'_>, v: Versions) -> PyResult<PyObject> {
    Ok(if v.is_none() { py.None() } else { PyTuple::new(py, [v.min, v.max])?.into_any().unbind() })
}

fn type_py<'py>(py: Python<'py>, t: &FieldType) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("kind", t.primitive_name())?;
    match t {
        FieldType::Array(e) => d.set_item("element", type_py(py, e)?)?,
        FieldType::Struct(s) => {
            d.set_item("name", s.name)?;
            d.set_item("fields", fields_py(py, s)?)?;
        }
        _ => {}
    }
    Ok(d)
}

fn default_py(py: Python<'_>, f: &Field) -> PyResult<PyObject> {
    Ok(match f.default {
        DefaultValue::Null => py.None(),
        DefaultValue::Int(i) => i.into_pyobject(py)?.into_any().unbind(),
        DefaultValue::Float(x) => PyFloat::new(py, x).into_any().unbind(),
        DefaultValue::Bool(b) => PyBool::new(py, b).to_owned().into_any().unbind(),
        DefaultValue::Str(s) => PyString::new(py, s).into_any().unbind(),
        DefaultValue::Zero => match &f.ty {
            // A struct of defaults; which fields it has depends on the version.
            FieldType::Struct(_) => PyDict::new(py).into_any().unbind(),
            _ => to_py(py, &codec::default_value(f, 0))?,
        },
    })
}

fn fields_py<'py>(py: Python<'py>, s: &StructSchema) -> PyResult<Bound<'py, PyList>> {
    let l = PyList::empty(py);
    for f in s.fields {
        let d = PyDict::new(py);
        d.set_item("name", f.name)?;
        d.set_item("json_name", f.json_name)?;
        d.set_item("type_name", f.type_name)?;
        d.set_item("type", type_py(py, &f.ty)?)?;
        d.set_item("versions", versions_py(py, f.versions)?)?;
        d.set_item("nullable_versions", versions_py(py, f.nullable_versions)?)?;
        d.set_item("tagged_versions", versions_py(py, f.tagged_versions)?)?;
        d.set_item("tag", f.tag)?;
        d.set_item("flexible_versions", match f.flexible_versions { Some(v) => versions_py(py, v)?, None => py.None() })?;
        d.set_item("default", default_py(py, f)?)?;
        d.set_item("ignorable", f.ignorable)?;
        l.append(d)?;
    }
    Ok(l)
}

pub(crate) fn message_py<'py>(py: Python<'py>, m: &MessageSchema) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("name", m.name)?;
    d.set_item("api_key", if m.api_key >= 0 { Some(m.api_key) } else { None })?;
    d.set_item("type_name", m.type_name)?;
    d.set_item("kind", m.kind)?;
    d.set_item("valid_versions", versions_py(py, m.valid_versions)?)?;
    d.set_item("flexible_versions", versions_py(py, m.flexible_versions)?)?;
    d.set_item("fields", fields_py(py, m.body)?)?;
    d.set_item("source", m.source)?;
    Ok(d)
}

/// The generated schema tables: {"metadata": [message], "control": [message + control_type, label]}.
/// Versions are (min, max) tuples (max 32767 for "N+") or None for "none".
#[pyfunction]
fn metadata_schema<'py>(py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let meta = PyList::empty(py);
    for m in schema::METADATA_RECORDS {
        meta.append(message_py(py, m)?)?;
    }
    let ctrl = PyList::empty(py);
    for c in schema::CONTROL_RECORDS {
        let md = message_py(py, c.schema)?;
        md.set_item("control_type", c.control_type)?;
        md.set_item("label", c.label)?;
        ctrl.append(md)?;
    }
    d.set_item("metadata", meta)?;
    d.set_item("control", ctrl)?;
    Ok(d)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(decode_metadata_record, m)?)?;
    m.add_function(wrap_pyfunction!(check_metadata_batches, m)?)?;
    m.add_function(wrap_pyfunction!(encode_metadata_record, m)?)?;
    m.add_function(wrap_pyfunction!(metadata_record_json, m)?)?;
    m.add_function(wrap_pyfunction!(decode_control_record, m)?)?;
    m.add_function(wrap_pyfunction!(encode_control_record, m)?)?;
    m.add_function(wrap_pyfunction!(control_record_json, m)?)?;
    m.add_function(wrap_pyfunction!(metadata_record_types, m)?)?;
    m.add_function(wrap_pyfunction!(decode_metadata_batch, m)?)?;
    m.add_function(wrap_pyfunction!(metadata_schema, m)?)?;
    Ok(())
}

/// Checks batches a client wants appended to the metadata log (see
/// `schema::check_metadata_batches`); returns the record count or raises CorruptRecordError.
#[pyfunction]
fn check_metadata_batches(py: Python<'_>, data: pyo3::buffer::PyBuffer<u8>) -> PyResult<usize> {
    let v = data.to_vec(py)?;
    py.allow_threads(|| schema::check_metadata_batches(&v)).map_err(CorruptRecordError::new_err)
}
