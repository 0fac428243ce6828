//! One generic encoder/decoder for Kafka's message encoding, driven by the schema tables.
//!
//! Rules (Kafka's generated message code, KIP-482 for flexible versions): fields in schema order, each present only in
//! its `versions`; flexible versions use compact strings/bytes/arrays (unsigned varint n+1,
//! 0 = null) and end every struct with a tagged-field section (count, then tag/size/payload in
//! ascending tag order, only non-default known fields); non-flexible versions use int16 string
//! and int32 bytes/array lengths with -1 = null. Unknown tagged fields are kept raw and written
//! back, merged in tag order with the known ones.

use super::types::*;
use std::fmt;

mod decode;
mod encode;

pub use decode::{
    decode_message, fixed_width, read_body, read_field_value, read_struct, skip_field_value, skip_quick, skip_struct, skip_value, Reader,
};
#[cfg(test)]
pub use encode::write_value_for_test;
pub use encode::{encode_message, write_struct};

/// What went wrong, for mapping to exceptions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CodecErrorKind {
    /// The bytes end early.
    Truncated,
    /// The bytes are not a valid encoding.
    Corrupt,
    /// A record type or version this schema set does not have.
    Unsupported,
    /// Encoding: a value that cannot be written (wrong type, out of range, non-default field
    /// absent from the version, ...).
    Invalid,
}

/// A precise codec error: field path (`PartitionRecord.Replicas[2]`), byte position in the
/// value (decoding; None when encoding) and reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodecError {
    pub kind: CodecErrorKind,
    pub path: String,
    pub position: Option<usize>,
    pub reason: String,
}

impl CodecError {
    pub fn new(kind: CodecErrorKind, position: Option<usize>, reason: impl Into<String>) -> Self {
        CodecError { kind, path: String::new(), position, reason: reason.into() }
    }
    fn corrupt(pos: usize, reason: impl Into<String>) -> Self {
        Self::new(CodecErrorKind::Corrupt, Some(pos), reason)
    }
    fn truncated(pos: usize, reason: impl Into<String>) -> Self {
        Self::new(CodecErrorKind::Truncated, Some(pos), reason)
    }
    fn invalid(reason: impl Into<String>) -> Self {
        Self::new(CodecErrorKind::Invalid, None, reason)
    }
    /// Prepends a path segment (`Name`, or `[i]` for array elements).
    pub fn within(mut self, seg: &str) -> Self {
        if self.path.is_empty() {
            self.path = seg.to_string();
        } else if self.path.starts_with('[') {
            self.path = format!("{seg}{}", self.path);
        } else {
            self.path = format!("{seg}.{}", self.path);
        }
        self
    }
}

impl fmt::Display for CodecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.path.is_empty() {
            write!(f, "{}: ", self.path)?;
        }
        f.write_str(&self.reason)?;
        if let Some(p) = self.position {
            write!(f, " (byte position {p})")?;
        }
        Ok(())
    }
}

impl std::error::Error for CodecError {}

pub type CResult<T> = Result<T, CodecError>;

/// Longest string Kafka reads or writes (`0x7fff` bytes).
pub const MAX_STRING: usize = 0x7fff;

// ---------------------------------------------------------------------------------------------
// Defaults

/// The default value of `f` at version `v`.
pub fn default_value(f: &Field, v: i16) -> Value {
    match f.default {
        DefaultValue::Null => Value::Null,
        DefaultValue::Int(i) => Value::Int(i),
        DefaultValue::Float(x) => Value::Float(x),
        DefaultValue::Bool(b) => Value::Bool(b),
        DefaultValue::Str(s) => Value::Str(s.to_string()),
        DefaultValue::Zero => zero_value(&f.ty, v),
    }
}

fn zero_value(t: &FieldType, v: i16) -> Value {
    match t {
        FieldType::Bool => Value::Bool(false),
        FieldType::Float64 => Value::Float(0.0),
        FieldType::String => Value::Str(String::new()),
        FieldType::Bytes | FieldType::Records => Value::Bytes(Vec::new()),
        FieldType::Uuid => Value::Uuid([0; 16]),
        FieldType::Array(_) => Value::Array(Vec::new()),
        FieldType::Struct(s) => Value::Struct(default_struct(s, v)),
        _ => Value::Int(0),
    }
}

/// A struct whose fields (those present at `v`) all hold their defaults.
pub fn default_struct(s: &StructSchema, v: i16) -> Struct {
    Struct { fields: s.fields.iter().filter(|f| f.versions.contains(v)).map(|f| (f.name, default_value(f, v))).collect(), unknown_tags: Vec::new() }
}

/// Whether `val` equals the default of `f` (Java's `!=`/`equals` semantics: -0.0 == 0.0).
pub fn is_default(f: &Field, val: &Value, v: i16) -> bool {
    match (f.default, val) {
        (DefaultValue::Null, Value::Null) => true,
        (DefaultValue::Null, _) | (_, Value::Null) => false,
        (DefaultValue::Int(i), Value::Int(x)) => i == *x,
        (DefaultValue::Float(d), Value::Float(x)) => d == *x,
        (DefaultValue::Float(d), Value::Int(x)) => d == *x as f64,
        (DefaultValue::Bool(b), Value::Bool(x)) => b == *x,
        (DefaultValue::Str(s), Value::Str(x)) => s == x,
        (DefaultValue::Zero, val) => is_zero(&f.ty, val, v),
        _ => false,
    }
}

fn is_zero(t: &FieldType, val: &Value, v: i16) -> bool {
    match (t, val) {
        (FieldType::Struct(s), Value::Struct(st)) => {
            st.unknown_tags.is_empty()
                && s.fields.iter().filter(|f| f.versions.contains(v)).all(|f| st.get(f.name).is_none_or(|x| is_default(f, x, v)))
        }
        (_, Value::Float(x)) => *x == 0.0,
        (_, Value::Int(x)) => *x == 0,
        (_, val) => *val == zero_value(t, v),
    }
}

/// Whether field `f` uses the compact (flexible) encoding at version `v`.
#[inline]
fn compact(f: &Field, flexible: bool, v: i16) -> bool {
    match f.flexible_versions {
        Some(fv) => fv.contains(v),
        None => flexible,
    }
}
