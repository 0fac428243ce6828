//! JSON text straight from a record's bytes: the text [`super::json`] prints for the decoded
//! record (kafka-dump-log --cluster-metadata-decoder's), without building the value tree.
//!
//! The walk follows [`super::codec`]'s decoder rule for rule (lengths, nulls, the 0x7fff string
//! limit, an array's count against the bytes left, the tagged-field section, trailing bytes)
//! and writes each value as it is read. Tagged fields sit at the end of a struct's bytes but
//! print in schema order, only when not default: their text is written after the struct's
//! other fields and the struct's text is put back in schema order when one of them prints.
//!
//! When the walk meets anything it does not accept, it gives up ([`Refused`]) and the public
//! functions decode the record with the tree decoder instead, so errors (kind, field path,
//! byte position, reason) are the decoder's own, word for word. Output is bounded by the
//! input: every value either consumes bytes or, for an array, is counted against the bytes
//! left (as the decoder does), so a record claiming huge arrays is refused, not allocated.

use super::codec::{self, is_default, CResult, Reader, MAX_STRING};
use super::json;
use super::types::*;
use super::{control_schema, metadata_schema, ControlSchema, FRAME_VERSION};
use crate::varint::read_uvarint;
use base64::Engine;

/// The direct walk gave up; the tree decoder says why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refused;

type R<T> = Result<T, Refused>;

/// The writer's working room, kept from record to record so that the walk allocates nothing
/// once warm: where each field's text sits in a struct being written (a stack, a frame per
/// struct level), and room to put a struct's fields back in schema order.
#[derive(Default)]
pub struct Scratch {
    spans: Vec<(u32, u32)>,
    tmp: Vec<u8>,
}

struct Rd<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> Rd<'a> {
    #[inline]
    fn remaining(&self) -> usize {
        self.b.len() - self.pos
    }
    #[inline]
    fn take(&mut self, n: usize) -> R<&'a [u8]> {
        if self.remaining() < n {
            return Err(Refused);
        }
        let s = &self.b[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    #[inline]
    fn fixed<const N: usize>(&mut self) -> R<[u8; N]> {
        Ok(self.take(N)?.try_into().unwrap())
    }
    #[inline]
    fn uvar(&mut self) -> R<u32> {
        read_uvarint(self.b, &mut self.pos).ok_or(Refused)
    }
    /// A length as [`codec`]'s decoder reads it: None for null.
    #[inline]
    fn len(&mut self, compact: bool, wide: bool) -> R<Option<usize>> {
        if compact {
            let n = self.uvar()?;
            Ok(if n == 0 { None } else { Some((n - 1) as usize) })
        } else if wide {
            let n = i32::from_be_bytes(self.fixed::<4>()?);
            if n < -1 {
                return Err(Refused);
            }
            Ok(if n < 0 { None } else { Some(n as usize) })
        } else {
            let n = i16::from_be_bytes(self.fixed::<2>()?);
            if n < -1 {
                return Err(Refused);
            }
            Ok(if n < 0 { None } else { Some(n as usize) })
        }
    }
}

#[inline]
fn compact(f: &Field, flexible: bool, v: i16) -> bool {
    match f.flexible_versions {
        Some(fv) => fv.contains(v),
        None => flexible,
    }
}

#[inline]
fn int(out: &mut Vec<u8>, i: impl itoa::Integer) {
    out.extend_from_slice(itoa::Buffer::new().format(i).as_bytes());
}

/// A JSON string as [`json::push_string`] writes it (Jackson's escapes), from UTF-8 bytes.
fn string(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'"');
    let mut run = 0;
    for (i, &c) in s.iter().enumerate() {
        if c >= 0x20 && c != b'"' && c != b'\\' {
            continue;
        }
        out.extend_from_slice(&s[run..i]);
        match c {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            0x08 => out.extend_from_slice(b"\\b"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\n' => out.extend_from_slice(b"\\n"),
            0x0c => out.extend_from_slice(b"\\f"),
            b'\r' => out.extend_from_slice(b"\\r"),
            c => {
                const HEX: &[u8; 16] = b"0123456789ABCDEF";
                out.extend_from_slice(b"\\u00");
                out.push(HEX[(c >> 4) as usize]);
                out.push(HEX[(c & 15) as usize]);
            }
        }
        run = i + 1;
    }
    out.extend_from_slice(&s[run..]);
    out.push(b'"');
}

