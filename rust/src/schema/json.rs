//! JSON as Kafka's generated `*JsonConverter.write` classes produce it (and Jackson prints it),
//! which is what `kafka-dump-log --cluster-metadata-decoder` shows:
//!
//! * metadata records: `{"type":"FEATURE_LEVEL_RECORD","version":0,"data":{...}}`;
//! * control records: the body alone, e.g. `{"version":0,"lastContainedLogTimestamp":1}`;
//! * field names: the schema name with its first letter lower-cased (`kRaftVersion`);
//! * fields absent from the version are left out; tagged fields only when not default;
//!   unknown tagged fields are not printed; null is `null`;
//! * integers (int64 too) as JSON numbers; float64 as Java's `Double.toString`; uuid as
//!   Kafka's URL-safe base64 without padding; bytes/records as standard base64 with padding;
//! * strings escaped as Jackson does (`\"`, `\\`, `\b \t \n \f \r`, other controls `\u00XX`).

use super::codec::is_default;
use super::types::*;
use base64::Engine;

pub fn uuid_text(u: &[u8; 16]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(u)
}

/// Parses Kafka's uuid text form (22 characters of URL-safe base64, no padding).
pub fn parse_uuid_text(s: &str) -> Option<[u8; 16]> {
    if s.len() != 22 {
        return None;
    }
    let v = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(s).ok()?;
    v.try_into().ok()
}

pub fn push_string(out: &mut String, s: &str) {
    out.push('"');
    let mut run_start = 0;
    for (i, c) in s.char_indices() {
        let esc: Option<&str> = match c {
            '"' => Some("\\\""),
            '\\' => Some("\\\\"),
            '\u{8}' => Some("\\b"),
            '\t' => Some("\\t"),
            '\n' => Some("\\n"),
            '\u{c}' => Some("\\f"),
            '\r' => Some("\\r"),
            c if (c as u32) < 0x20 => None,
            _ => continue,
        };
        out.push_str(&s[run_start..i]);
        match esc {
            Some(e) => out.push_str(e),
            None => out.push_str(&format!("\\u{:04X}", c as u32)),
        }
        run_start = i + c.len_utf8();
    }
    out.push_str(&s[run_start..]);
    out.push('"');
}

/// Java's `Double.toString` (shortest repr; plain notation for 1e-3 <= |x| < 1e7, else
/// computerized scientific notation `1.0E10`). Non-finite values are quoted, as Jackson does.
pub fn java_double(x: f64) -> String {
    if x.is_nan() {
        return "\"NaN\"".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "\"Infinity\"".into() } else { "\"-Infinity\"".into() };
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0.0".into() } else { "0.0".into() };
    }
    let a = x.abs();
    if (1e-3..1e7).contains(&a) {
        let s = format!("{x}");
        if s.contains('.') {
            s
        } else {
            s + ".0"
        }
    } else {
        let s = format!("{x:e}");
        let (mant, exp) = s.split_once('e').unwrap();
        let mant = if mant.contains('.') { mant.to_string() } else { format!("{mant}.0") };
        format!("{mant}E{exp}")
    }
}

pub(crate) fn push_value(out: &mut String, t: &FieldType, v: i16, val: &Value) {
    match val {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Int(i) => out.push_str(itoa::Buffer::new().format(*i)),
        Value::Float(x) => out.push_str(&java_double(*x)),
        Value::Str(s) => push_string(out, s),
        Value::Bytes(b) => {
            out.push('"');
            out.push_str(&base64::engine::general_purpose::STANDARD.encode(b));
            out.push('"');
        }
        Value::Uuid(u) => {
            out.push('"');
            out.push_str(&uuid_text(u));
            out.push('"');
        }
        Value::Array(items) => {
            let elem = match t {
                FieldType::Array(e) => *e,
                other => other,
            };
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                push_value(out, elem, v, item);
            }
            out.push(']');
        }
        Value::Struct(st) => match t {
            FieldType::Struct(s) => push_struct(out, s, v, st),
            _ => out.push_str("{}"),
        },
    }
}

/// Appends a struct's JSON object.
pub fn push_struct(out: &mut String, s: &StructSchema, v: i16, st: &Struct) {
    out.push('{');
    let mut first = true;
    for f in s.fields {
        if !f.versions.contains(v) {
            continue;
        }
        let Some(val) = st.get(f.name) else { continue };
        if f.tagged_versions.contains(v) && is_default(f, val, v) {
            continue;
        }
        if !first {
            out.push(',');
        }
        first = false;
        push_string(out, f.json_name);
        out.push(':');
        push_value(out, &f.ty, v, val);
    }
    out.push('}');
}

/// `{"type":"FEATURE_LEVEL_RECORD","version":0,"data":{...}}`.
pub fn metadata_record_json(m: &MessageSchema, v: i16, st: &Struct) -> String {
    let mut out = String::with_capacity(128);
    out.push_str("{\"type\":\"");
    out.push_str(m.type_name);
    out.push_str("\",\"version\":");
    out.push_str(itoa::Buffer::new().format(v));
    out.push_str(",\"data\":");
    push_struct(&mut out, m.body, v, st);
    out.push('}');
    out
}

/// The body of a message as JSON (control records print this alone).
pub fn message_json(m: &MessageSchema, v: i16, st: &Struct) -> String {
    let mut out = String::with_capacity(64);
    push_struct(&mut out, m.body, v, st);
    out
}
