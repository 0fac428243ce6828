//! Encoding: struct and value writes, unknown tagged fields merged in tag order.

use super::{compact, default_value, is_default, CResult, CodecError, CodecErrorKind, MAX_STRING};
use crate::schema::types::*;
use crate::varint::write_uvarint;


/// Encodes one value of field `f` at version `v` as it appears in a flexible struct body (tests).
#[cfg(test)]
pub fn write_value_for_test(out: &mut Vec<u8>, f: &Field, v: i16, val: &Value) -> CResult<()> {
    let nullable = f.nullable_versions.contains(v);
    write_value(out, &f.ty, v, true, compact(f, true, v), nullable, val)
}

fn write_len(out: &mut Vec<u8>, len: Option<usize>, compact: bool, wide: bool) {
    if compact {
        write_uvarint(out, len.map_or(0, |n| n as u32 + 1));
    } else if wide {
        out.extend_from_slice(&len.map_or(-1, |n| n as i32).to_be_bytes());
    } else {
        out.extend_from_slice(&len.map_or(-1, |n| n as i16).to_be_bytes());
    }
}

fn type_err(t: &FieldType, val: &Value) -> CodecError {
    let got = match val {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Int(_) => "int",
        Value::Float(_) => "float",
        Value::Str(_) => "string",
        Value::Bytes(_) => "bytes",
        Value::Uuid(_) => "uuid",
        Value::Array(_) => "array",
        Value::Struct(_) => "struct",
    };
    CodecError::invalid(format!("expected a {} value, got {got}", t.kafka_name()))
}

/// Encodes a struct body at version `v`.
pub fn write_struct(out: &mut Vec<u8>, s: &'static StructSchema, v: i16, flexible: bool, st: &Struct) -> CResult<()> {
    for (name, _) in &st.fields {
        if !s.fields.iter().any(|f| f.name == *name) {
            return Err(CodecError::invalid(format!("{} has no field {name:?}", s.name)));
        }
    }
    let mut tagged: Vec<(u32, Vec<u8>)> = Vec::new();
    for f in s.fields {
        let given = st.get(f.name);
        if !f.versions.contains(v) {
            if let Some(val) = given {
                if !f.ignorable && !is_default(f, val, v) {
                    return Err(CodecError::invalid(format!("Attempted to write a non-default {} at version {v}", f.name)));
                }
            }
            continue;
        }
        let dflt;
        let val = match given {
            Some(val) => val,
            None => {
                dflt = default_value(f, v);
                &dflt
            }
        };
        let nullable = f.nullable_versions.contains(v);
        if flexible && f.tagged_versions.contains(v) {
            if !is_default(f, val, v) {
                let mut payload = Vec::new();
                write_value(&mut payload, &f.ty, v, flexible, true, nullable, val).map_err(|e| e.within(f.name))?;
                tagged.push((f.tag.unwrap_or(0), payload));
            }
            continue;
        }
        write_value(out, &f.ty, v, flexible, compact(f, flexible, v), nullable, val).map_err(|e| e.within(f.name))?;
    }
    if !flexible {
        if !st.unknown_tags.is_empty() {
            return Err(CodecError::invalid(format!("Tagged fields were set, but version {v} of this message does not support them.")));
        }
        return Ok(());
    }
    for (tag, data) in &st.unknown_tags {
        if let Some(f) = s.fields.iter().find(|f| f.tag == Some(*tag) && f.versions.contains(v) && f.tagged_versions.contains(v)) {
            return Err(CodecError::invalid(format!("unknown tagged field {tag} collides with known tagged field {}", f.name)));
        }
        tagged.push((*tag, data.clone()));
    }
    tagged.sort_by_key(|(t, _)| *t);
    for w in tagged.windows(2) {
        if w[0].0 == w[1].0 {
            return Err(CodecError::invalid(format!("tagged field {} given twice", w[0].0)));
        }
    }
    write_uvarint(out, tagged.len() as u32);
    for (tag, data) in tagged {
        if data.len() > u32::MAX as usize {
            return Err(CodecError::invalid(format!("tagged field {tag} is too large")));
        }
        write_uvarint(out, tag);
        write_uvarint(out, data.len() as u32);
        out.extend_from_slice(&data);
    }
    Ok(())
}