fn base64_into(out: &mut Vec<u8>, b: &[u8], engine: &base64::engine::GeneralPurpose, pad: bool) {
    let Some(n) = base64::encoded_len(b.len(), pad) else { return };
    let start = out.len();
    out.resize(start + n, 0);
    let written = engine.encode_slice(b, &mut out[start..]).unwrap_or(0);
    out.truncate(start + written);
}

/// Whether a field name prints as it is in JSON, with no escapes: every name of the generated
/// tables does (the test `field_names_are_plain` walks them all), so keys are written as they
/// are, where [`json::push_string`] would find nothing to escape.
#[cfg(test)]
fn plain(name: &str) -> bool {
    name.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

#[inline]
fn key(out: &mut Vec<u8>, first: &mut bool, name: &str) {
    if !*first {
        out.push(b',');
    }
    *first = false;
    out.push(b'"');
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b"\":");
}

/// URL-safe base64 without padding of a uuid's 16 bytes (Kafka's `Uuid.toString`): 22
/// characters, what `URL_SAFE_NO_PAD` gives, without the engine's general path.
#[inline]
fn uuid(out: &mut Vec<u8>, u: &[u8]) {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut s = [0u8; 24];
    s[0] = b'"';
    for i in 0..5 {
        let n = (u[3 * i] as u32) << 16 | (u[3 * i + 1] as u32) << 8 | u[3 * i + 2] as u32;
        s[1 + 4 * i] = A[(n >> 18) as usize & 63];
        s[2 + 4 * i] = A[(n >> 12) as usize & 63];
        s[3 + 4 * i] = A[(n >> 6) as usize & 63];
        s[4 + 4 * i] = A[n as usize & 63];
    }
    s[21] = A[(u[15] >> 2) as usize];
    s[22] = A[((u[15] & 3) << 4) as usize];
    s[23] = b'"';
    out.extend_from_slice(&s);
}

/// Writes one value of type `t` (the decoder's `read_value`).
#[allow(clippy::too_many_arguments)]
fn value(r: &mut Rd, t: &FieldType, v: i16, flexible: bool, compact: bool, nullable: bool, out: &mut Vec<u8>, cx: &mut Scratch) -> R<()> {
    match t {
        FieldType::Bool => out.extend_from_slice(if r.fixed::<1>()?[0] != 0 { b"true" } else { b"false" }),
        FieldType::Int8 => int(out, r.fixed::<1>()?[0] as i8),
        FieldType::Int16 => int(out, i16::from_be_bytes(r.fixed()?)),
        FieldType::Uint16 => int(out, u16::from_be_bytes(r.fixed()?)),
        FieldType::Int32 => int(out, i32::from_be_bytes(r.fixed()?)),
        FieldType::Uint32 => int(out, u32::from_be_bytes(r.fixed()?)),
        FieldType::Int64 => int(out, i64::from_be_bytes(r.fixed()?)),
        FieldType::Float64 => out.extend_from_slice(json::java_double(f64::from_be_bytes(r.fixed()?)).as_bytes()),
        FieldType::Uuid => uuid(out, r.take(16)?),
        FieldType::String => match r.len(compact, false)? {
            None if nullable => out.extend_from_slice(b"null"),
            None => return Err(Refused),
            Some(n) => {
                if n > MAX_STRING {
                    return Err(Refused);
                }
                let b = r.take(n)?;
                if std::str::from_utf8(b).is_ok() {
                    string(out, b);
                } else {
                    let mut fixed = Vec::with_capacity(n + 8);
                    crate::java_utf8::lossy(&mut fixed, b);
                    // what the decoder keeps of it (a String made from the lossy bytes)
                    let s = String::from_utf8(fixed).unwrap_or_default();
                    string(out, s.as_bytes());
                }
            }
        },
        FieldType::Bytes | FieldType::Records => match r.len(compact, true)? {
            None if nullable => out.extend_from_slice(b"null"),
            None => return Err(Refused),
            Some(n) => {
                let b = r.take(n)?;
                out.push(b'"');
                base64_into(out, b, &base64::engine::general_purpose::STANDARD, true);
                out.push(b'"');
            }
        },
        FieldType::Array(elem) => match r.len(compact, true)? {
            None if nullable => out.extend_from_slice(b"null"),
            None => return Err(Refused),
            Some(n) => {
                if n > r.remaining() {
                    return Err(Refused);
                }
                out.push(b'[');
                // the common arrays (replicas, ISR; directories) without a call per element
                if let FieldType::Int32 | FieldType::Uuid = elem {
                    let w = if let FieldType::Int32 = elem { 4 } else { 16 };
                    let items = r.take(n.checked_mul(w).ok_or(Refused)?)?;
                    for (i, x) in items.chunks_exact(w).enumerate() {
                        if i > 0 {
                            out.push(b',');
                        }
                        if w == 4 {
                            int(out, i32::from_be_bytes([x[0], x[1], x[2], x[3]]));
                        } else {
                            uuid(out, x);
                        }
                    }
                    out.push(b']');
                    return Ok(());
                }
                for i in 0..n {
                    if i > 0 {
                        out.push(b',');
                    }
                    value(r, elem, v, flexible, compact, false, out, cx)?;
                }
                out.push(b']');
            }
        },
        FieldType::Struct(s) => {
            if nullable && (r.fixed::<1>()?[0] as i8) < 0 {
                out.extend_from_slice(b"null");
                return Ok(());
            }
            structure(r, s, v, flexible, out, cx)?;
        }
    }
    Ok(())
}

