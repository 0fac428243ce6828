//! Re-encoding a record at another version: splicing its bytes (the fields both versions have
//! keep their encoding; the others are cut out and the tagged section renumbered) where the
//! record's nested structs keep their shape, and the generic decode, strip and encode elsewhere.

use super::{Plan, SemanticDefault};
use crate::schema::codec::{self, is_default, Reader};
use crate::schema::types::*;
use crate::schema::CodecError;
use crate::varint::{read_uvarint, size_of_uvarint, write_uvarint};
use std::cell::Cell;
use std::rc::Rc;

/// Parses the `ApiMessageAndVersion` frame: (api key, version, where the body starts).
pub(super) fn frame(value: &[u8]) -> std::result::Result<(i16, i16, usize), CodecError> {
    let mut p = 0usize;
    let mut next = |what: &str| -> std::result::Result<u32, CodecError> {
        read_uvarint(value, &mut p).ok_or_else(|| CodecError::new(crate::schema::codec::CodecErrorKind::Corrupt, Some(0), format!("Could not read {what}")))
    };
    let frame_version = next("frame version")?;
    let api_key = next("type")?;
    let version = next("version")?;
    if frame_version != 1 || api_key > i16::MAX as u32 || version > i16::MAX as u32 {
        return Err(CodecError::new(crate::schema::codec::CodecErrorKind::Unsupported, Some(0), format!("unsupported frame {frame_version}/{api_key}/{version}")));
    }
    Ok((api_key as i16, version as i16, p))
}

/// The size `write_frame` gives a frame.
pub(super) fn frame_size(api_key: i16, version: i16) -> usize {
    1 + size_of_uvarint(api_key as u32) + size_of_uvarint(version as u32)
}

/// Where a splice puts the new value: its bytes, or only their count.
pub(super) trait Sink {
    fn put(&mut self, b: &[u8]);
    fn put_uvarint(&mut self, v: u32);
}

impl Sink for Vec<u8> {
    #[inline]
    fn put(&mut self, b: &[u8]) {
        self.extend_from_slice(b);
    }
    #[inline]
    fn put_uvarint(&mut self, v: u32) {
        write_uvarint(self, v);
    }
}

/// A sink that counts bytes.
pub(super) struct Count(pub(super) usize);

impl Sink for Count {
    #[inline]
    fn put(&mut self, b: &[u8]) {
        self.0 += b.len();
    }
    #[inline]
    fn put_uvarint(&mut self, v: u32) {
        self.0 += size_of_uvarint(v);
    }
}

pub(super) fn write_frame(out: &mut Vec<u8>, api_key: i16, version: i16) {
    if (0..0x80).contains(&api_key) && (0..0x80).contains(&version) {
        out.extend_from_slice(&[1, api_key as u8, version as u8]);
        return;
    }
    write_uvarint(out, 1);
    write_uvarint(out, api_key as u32);
    write_uvarint(out, version as u32);
}

/// Whether every struct nested in `s` has the same fields at `from` and `to` (then a field's
/// bytes mean the same at both versions and the top level can be spliced), and no field turns
/// from tagged to untagged or appears at `to` only.
pub(super) fn struct_spliceable(s: &'static StructSchema, from: i16, to: i16, top: bool) -> bool {
    for f in s.fields {
        let (a, b) = (f.versions.contains(from), f.versions.contains(to));
        if !top && a != b {
            return false;
        }
        if b && !a {
            return false; // a field the target has and the source lacks: the encoder writes its default
        }
        if a && b && f.tagged_versions.contains(from) != f.tagged_versions.contains(to) {
            return false;
        }
        if a && b && f.nullable_versions.contains(from) != f.nullable_versions.contains(to) {
            return false;
        }
        let mut t = &f.ty;
        while let FieldType::Array(e) = t {
            t = e;
        }
        if let FieldType::Struct(inner) = t {
            if a && !struct_spliceable(inner, from, to, false) {
                return false;
            }
        }
    }
    true
}

