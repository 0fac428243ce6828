//! Decoding: the [`Reader`] over a value's bytes, struct and value reads, and the skips that
//! walk past a value without building it.

use super::{compact, default_value, CResult, CodecError, CodecErrorKind, MAX_STRING};
use crate::schema::types::*;
use crate::varint::read_uvarint;

pub struct Reader<'a> {
    pub b: &'a [u8],
    pub pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(b: &'a [u8]) -> Self {
        Reader { b, pos: 0 }
    }
    #[inline]
    pub fn remaining(&self) -> usize {
        self.b.len() - self.pos
    }
    #[inline]
    pub fn take(&mut self, n: usize, what: &str) -> CResult<&'a [u8]> {
        if self.remaining() < n {
            return Err(CodecError::truncated(self.pos, format!("{what} needs {n} bytes but only {} remain", self.remaining())));
        }
        let s = &self.b[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    #[inline]
    fn fixed<const N: usize>(&mut self, what: &str) -> CResult<[u8; N]> {
        Ok(self.take(N, what)?.try_into().unwrap())
    }
    pub fn uvarint(&mut self, what: &str) -> CResult<u32> {
        let start = self.pos;
        let mut p = self.pos;
        match read_uvarint(self.b, &mut p) {
            Some(v) => {
                self.pos = p;
                Ok(v)
            }
            None if p >= self.b.len() && self.b[start..].iter().all(|b| b & 0x80 != 0) && self.b.len() - start < 5 => {
                Err(CodecError::truncated(start, format!("truncated unsigned varint ({what})")))
            }
            None => Err(CodecError::corrupt(start, format!("invalid unsigned varint ({what}): more than 32 bits"))),
        }
    }
}