/// A field that prints only when not default, read with the tree decoder (floats, strings,
/// structs... in a tagged field: rare) and printed with [`json`]'s writer. Whether it printed.
fn tree_field(r: &mut Rd, f: &Field, v: i16, flexible: bool, in_tag: bool, first: &mut bool, out: &mut Vec<u8>) -> R<bool> {
    let mut rd = Reader { b: r.b, pos: r.pos };
    let val = codec::read_field_value(&mut rd, f, v, flexible, in_tag).map_err(|_| Refused)?;
    r.pos = rd.pos;
    if is_default(f, &val, v) {
        return Ok(false);
    }
    key(out, first, f.json_name);
    let mut s = String::new();
    json::push_value(&mut s, &f.ty, v, &val);
    out.extend_from_slice(s.as_bytes());
    Ok(true)
}

/// A tagged field's value (compact encoding), printed with its key when not default. Whether
/// it printed.
fn tagged_field(r: &mut Rd, f: &Field, v: i16, flexible: bool, first: &mut bool, out: &mut Vec<u8>, cx: &mut Scratch) -> R<bool> {
    let nullable = f.nullable_versions.contains(v);
    let int_default = |x: i64| match f.default {
        DefaultValue::Int(i) => i == x,
        DefaultValue::Zero => x == 0,
        DefaultValue::Float(d) => d == x as f64,
        _ => false,
    };
    macro_rules! int_field {
        ($x:expr) => {{
            let x = $x;
            if int_default(x as i64) {
                return Ok(false);
            }
            key(out, first, f.json_name);
            int(out, x);
            Ok(true)
        }};
    }
    match &f.ty {
        FieldType::Int8 => int_field!(r.fixed::<1>()?[0] as i8),
        FieldType::Int16 => int_field!(i16::from_be_bytes(r.fixed()?)),
        FieldType::Uint16 => int_field!(u16::from_be_bytes(r.fixed()?)),
        FieldType::Int32 => int_field!(i32::from_be_bytes(r.fixed()?)),
        FieldType::Uint32 => int_field!(u32::from_be_bytes(r.fixed()?)),
        FieldType::Int64 => int_field!(i64::from_be_bytes(r.fixed()?)),
        FieldType::Array(elem) => {
            let at = r.pos;
            match r.len(true, true)? {
                None if nullable => {
                    if matches!(f.default, DefaultValue::Null) {
                        return Ok(false);
                    }
                    key(out, first, f.json_name);
                    out.extend_from_slice(b"null");
                    Ok(true)
                }
                None => Err(Refused),
                Some(0) if matches!(f.default, DefaultValue::Zero) => Ok(false),
                Some(_) => {
                    r.pos = at;
                    key(out, first, f.json_name);
                    let _ = elem;
                    value(r, &f.ty, v, flexible, true, nullable, out, cx)?;
                    Ok(true)
                }
            }
        }
        _ => tree_field(r, f, v, flexible, true, first, out),
    }
}

/// Writes a struct body at version `v` (the decoder's `read_struct`).
fn structure(r: &mut Rd, s: &'static StructSchema, v: i16, flexible: bool, out: &mut Vec<u8>, cx: &mut Scratch) -> R<()> {
    let tagged_here = flexible && s.fields.iter().any(|f| f.versions.contains(v) && f.tagged_versions.contains(v));
    out.push(b'{');
    if !tagged_here {
        let mut first = true;
        for f in s.fields {
            if !f.versions.contains(v) {
                continue;
            }
            if f.tagged_versions.contains(v) {
                // (not flexible) a field of tagged versions read in place: printed when not default
                tree_field(r, f, v, flexible, false, &mut first, out)?;
                continue;
            }
            key(out, &mut first, f.json_name);
            value(r, &f.ty, v, flexible, compact(f, flexible, v), f.nullable_versions.contains(v), out, cx)?;
        }
        if flexible {
            // no known tagged fields at this version: the section holds unknown ones, not printed
            skip_tags(r)?;
        }
    } else {
        let base = cx.spans.len();
        cx.spans.resize(base + s.fields.len(), (0, 0));
        let res = tagged_struct(r, s, v, out, cx, base);
        cx.spans.truncate(base);
        res?;
    }
    out.push(b'}');
    Ok(())
}