pub(super) fn semantic_default(record: &str, f: &Field, val: &Value, plan: &Plan) -> bool {
    plan.semantic_defaults.iter().any(|(r, name, rule)| r == record && name == f.name && rule_says_nothing(*rule, val))
}

fn rule_says_nothing(rule: SemanticDefault, val: &Value) -> bool {
    match (rule, val) {
        (_, Value::Null) => true,
        (SemanticDefault::Empty, Value::Array(items)) => items.is_empty(),
        (SemanticDefault::AllZeroUuids, Value::Array(items)) => items.iter().all(|x| matches!(x, Value::Uuid(u) if *u == [0u8; 16])),
        _ => false,
    }
}

/// One record's change of version, and where to note what it loses.
pub(super) struct Change<'a> {
    /// the record type's name (for the plan's semantic defaults)
    pub(super) record: &'a str,
    pub(super) from: i16,
    pub(super) to: i16,
    pub(super) plan: &'a Plan,
    pub(super) lost: &'a mut Vec<String>,
}

/// Whether the encoded array `raw` of field `f` carries nothing (empty, null with a null default,
/// or all-zero uuids under that semantic rule), judged from the bytes alone; None when the
/// field is not such an array (the caller decodes it).
pub(super) fn quick_carries_nothing(f: &Field, raw: &[u8], compact: bool, rule: Option<SemanticDefault>) -> Option<bool> {
    let FieldType::Array(elem) = &f.ty else { return None };
    if !compact {
        return None;
    }
    let mut p = 0usize;
    let n = read_uvarint(raw, &mut p)?;
    let empty_is_default = matches!(f.default, DefaultValue::Zero);
    if n == 0 {
        // null: default only when the default is null (or a semantic rule says so)
        return Some(matches!(f.default, DefaultValue::Null) || rule.is_some());
    }
    if n == 1 {
        // empty: the default unless the default is null; both semantic rules call it nothing
        return Some(empty_is_default || rule.is_some());
    }
    if rule == Some(SemanticDefault::AllZeroUuids) && matches!(elem, FieldType::Uuid) {
        // or-fold without an early exit: vectorized (uuid arrays are short)
        return Some(raw[p..].iter().fold(0u8, |a, b| a | b) == 0);
    }
    Some(false) // non-empty: neither the default nor "empty"
}

/// (from, to, the plan; None when the change cannot be spliced).
pub(super) type CachedPlan = (i16, i16, Option<Rc<SplicePlan>>);

/// How a splice walks over a field's bytes, worked out from its type once.
#[derive(Clone, Copy, PartialEq)]
enum Skip {
    /// a fixed number of bytes (ints, uuids; consecutive kept ones merged into one step)
    Fixed(usize),
    /// a compact array of fixed-width elements: uvarint length + 1, then the elements
    CompactArray { width: usize, nullable: bool },
    /// anything else: the generic walk
    Other,
}

/// One non-tagged field of the source version (or a run of kept fixed-width fields), in
/// order, and what a splice does with it.
struct SpliceStep {
    field: &'static Field,
    /// the fields after `field` merged into this step (kept fixed-width ones)
    merged: Vec<&'static Field>,
    skip: Skip,
    compact: bool,
    nullable: bool,
    /// the target version has it
    keep: bool,
    /// the plan's rule for when a non-default value of it still carries nothing
    rule: Option<SemanticDefault>,
}