/// Decodes a struct body at version `v`.
pub fn read_struct(r: &mut Reader, s: &'static StructSchema, v: i16, flexible: bool) -> CResult<Struct> {
    let mut fields: Vec<(&'static str, Value)> = Vec::with_capacity(s.fields.len());
    for f in s.fields {
        if !f.versions.contains(v) {
            continue;
        }
        if flexible && f.tagged_versions.contains(v) {
            fields.push((f.name, default_value(f, v)));
            continue;
        }
        let nullable = f.nullable_versions.contains(v);
        let val = read_value(r, &f.ty, v, flexible, compact(f, flexible, v), nullable).map_err(|e| e.within(f.name))?;
        fields.push((f.name, val));
    }
    let mut unknown_tags = Vec::new();
    if flexible {
        let start = r.pos;
        let n = r.uvarint("tagged field count")?;
        if n as usize > r.remaining() {
            return Err(CodecError::corrupt(start, format!("tagged field count {n} exceeds the {} remaining bytes", r.remaining())));
        }
        for _ in 0..n {
            let tpos = r.pos;
            let tag = r.uvarint("tag")?;
            let size = r.uvarint("tagged field size")? as usize;
            if size > r.remaining() {
                return Err(CodecError::truncated(r.pos, format!("tagged field {tag} of {size} bytes runs past the end ({} remain)", r.remaining())));
            }
            let known = s.fields.iter().position(|f| f.tag == Some(tag) && f.versions.contains(v) && f.tagged_versions.contains(v));
            match known {
                Some(i) => {
                    let f = &s.fields[i];
                    let end = r.pos + size;
                    let mut sub = Reader { b: &r.b[..end], pos: r.pos };
                    let nullable = f.nullable_versions.contains(v);
                    let val = read_value(&mut sub, &f.ty, v, flexible, true, nullable).map_err(|e| e.within(f.name))?;
                    if sub.pos != end {
                        return Err(CodecError::corrupt(tpos, format!("tagged field {tag} declares {size} bytes but its value took {}", sub.pos - r.pos)).within(f.name));
                    }
                    r.pos = end;
                    if let Some(slot) = fields.iter_mut().find(|(n, _)| *n == f.name) {
                        slot.1 = val;
                    }
                }
                None => {
                    let data = r.take(size, "tagged field")?.to_vec();
                    unknown_tags.push((tag, data));
                }
            }
        }
    }
    Ok(Struct { fields, unknown_tags })
}

fn read_len(r: &mut Reader, compact: bool, wide: bool, what: &str) -> CResult<Option<usize>> {
    let start = r.pos;
    if compact {
        let n = r.uvarint(what)?;
        Ok(if n == 0 { None } else { Some((n - 1) as usize) })
    } else if wide {
        let n = i32::from_be_bytes(r.fixed::<4>(what)?);
        if n < -1 {
            return Err(CodecError::corrupt(start, format!("invalid {what} {n}")));
        }
        Ok(if n < 0 { None } else { Some(n as usize) })
    } else {
        let n = i16::from_be_bytes(r.fixed::<2>(what)?);
        if n < -1 {
            return Err(CodecError::corrupt(start, format!("invalid {what} {n}")));
        }
        Ok(if n < 0 { None } else { Some(n as usize) })
    }
}

fn null_check(pos: usize, nullable: bool) -> CResult<Value> {
    if nullable {
        Ok(Value::Null)
    } else {
        Err(CodecError::corrupt(pos, "non-nullable field was serialized as null"))
    }
}

fn read_value(r: &mut Reader, t: &FieldType, v: i16, flexible: bool, compact: bool, nullable: bool) -> CResult<Value> {
    Ok(match t {
        FieldType::Bool => Value::Bool(r.fixed::<1>("bool")?[0] != 0),
        FieldType::Int8 => Value::Int(r.fixed::<1>("int8")?[0] as i8 as i64),
        FieldType::Int16 => Value::Int(i16::from_be_bytes(r.fixed("int16")?) as i64),
        FieldType::Uint16 => Value::Int(u16::from_be_bytes(r.fixed("uint16")?) as i64),
        FieldType::Int32 => Value::Int(i32::from_be_bytes(r.fixed("int32")?) as i64),
        FieldType::Uint32 => Value::Int(u32::from_be_bytes(r.fixed("uint32")?) as i64),
        FieldType::Int64 => Value::Int(i64::from_be_bytes(r.fixed("int64")?)),
        FieldType::Float64 => Value::Float(f64::from_be_bytes(r.fixed("float64")?)),
        FieldType::Uuid => Value::Uuid(r.fixed("uuid")?),
        FieldType::String => {
            let start = r.pos;
            match read_len(r, compact, false, "string length")? {
                None => null_check(start, nullable)?,
                Some(n) => {
                    if n > MAX_STRING {
                        return Err(CodecError::corrupt(start, format!("string length {n} exceeds {MAX_STRING}")));
                    }
                    let b = r.take(n, "string")?;
                    Value::Str(match std::str::from_utf8(b) {
                        Ok(s) => s.to_string(),
                        Err(_) => {
                            let mut out = Vec::with_capacity(n + 8);
                            crate::java_utf8::lossy(&mut out, b);
                            String::from_utf8(out).unwrap_or_default()
                        }
                    })
                }
            }
        }
        FieldType::Bytes | FieldType::Records => {
            let start = r.pos;
            match read_len(r, compact, true, "bytes length")? {
                None => null_check(start, nullable)?,
                Some(n) => Value::Bytes(r.take(n, "bytes")?.to_vec()),
            }
        }
        FieldType::Array(elem) => {
            let start = r.pos;
            match read_len(r, compact, true, "array length")? {
                None => null_check(start, nullable)?,
                Some(n) => {
                    if n > r.remaining() {
                        return Err(CodecError::corrupt(start, format!("array of {n} elements cannot fit in the {} remaining bytes", r.remaining())));
                    }
                    let mut items = Vec::with_capacity(n);
                    for i in 0..n {
                        let item = read_value(r, elem, v, flexible, compact, false).map_err(|e| e.within(&format!("[{i}]")))?;
                        items.push(item);
                    }
                    Value::Array(items)
                }
            }
        }
        FieldType::Struct(s) => {
            if nullable && (r.fixed::<1>("nullable struct marker")?[0] as i8) < 0 {
                return Ok(Value::Null);
            }
            Value::Struct(read_struct(r, s, v, flexible)?)
        }
    })
}

/// The encoded size of a fixed-width type (None for strings, bytes, arrays, structs).
#[inline]
pub fn fixed_width(t: &FieldType) -> Option<usize> {
    match t {
        FieldType::Bool | FieldType::Int8 => Some(1),
        FieldType::Int16 | FieldType::Uint16 => Some(2),
        FieldType::Int32 | FieldType::Uint32 => Some(4),
        FieldType::Int64 | FieldType::Float64 => Some(8),
        FieldType::Uuid => Some(16),
        _ => None,
    }
}

/// Advances `r` over one value of type `t` without building it (the layout walk of
/// [`read_value`]: same checks on lengths, no allocation).
pub fn skip_value(r: &mut Reader, t: &FieldType, v: i16, flexible: bool, compact: bool, nullable: bool) -> CResult<()> {
    let fixed = match t {
        FieldType::Bool | FieldType::Int8 => 1,
        FieldType::Int16 | FieldType::Uint16 => 2,
        FieldType::Int32 | FieldType::Uint32 => 4,
        FieldType::Int64 | FieldType::Float64 => 8,
        FieldType::Uuid => 16,
        FieldType::String | FieldType::Bytes | FieldType::Records => {
            let start = r.pos;
            let wide = !matches!(t, FieldType::String);
            match read_len(r, compact, wide, "length")? {
                None => {
                    null_check(start, nullable)?;
                }
                Some(n) => {
                    r.take(n, t.primitive_name())?;
                }
            }
            return Ok(());
        }
        FieldType::Array(elem) => {
            let start = r.pos;
            match read_len(r, compact, true, "array length")? {
                None => {
                    null_check(start, nullable)?;
                }
                Some(n) => {
                    if n > r.remaining() {
                        return Err(CodecError::corrupt(start, format!("array of {n} elements cannot fit in the {} remaining bytes", r.remaining())));
                    }
                    if let Some(w) = fixed_width(elem) {
                        r.take(n * w, "array elements")?;
                        return Ok(());
                    }
                    for i in 0..n {
                        skip_value(r, elem, v, flexible, compact, false).map_err(|e| e.within(&format!("[{i}]")))?;
                    }
                }
            }
            return Ok(());
        }
        FieldType::Struct(s) => {
            if nullable && (r.fixed::<1>("nullable struct marker")?[0] as i8) < 0 {
                return Ok(());
            }
            return skip_struct(r, s, v, flexible);
        }
    };
    r.take(fixed, t.primitive_name())?;
    Ok(())
}

/// Advances `r` over a struct body at version `v` (fields, then the tagged-field section).
pub fn skip_struct(r: &mut Reader, s: &'static StructSchema, v: i16, flexible: bool) -> CResult<()> {
    for f in s.fields {
        if !f.versions.contains(v) || (flexible && f.tagged_versions.contains(v)) {
            continue;
        }
        let nullable = f.nullable_versions.contains(v);
        skip_value(r, &f.ty, v, flexible, compact(f, flexible, v), nullable).map_err(|e| e.within(f.name))?;
    }
    if flexible {
        let n = r.uvarint("tagged field count")?;
        for _ in 0..n {
            r.uvarint("tag")?;
            let size = r.uvarint("tagged field size")? as usize;
            r.take(size, "tagged field")?;
        }
    }
    Ok(())
}

/// The layout walk of [`skip_value`] with no error detail: `None` on any problem (callers
/// rerun [`skip_value`] to learn what and where). Lean on purpose: it runs once per field of
/// every record a rewrite splices.
#[inline]
pub fn skip_quick(b: &[u8], pos: &mut usize, t: &FieldType, v: i16, compact: bool, nullable: bool) -> Option<()> {
    #[inline]
    fn uvar(b: &[u8], pos: &mut usize) -> Option<u32> {
        read_uvarint(b, pos)
    }
    #[inline]
    fn take(b: &[u8], pos: &mut usize, n: usize) -> Option<()> {
        let end = pos.checked_add(n)?;
        if end > b.len() {
            return None;
        }
        *pos = end;
        Some(())
    }
    #[inline]
    fn len(b: &[u8], pos: &mut usize, compact: bool, wide: bool, nullable: bool) -> Option<Option<usize>> {
        let n: i64 = if compact {
            uvar(b, pos)? as i64 - 1
        } else if wide {
            let s = b.get(*pos..*pos + 4)?;
            *pos += 4;
            i32::from_be_bytes([s[0], s[1], s[2], s[3]]) as i64
        } else {
            let s = b.get(*pos..*pos + 2)?;
            *pos += 2;
            i16::from_be_bytes([s[0], s[1]]) as i64
        };
        match n {
            -1 if nullable => Some(None),
            n if n >= 0 => Some(Some(n as usize)),
            _ => None,
        }
    }
    if let Some(w) = fixed_width(t) {
        return take(b, pos, w);
    }
    match t {
        FieldType::String | FieldType::Bytes | FieldType::Records => {
            let wide = !matches!(t, FieldType::String);
            match len(b, pos, compact, wide, nullable)? {
                None => Some(()),
                Some(n) if matches!(t, FieldType::String) && n > MAX_STRING => None,
                Some(n) => take(b, pos, n),
            }
        }
        FieldType::Array(elem) => match len(b, pos, compact, true, nullable)? {
            None => Some(()),
            Some(n) => {
                if let Some(w) = fixed_width(elem) {
                    return take(b, pos, n.checked_mul(w)?);
                }
                if n > b.len() - *pos {
                    return None;
                }
                for _ in 0..n {
                    skip_quick(b, pos, elem, v, compact, false)?;
                }
                Some(())
            }
        },
        FieldType::Struct(s) => {
            if nullable {
                let m = *b.get(*pos)? as i8;
                *pos += 1;
                if m < 0 {
                    return Some(());
                }
            }
            for f in s.fields {
                if !f.versions.contains(v) || (compact && f.tagged_versions.contains(v)) {
                    continue;
                }
                let c = match f.flexible_versions {
                    Some(fv) => fv.contains(v),
                    None => compact,
                };
                skip_quick(b, pos, &f.ty, v, c, f.nullable_versions.contains(v))?;
            }
            if compact {
                let n = uvar(b, pos)?;
                for _ in 0..n {
                    uvar(b, pos)?;
                    let size = uvar(b, pos)? as usize;
                    take(b, pos, size)?;
                }
            }
            Some(())
        }
        _ => None,
    }
}

/// Reads one value of field `f` at version `v` (for callers that walk a struct themselves).
pub fn read_field_value(r: &mut Reader, f: &Field, v: i16, flexible: bool, in_tag: bool) -> CResult<Value> {
    let nullable = f.nullable_versions.contains(v);
    read_value(r, &f.ty, v, flexible, in_tag || compact(f, flexible, v), nullable).map_err(|e| e.within(f.name))
}

/// Skips one non-tagged value of field `f` at version `v`.
pub fn skip_field_value(r: &mut Reader, f: &Field, v: i16, flexible: bool) -> CResult<()> {
    let nullable = f.nullable_versions.contains(v);
    skip_value(r, &f.ty, v, flexible, compact(f, flexible, v), nullable).map_err(|e| e.within(f.name))
}

/// Decodes a whole message body at version `v`; trailing bytes are an error.
pub fn decode_message(m: &'static MessageSchema, v: i16, b: &[u8]) -> CResult<Struct> {
    let mut r = Reader::new(b);
    let st = read_body(&mut r, m, v)?;
    if r.remaining() > 0 {
        return Err(CodecError::corrupt(r.pos, format!("Found {} byte(s) of garbage after {}", r.remaining(), m.name)).within(m.name));
    }
    Ok(st)
}

pub fn read_body(r: &mut Reader, m: &'static MessageSchema, v: i16) -> CResult<Struct> {
    if !m.valid_versions.contains(v) {
        return Err(CodecError::new(CodecErrorKind::Unsupported, Some(r.pos), format!("Can't read version {v} of {}", m.name)).within(m.name));
    }
    read_struct(r, m.body, v, m.flexible_versions.contains(v)).map_err(|e| e.within(m.name))
}
