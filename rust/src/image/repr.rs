//! Python's `repr` of a decoded record (the dict `decode_metadata_record` gives), which the
//! image's "lengths do not match" message quotes as Kafka quotes the record's `toString`.

use crate::schema::{Struct, Value};
use std::fmt::Write;

/// `repr(dict)` of a decoded struct: fields in schema order, then `_unknown_tags` if any.
pub fn struct_repr(s: &Struct) -> String {
    let mut out = String::new();
    push_struct(&mut out, s);
    out
}

fn push_struct(out: &mut String, s: &Struct) {
    out.push('{');
    for (i, (name, v)) in s.fields.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        push_str(out, name);
        out.push_str(": ");
        push_value(out, v);
    }
    if !s.unknown_tags.is_empty() {
        if !s.fields.is_empty() {
            out.push_str(", ");
        }
        out.push_str("'_unknown_tags': [");
        for (i, (tag, data)) in s.unknown_tags.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            let _ = write!(out, "({tag}, ");
            push_bytes(out, data);
            out.push(')');
        }
        out.push(']');
    }
    out.push('}');
}

fn push_value(out: &mut String, v: &Value) {
    match v {
        Value::Null => out.push_str("None"),
        Value::Bool(true) => out.push_str("True"),
        Value::Bool(false) => out.push_str("False"),
        Value::Int(i) => {
            let _ = write!(out, "{i}");
        }
        Value::Float(x) => push_float(out, *x),
        Value::Str(s) => push_str(out, s),
        Value::Bytes(b) => push_bytes(out, b),
        Value::Uuid(u) => {
            let h: String = u.iter().map(|b| format!("{b:02x}")).collect();
            let _ = write!(out, "UUID('{}-{}-{}-{}-{}')", &h[0..8], &h[8..12], &h[12..16], &h[16..20], &h[20..32]);
        }
        Value::Array(items) => {
            out.push('[');
            for (i, it) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                push_value(out, it);
            }
            out.push(']');
        }
        Value::Struct(s) => push_struct(out, s),
    }
}

/// Python's float repr for the common cases (shortest round-trip digits).
fn push_float(out: &mut String, x: f64) {
    if x.is_nan() {
        out.push_str("nan");
    } else if x.is_infinite() {
        out.push_str(if x > 0.0 { "inf" } else { "-inf" });
    } else if x == x.trunc() && x.abs() < 1e16 {
        let _ = write!(out, "{x:.1}");
    } else {
        let _ = write!(out, "{x}");
    }
}

/// Python's str repr: single quotes unless the text holds a single quote and no double quote.
fn push_str(out: &mut String, s: &str) {
    let q = if s.contains('\'') && !s.contains('"') { '"' } else { '\'' };
    out.push(q);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == q => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push(q);
}

/// Python's bytes repr.
fn push_bytes(out: &mut String, b: &[u8]) {
    let q = if b.contains(&b'\'') && !b.contains(&b'"') { b'"' } else { b'\'' };
    out.push('b');
    out.push(q as char);
    for &c in b {
        match c {
            b'\\' => out.push_str("\\\\"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            c if c == q => {
                out.push('\\');
                out.push(c as char);
            }
            0x20..=0x7e => out.push(c as char),
            c => {
                let _ = write!(out, "\\x{c:02x}");
            }
        }
    }
    out.push(q as char);
}