/// The fields of a flexible struct that has tagged fields at `v`, after its `{`. Each field's
/// text is noted (`cx.spans[base + schema index]`, relative to the object's start); tagged
/// fields come last in the bytes, so when one printed is not after every field printed before
/// it in schema order (or a tag comes twice), the fields are put back in schema order.
fn tagged_struct(r: &mut Rd, s: &'static StructSchema, v: i16, out: &mut Vec<u8>, cx: &mut Scratch, base: usize) -> R<()> {
    let obj = out.len();
    let rel = |x: usize| u32::try_from(x - obj).map_err(|_| Refused);
    let mut first = true;
    let mut last: Option<usize> = None; // schema index of the last field written
    let mut in_order = true;
    for (i, f) in s.fields.iter().enumerate() {
        if !f.versions.contains(v) || f.tagged_versions.contains(v) {
            continue;
        }
        let start = out.len() + usize::from(!first);
        key(out, &mut first, f.json_name);
        value(r, &f.ty, v, true, compact(f, true, v), f.nullable_versions.contains(v), out, cx)?;
        cx.spans[base + i] = (rel(start)?, rel(out.len())?);
        last = Some(i);
    }
    let n = r.uvar()?;
    if n as usize > r.remaining() {
        return Err(Refused);
    }
    for _ in 0..n {
        let tag = r.uvar()?;
        let size = r.uvar()? as usize;
        if size > r.remaining() {
            return Err(Refused);
        }
        let end = r.pos + size;
        let Some(i) = s.fields.iter().position(|f| f.tag == Some(tag) && f.versions.contains(v) && f.tagged_versions.contains(v)) else {
            r.take(size)?;
            continue;
        };
        if cx.spans[base + i] != (0, 0) || last.is_some_and(|l| i <= l) {
            in_order = false; // a tag given twice (the last one counts, as in the decoder), or out of order
        }
        let mark = out.len();
        if out.len() > obj {
            out.push(b',');
        }
        let start = out.len();
        let mut sub = Rd { b: &r.b[..end], pos: r.pos };
        let mut none_yet = true;
        let printed = tagged_field(&mut sub, &s.fields[i], v, true, &mut none_yet, out, cx)?;
        if sub.pos != end {
            return Err(Refused);
        }
        r.pos = end;
        if printed {
            cx.spans[base + i] = (rel(start)?, rel(out.len())?);
            last = Some(last.map_or(i, |l| l.max(i)));
        } else {
            out.truncate(mark);
            cx.spans[base + i] = (0, 0);
        }
    }
    if !in_order {
        // put the fields in schema order
        let mut tmp = std::mem::take(&mut cx.tmp);
        tmp.clear();
        tmp.extend_from_slice(&out[obj..]);
        out.truncate(obj);
        let mut first = true;
        for &(a, b) in &cx.spans[base..base + s.fields.len()] {
            if b > a {
                if !first {
                    out.push(b',');
                }
                first = false;
                out.extend_from_slice(&tmp[a as usize..b as usize]);
            }
        }
        cx.tmp = tmp;
    }
    Ok(())
}

/// The tagged-field section of a struct with no known tagged fields at this version.
fn skip_tags(r: &mut Rd) -> R<()> {
    let n = r.uvar()?;
    if n as usize > r.remaining() {
        return Err(Refused);
    }
    for _ in 0..n {
        r.uvar()?;
        let size = r.uvar()? as usize;
        if size > r.remaining() {
            return Err(Refused);
        }
        r.take(size)?;
    }
    Ok(())
}

fn frame_varint(r: &mut Rd) -> R<i16> {
    let x = r.uvar()?;
    if x > i16::MAX as u32 {
        return Err(Refused);
    }
    Ok(x as i16)
}

fn body(r: &mut Rd, m: &'static MessageSchema, v: i16, out: &mut Vec<u8>, cx: &mut Scratch) -> R<()> {
    if !m.valid_versions.contains(v) {
        return Err(Refused);
    }
    structure(r, m.body, v, m.flexible_versions.contains(v), out, cx)?;
    if r.remaining() > 0 {
        return Err(Refused);
    }
    Ok(())
}