/// How to splice one record type from one version to another, worked out once.
pub(super) struct SplicePlan {
    from: i16,
    steps: Vec<SpliceStep>,
    /// tags of fields the source version has (tagged) and the target does not, with their rule
    dropped_tags: Vec<(u32, &'static Field, Option<SemanticDefault>)>,
    /// per lost field (steps, then dropped tags): its entry in the report's losses, once known
    pub(super) loss_slots: Vec<Cell<Option<usize>>>,
    /// the target version has every non-tagged field of the source
    keeps_all: bool,
}

impl SplicePlan {
    pub(super) fn new(s: &'static StructSchema, from: i16, to: i16, record: &str, plan: &Plan) -> Self {
        let rule = |f: &Field| plan.semantic_defaults.iter().find(|(r, n, _)| r == record && n == f.name).map(|(_, _, x)| *x);
        let mut steps: Vec<SpliceStep> = Vec::new();
        for f in s.fields.iter().filter(|f| f.versions.contains(from) && !f.tagged_versions.contains(from)) {
            let compact = f.flexible_versions.is_none_or(|fv| fv.contains(from));
            let nullable = f.nullable_versions.contains(from);
            let keep = f.versions.contains(to);
            let skip = match (codec::fixed_width(&f.ty), &f.ty) {
                (Some(w), _) => Skip::Fixed(w),
                (None, FieldType::Array(e)) if compact => match codec::fixed_width(e) {
                    Some(width) => Skip::CompactArray { width, nullable },
                    None => Skip::Other,
                },
                _ => Skip::Other,
            };
            if let (Skip::Fixed(w), Some(last)) = (skip, steps.last_mut()) {
                if let (Skip::Fixed(lw), true, true) = (last.skip, last.keep, keep) {
                    last.skip = Skip::Fixed(lw + w);
                    last.merged.push(f);
                    continue;
                }
            }
            steps.push(SpliceStep { field: f, merged: Vec::new(), skip, compact, nullable, keep, rule: rule(f) });
        }
        let dropped_tags = s
            .fields
            .iter()
            .filter(|f| f.versions.contains(from) && f.tagged_versions.contains(from) && !f.versions.contains(to))
            .filter_map(|f| f.tag.map(|t| (t, f, rule(f))))
            .collect::<Vec<_>>();
        let loss_slots = (0..steps.len() + dropped_tags.len()).map(|_| Cell::new(None)).collect();
        let keeps_all = steps.iter().all(|s| s.keep);
        SplicePlan { from, steps, dropped_tags, loss_slots, keeps_all }
    }

    /// The field lost at `i` (an index `splice_struct` reported).
    pub(super) fn lost_field(&self, i: usize) -> &'static Field {
        if i < self.steps.len() { self.steps[i].field } else { self.dropped_tags[i - self.steps.len()].1 }
    }
}

