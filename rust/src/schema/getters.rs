//! Typed reads of a decoded record's fields (a [`Struct`] of the record's version), for code
//! that works on records by field name: a field the version lacks or a value of another type
//! is a [`FieldError`] worded as the Python image words it (`KeyError('Name')`,
//! `TypeError('Isr: expected a list')`); the codec never gives a wrong type.

use super::{Struct, Value};
use std::fmt;

/// A field a reader needs that the record lacks, or holds with another type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError(pub String);

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for FieldError {}

pub type FieldResult<T> = Result<T, FieldError>;

type Uuid = [u8; 16];

pub(crate) fn field<'a>(d: &'a Struct, name: &str) -> FieldResult<&'a Value> {
    d.get(name).ok_or_else(|| FieldError(format!("KeyError('{name}')")))
}

pub(crate) fn type_error(name: &str, want: &str) -> FieldError {
    FieldError(format!("TypeError('{name}: expected {want}')"))
}

pub(crate) fn as_int(v: &Value, name: &str) -> FieldResult<i64> {
    match v {
        Value::Int(i) => Ok(*i),
        _ => Err(type_error(name, "an integer")),
    }
}

pub(crate) fn int(d: &Struct, name: &str) -> FieldResult<i64> {
    as_int(field(d, name)?, name)
}

pub(crate) fn int_or(d: &Struct, name: &str, default: i64) -> FieldResult<i64> {
    d.get(name).map_or(Ok(default), |v| as_int(v, name))
}

pub(crate) fn boolean(d: &Struct, name: &str) -> FieldResult<bool> {
    match field(d, name)? {
        Value::Bool(b) => Ok(*b),
        _ => Err(type_error(name, "a bool")),
    }
}

pub(crate) fn bool_or(d: &Struct, name: &str, default: bool) -> FieldResult<bool> {
    match d.get(name) {
        None => Ok(default),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(type_error(name, "a bool")),
    }
}

pub(crate) fn string(d: &Struct, name: &str) -> FieldResult<String> {
    match field(d, name)? {
        Value::Str(s) => Ok(s.clone()),
        _ => Err(type_error(name, "a string")),
    }
}

pub(crate) fn nullable_string(d: &Struct, name: &str) -> FieldResult<Option<String>> {
    match field(d, name)? {
        Value::Str(s) => Ok(Some(s.clone())),
        Value::Null => Ok(None),
        _ => Err(type_error(name, "a string or None")),
    }
}

pub(crate) fn uuid(d: &Struct, name: &str) -> FieldResult<Uuid> {
    match field(d, name)? {
        Value::Uuid(u) => Ok(*u),
        _ => Err(type_error(name, "a uuid")),
    }
}

pub(crate) fn int_list(v: &Value, name: &str) -> FieldResult<Vec<i32>> {
    match v {
        Value::Array(items) => items
            .iter()
            .map(|x| match x {
                Value::Int(i) => i32::try_from(*i).map_err(|_| type_error(name, "int32 elements")),
                _ => Err(type_error(name, "int32 elements")),
            })
            .collect(),
        _ => Err(type_error(name, "a list")),
    }
}

pub(crate) fn uuid_list(v: &Value, name: &str) -> FieldResult<Vec<Uuid>> {
    match v {
        Value::Array(items) => items
            .iter()
            .map(|x| match x {
                Value::Uuid(u) => Ok(*u),
                _ => Err(type_error(name, "uuid elements")),
            })
            .collect(),
        _ => Err(type_error(name, "a list")),
    }
}

/// `d.get(name)` as an optional list: absent and null are both None.
pub(crate) fn opt_list<T>(d: &Struct, name: &str, conv: fn(&Value, &str) -> FieldResult<Vec<T>>) -> FieldResult<Option<Vec<T>>> {
    match d.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => conv(v, name).map(Some),
    }
}

/// A struct's fields without its unknown tagged fields (the Python image keeps only named keys).
pub(crate) fn fields_only(d: &Struct, names: &[&'static str]) -> FieldResult<Struct> {
    let mut out = Struct::default();
    for n in names {
        out.fields.push((*n, field(d, n)?.clone()));
    }
    Ok(out)
}

/// Endpoints and features are maps keyed by Name in Kafka (`mapKey`): order carries no
/// meaning, so the image keeps them sorted by name (stably).
pub(crate) fn by_name(v: &Value, name: &str) -> FieldResult<Vec<Struct>> {
    let Value::Array(items) = v else { return Err(type_error(name, "a list")) };
    let mut out = Vec::with_capacity(items.len());
    for it in items {
        match it {
            Value::Struct(s) => {
                if !matches!(s.get("Name"), Some(Value::Str(_))) {
                    return Err(FieldError("KeyError('Name')".into()));
                }
                out.push(s.clone());
            }
            _ => return Err(type_error(name, "structs")),
        }
    }
    out.sort_by(|a, b| name_of(a).cmp(name_of(b)));
    Ok(out)
}

fn name_of(s: &Struct) -> &str {
    match s.get("Name") {
        Some(Value::Str(n)) => n,
        _ => "",
    }
}