/// The direct walk alone over a metadata record value (frame + body): calls `head` with the
/// record's type and version, then appends the body's JSON
/// (`{"name":"metadata.version","featureLevel":22}`); or [`Refused`] (`out` as it was) where
/// the tree decoder would raise an error.
pub fn metadata_fast(
    value: &[u8],
    out: &mut Vec<u8>,
    cx: &mut Scratch,
    head: impl FnOnce(&mut Vec<u8>, &'static MessageSchema, i16),
) -> R<(&'static MessageSchema, i16)> {
    let mark = out.len();
    let mut r = Rd { b: value, pos: 0 };
    let res = (|| {
        let frame = frame_varint(&mut r)?;
        if frame as u32 != FRAME_VERSION {
            return Err(Refused);
        }
        let api_key = frame_varint(&mut r)?;
        let version = frame_varint(&mut r)?;
        let m = metadata_schema(api_key).ok_or(Refused)?;
        head(out, m, version);
        body(&mut r, m, version, out, cx)?;
        Ok((m, version))
    })();
    if res.is_err() {
        out.truncate(mark);
    }
    res
}

/// The direct walk alone over a control record value of control type `control_type` (see
/// [`metadata_fast`]).
pub fn control_fast(
    control_type: i16,
    value: &[u8],
    out: &mut Vec<u8>,
    cx: &mut Scratch,
    head: impl FnOnce(&mut Vec<u8>, &'static ControlSchema, i16),
) -> R<(&'static ControlSchema, i16)> {
    let mark = out.len();
    let res = (|| {
        let c = control_schema(control_type).ok_or(Refused)?;
        if value.len() < 2 {
            return Err(Refused);
        }
        let version = i16::from_be_bytes([value[0], value[1]]);
        head(out, c, version);
        body(&mut Rd { b: value, pos: 0 }, c.schema, version, out, cx)?;
        Ok((c, version))
    })();
    if res.is_err() {
        out.truncate(mark);
    }
    res
}

/// A metadata record value as JSON, appended to `out`: `head(out, type, version)`, then the
/// body. The direct walk, or where it gives up, the tree decoder, so that an error is the
/// decoder's own ([`super::decode_metadata_record`]).
pub fn metadata_json(
    value: &[u8],
    out: &mut Vec<u8>,
    cx: &mut Scratch,
    head: impl Fn(&mut Vec<u8>, &'static MessageSchema, i16),
) -> CResult<(&'static MessageSchema, i16)> {
    if let Ok(r) = metadata_fast(value, out, cx, &head) {
        return Ok(r);
    }
    let rec = super::decode_metadata_record(value)?;
    head(out, rec.schema, rec.version);
    out.extend_from_slice(json::message_json(rec.schema, rec.version, &rec.data).as_bytes());
    Ok((rec.schema, rec.version))
}

/// A control record value as JSON, appended to `out` (see [`metadata_json`]; errors:
/// [`super::decode_control_record`]'s).
pub fn control_json(
    control_type: i16,
    value: &[u8],
    out: &mut Vec<u8>,
    cx: &mut Scratch,
    head: impl Fn(&mut Vec<u8>, &'static ControlSchema, i16),
) -> CResult<(&'static ControlSchema, i16)> {
    if let Ok(r) = control_fast(control_type, value, out, cx, &head) {
        return Ok(r);
    }
    let (c, v, st) = super::decode_control_record(control_type, value)?;
    head(out, c, v);
    out.extend_from_slice(json::message_json(c.schema, v, &st).as_bytes());
    Ok((c, v))
}

/// The head [`json::metadata_record_json`] puts before the body: `{"type":"X","version":N,"data":`.
pub fn record_head(out: &mut Vec<u8>, m: &MessageSchema, v: i16) {
    out.extend_from_slice(b"{\"type\":\"");
    out.extend_from_slice(m.type_name.as_bytes());
    out.extend_from_slice(b"\",\"version\":");
    int(out, v);
    out.extend_from_slice(b",\"data\":");
}

/// `{"type":"FEATURE_LEVEL_RECORD","version":0,"data":{...}}` of a metadata record value:
/// [`json::metadata_record_json`]'s text of the decoded record.
pub fn metadata_record_json(value: &[u8], out: &mut Vec<u8>, cx: &mut Scratch) -> CResult<(&'static MessageSchema, i16)> {
    let r = metadata_json(value, out, cx, record_head)?;
    out.push(b'}');
    Ok(r)
}

#[cfg(test)]
mod tests;