fn write_value(out: &mut Vec<u8>, t: &FieldType, v: i16, flexible: bool, compact: bool, nullable: bool, val: &Value) -> CResult<()> {
    if let Value::Null = val {
        if !nullable {
            return Err(CodecError::invalid("null given for a non-nullable field"));
        }
        match t {
            FieldType::String => write_len(out, None, compact, false),
            FieldType::Bytes | FieldType::Records | FieldType::Array(_) => write_len(out, None, compact, true),
            FieldType::Struct(_) => out.push(0xff),
            _ => return Err(CodecError::invalid(format!("{} cannot be null", t.kafka_name()))),
        }
        return Ok(());
    }
    if let Some((lo, hi)) = t.int_range() {
        let Value::Int(x) = *val else { return Err(type_err(t, val)) };
        if x < lo || x > hi {
            return Err(CodecError::invalid(format!("{x} is out of range for {}", t.kafka_name())));
        }
        match t {
            FieldType::Int8 => out.push(x as i8 as u8),
            FieldType::Int16 => out.extend_from_slice(&(x as i16).to_be_bytes()),
            FieldType::Uint16 => out.extend_from_slice(&(x as u16).to_be_bytes()),
            FieldType::Int32 => out.extend_from_slice(&(x as i32).to_be_bytes()),
            FieldType::Uint32 => out.extend_from_slice(&(x as u32).to_be_bytes()),
            _ => out.extend_from_slice(&x.to_be_bytes()),
        }
        return Ok(());
    }
    match (t, val) {
        (FieldType::Bool, Value::Bool(b)) => out.push(*b as u8),
        (FieldType::Float64, Value::Float(x)) => out.extend_from_slice(&x.to_be_bytes()),
        (FieldType::Float64, Value::Int(x)) => out.extend_from_slice(&(*x as f64).to_be_bytes()),
        (FieldType::Uuid, Value::Uuid(u)) => out.extend_from_slice(u),
        (FieldType::String, Value::Str(s)) => {
            if s.len() > MAX_STRING {
                return Err(CodecError::invalid(format!("string of {} bytes is too long to be serialized (max {MAX_STRING})", s.len())));
            }
            write_len(out, Some(s.len()), compact, false);
            out.extend_from_slice(s.as_bytes());
        }
        (FieldType::Bytes | FieldType::Records, Value::Bytes(b)) => {
            if b.len() > i32::MAX as usize - 1 {
                return Err(CodecError::invalid("bytes value is too long to be serialized"));
            }
            write_len(out, Some(b.len()), compact, true);
            out.extend_from_slice(b);
        }
        (FieldType::Array(elem), Value::Array(items)) => {
            if items.len() > i32::MAX as usize - 1 {
                return Err(CodecError::invalid("array is too long to be serialized"));
            }
            write_len(out, Some(items.len()), compact, true);
            for (i, item) in items.iter().enumerate() {
                write_value(out, elem, v, flexible, compact, false, item).map_err(|e| e.within(&format!("[{i}]")))?;
            }
        }
        (FieldType::Struct(s), Value::Struct(st)) => {
            if nullable {
                out.push(1);
            }
            write_struct(out, s, v, flexible, st)?;
        }
        _ => return Err(type_err(t, val)),
    }
    Ok(())
}

/// Encodes a whole message body at version `v`.
pub fn encode_message(m: &'static MessageSchema, v: i16, st: &Struct, out: &mut Vec<u8>) -> CResult<()> {
    if !m.valid_versions.contains(v) {
        return Err(CodecError::new(CodecErrorKind::Unsupported, None, format!("Can't write version {v} of {}", m.name)).within(m.name));
    }
    write_struct(out, m.body, v, m.flexible_versions.contains(v), st).map_err(|e| e.within(m.name))
}