/// Writes the top-level struct `body` (version `from`) at version `to` by copying the bytes of
/// the fields both versions have and cutting out the others (recording the non-default ones).
/// The fields it loses (non-default values the target cannot carry) go to `lost` as indices
/// into the plan (see [`SplicePlan::lost_field`]).
/// Returns true, having written nothing, when the body is the same at `to` (every field kept
/// and no dropped tag present).
pub(super) fn splice_struct(sp: &SplicePlan, body: &[u8], out: &mut impl Sink, lost: &mut Vec<usize>) -> std::result::Result<bool, CodecError> {
    let from = sp.from;
    let mut r = Reader::new(body);
    // bytes of consecutive kept fields are copied in one go
    let mut run_start = 0usize;
    for (i, st) in sp.steps.iter().enumerate() {
        let f = st.field;
        let start = r.pos;
        let end = match st.skip {
            Skip::Fixed(w) => Some(start + w),
            Skip::CompactArray { width, nullable } => match body.get(start) {
                // a short array (the usual case): a one-byte length
                Some(&n) if n < 0x80 => match n {
                    0 if !nullable => None,
                    0 => Some(start + 1),
                    n => Some(start + 1 + (n as usize - 1) * width),
                },
                _ => {
                    let mut p = start;
                    codec::skip_quick(body, &mut p, &f.ty, from, true, nullable).map(|_| p)
                }
            },
            Skip::Other => {
                let mut p = start;
                codec::skip_quick(body, &mut p, &f.ty, from, st.compact, st.nullable).map(|_| p)
            }
        };
        match end {
            Some(e) if e <= body.len() => r.pos = e,
            _ => {
                // the generic walk says what is wrong, and where
                r.pos = start;
                for f in std::iter::once(f).chain(st.merged.iter().copied()) {
                    codec::skip_field_value(&mut r, f, from, true)?;
                }
            }
        }
        if !st.keep {
            out.put(&body[run_start..start]);
            run_start = r.pos;
            let raw = &body[start..r.pos];
            let carries_nothing = match quick_carries_nothing(f, raw, st.compact, st.rule) {
                Some(b) => b,
                None => {
                    let val = codec::read_field_value(&mut Reader::new(raw), f, from, true, false)?;
                    is_default(f, &val, from) || st.rule.is_some_and(|x| rule_says_nothing(x, &val))
                }
            };
            if !carries_nothing {
                lost.push(i);
            }
        }
    }
    // the tagged-field section: keep the tags `to` knows (and the unknown ones), in order
    let section = r.pos;
    let n = r.uvarint("tagged field count")?;
    if n == 0 && r.remaining() == 0 {
        if sp.keeps_all {
            return Ok(true);
        }
        out.put(&body[run_start..section]);
        out.put(&[0]);
        return Ok(false);
    }
    let mut kept: Vec<&[u8]> = Vec::with_capacity(n as usize);
    let mut dropped = false;
    for _ in 0..n {
        let entry_start = r.pos;
        let tag = r.uvarint("tag")?;
        let size = r.uvarint("tagged field size")? as usize;
        let payload_start = r.pos;
        r.take(size, "tagged field")?;
        match sp.dropped_tags.iter().position(|(t, _, _)| *t == tag) {
            Some(j) => {
                let (_, f, rule) = sp.dropped_tags[j];
                dropped = true;
                let val = codec::read_field_value(&mut Reader::new(&body[payload_start..r.pos]), f, from, true, true)?;
                if !is_default(f, &val, from) && !rule.is_some_and(|x| rule_says_nothing(x, &val)) {
                    lost.push(sp.steps.len() + j);
                }
            }
            None => kept.push(&body[entry_start..r.pos]),
        }
    }
    if r.remaining() > 0 {
        return Err(CodecError::new(crate::schema::codec::CodecErrorKind::Corrupt, Some(r.pos), format!("{} byte(s) of garbage after the record", r.remaining())));
    }
    if !dropped {
        if sp.keeps_all {
            return Ok(true);
        }
        out.put(&body[run_start..]);
        return Ok(false);
    }
    out.put(&body[run_start..section]);
    out.put_uvarint(kept.len() as u32);
    for e in kept {
        out.put(e);
    }
    Ok(false)
}

/// The general path: decode, remove what `to` lacks (recording non-default values), encode.
pub(super) fn reencode(c: &mut Change, m: &'static MessageSchema, body: &[u8], out: &mut Vec<u8>) -> std::result::Result<(), CodecError> {
    let mut st = codec::decode_message(m, c.from, body)?;
    strip(c, m.body, &mut st, "");
    codec::encode_message(m, c.to, &st, out)
}

fn strip(c: &mut Change, s: &'static StructSchema, st: &mut Struct, path: &str) {
    let (record, from, to, plan) = (c.record, c.from, c.to, c.plan);
    st.fields.retain_mut(|(name, val)| {
        let Some(f) = s.fields.iter().find(|f| f.name == *name) else { return true };
        let p = if path.is_empty() { f.name.to_string() } else { format!("{path}.{}", f.name) };
        if !f.versions.contains(to) {
            let carries_nothing = is_default(f, val, from) || (path.is_empty() && semantic_default(record, f, val, plan));
            if !carries_nothing && !c.lost.contains(&p) {
                c.lost.push(p);
            }
            return false;
        }
        match (&f.ty, val) {
            (FieldType::Struct(inner), Value::Struct(x)) => strip(c, inner, x, &p),
            (FieldType::Array(FieldType::Struct(inner)), Value::Array(items)) => {
                let ip = format!("{p}[]");
                for it in items.iter_mut() {
                    if let Value::Struct(x) = it {
                        strip(c, inner, x, &ip);
                    }
                }
            }
            _ => {}
        }
        true
    });
}
