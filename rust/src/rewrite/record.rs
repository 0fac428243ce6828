//! One record's fate under the plan: kept, dropped (silently or as a loss), given a new
//! feature level, or written at an older version (spliced or re-encoded), with what it loses.

use super::splice::{frame, frame_size, reencode, splice_struct, struct_spliceable, write_frame, CachedPlan, Change, Count, SplicePlan};
use super::{FeatureChange, Loss, Plan, Report, ACL_RECORD, CIDR_HOST_LOSS, FEATURE_LEVEL_RECORD, KRAFT_VERSION, KRAFT_VERSION_FEATURE, KRAFT_VOTERS, TOPIC_RECORD};
use crate::batch;
use crate::error::{Error, ErrorKind, Result};
use crate::schema::codec::{self, is_default};
use crate::schema::json::uuid_text;
use crate::schema::types::*;
use crate::schema::{self, CodecError};
use std::collections::HashMap;
use std::rc::Rc;

/// Per-record outcome. Replacement values live in the rewriter's per-batch arena.
pub(super) enum Action {
    Keep,
    Drop,
    Replace(std::ops::Range<usize>),
    /// The value unchanged but for its version, a one-byte varint at `at` in the value.
    SetVersion { at: u32, to: u8 },
    /// A new value of this size, not written out (`Rewriter::measure_only`).
    Resized(usize),
}

pub(super) struct Rewriter<'p> {
    plan: &'p Plan,
    pub(super) report: Report,
    topics: HashMap<[u8; 16], String>,
    /// Indexed by api key: the splice plan of the last (from, to) seen.
    splice_plans: Vec<Option<CachedPlan>>,
    lost_fields: Vec<String>,
    lost_steps: Vec<usize>,
    /// Replacement record values of the current batch, back to back.
    pub(super) arena: Vec<u8>,
    /// Work out only the size of spliced values, not their bytes (a dry run of an uncompressed
    /// batch, or a loss report): they come back as `Action::Resized`.
    pub(super) measure_only: bool,
}

/// Input the tables do not describe, refused rather than guessed at.
fn refusal(fpos: u64, off: i64, why: String) -> Error {
    Error::new(ErrorKind::Unsupported, format!("record at offset {off}: {why}; refusing to rewrite")).at(fpos, Some(off))
}

fn codec_err(e: CodecError, off: i64, fpos: u64, what: &str) -> Error {
    Error::corrupt(fpos, Some(off), format!("record at offset {off}: {what}: {e}"))
}

impl<'p> Rewriter<'p> {
    pub(super) fn new(plan: &'p Plan, measure_only: bool) -> Self {
        Rewriter { plan, report: Report::default(), topics: HashMap::new(), splice_plans: vec![None; 64], lost_fields: Vec::new(), lost_steps: Vec::new(), arena: Vec::new(), measure_only }
    }

    pub(super) fn control(&mut self, key: Option<&[u8]>, value: Option<&[u8]>, off: i64, fpos: u64) -> Result<Action> {
        let (_, ctype) = batch::parse_control_key(key).map_err(|e| Error::corrupt(fpos, Some(off), format!("record at offset {off}: {e}")))?;
        if self.plan.drop_kraft_control && (ctype == KRAFT_VERSION || ctype == KRAFT_VOTERS) {
            let label = schema::control_schema(ctype).map_or("control", |c| c.label);
            let v = value.unwrap_or(&[]);
            let detail = match schema::decode_control_record(ctype, v) {
                Ok((c, ver, st)) => {
                    let all_default = c.schema.body.fields.iter().filter(|f| f.name != "Version").all(|f| st.get(f.name).is_none_or(|x| is_default(f, x, ver)));
                    if all_default {
                        self.report.records_dropped_silently += 1;
                        return Ok(Action::Drop);
                    }
                    crate::schema::json::message_json(c.schema, ver, &st)
                }
                Err(e) => return Err(codec_err(e, off, fpos, label)),
            };
            let n = self.plan.samples;
            self.report.lose(label, "", || truncate(detail, 200), n);
            return Ok(Action::Drop);
        }
        if self.plan.refuse_unknown {
            self.check_control(ctype, value.unwrap_or(&[]), off, fpos)?;
        }
        Ok(Action::Keep)
    }

    /// A control record kept as it is must be one the tables describe: a known type at a
    /// known version, and a kraft.version level the caller knows.
    fn check_control(&self, ctype: i16, value: &[u8], off: i64, fpos: u64) -> Result<()> {
        let Some(c) = schema::control_schema(ctype) else {
            return Err(refusal(fpos, off, format!("control record type {ctype} is unknown to kraftkit")));
        };
        if value.len() >= 2 {
            let version = i16::from_be_bytes([value[0], value[1]]);
            let v = c.schema.valid_versions;
            if version > v.max {
                return Err(refusal(fpos, off, format!("{} version {version} is newer than kraftkit knows (newest: {})", c.label, v.max)));
            }
        }
        let (_, _, st) = schema::decode_control_record(ctype, value).map_err(|e| codec_err(e, off, fpos, c.label))?;
        if ctype == KRAFT_VERSION {
            if let Some(Value::Int(level)) = st.get("KRaftVersion") {
                let known = self.plan.features.get(KRAFT_VERSION_FEATURE).is_some_and(|m| m.contains_key(&(*level as i16)));
                if *level != 0 && !known {
                    return Err(refusal(fpos, off, self.unknown_level(KRAFT_VERSION_FEATURE, *level)));
                }
            }
        }
        Ok(())
    }

    pub(super) fn data(&mut self, value: Option<&[u8]>, off: i64, fpos: u64) -> Result<Action> {
        let value = value.ok_or_else(|| Error::corrupt(fpos, Some(off), format!("record at offset {off} has a null value")))?;
        let (api_key, version, body_at) = frame(value).map_err(|e| codec_err(e, off, fpos, "metadata record frame"))?;
        let schema = schema::metadata_schema(api_key)
            .ok_or_else(|| Error::new(ErrorKind::Unsupported, format!("Unknown metadata id {api_key}")).at(fpos, Some(off)))?;
        if !schema.valid_versions.contains(version) {
            // never re-encoded by guess: a newer version may mean anything (Kafka refuses to read it too)
            let v = schema.valid_versions;
            return Err(refusal(fpos, off, if version > v.max {
                format!("{} version {version} is newer than kraftkit knows (newest: {})", schema.name, v.max)
            } else {
                format!("{} version {version} is not one kraftkit knows (valid: {})", schema.name, v.to_kafka_string())
            }));
        }
        if api_key == TOPIC_RECORD {
            self.remember_topic(schema, version, &value[body_at..]);
        }
        if api_key == FEATURE_LEVEL_RECORD {
            return self.feature_level(schema, version, value, body_at, off, fpos);
        }
        if api_key == ACL_RECORD && self.plan.drop_cidr_acls {
            let st = codec::decode_message(schema, version, &value[body_at..]).map_err(|e| codec_err(e, off, fpos, schema.name))?;
            if let Some(Value::Str(host)) = st.get("Host") {
                if host.contains('/') {
                    let text = |f: &str| match st.get(f) {
                        Some(Value::Str(v)) => v.clone(),
                        _ => String::from("?"),
                    };
                    let sample = format!("{} from {host} on {}", text("Principal"), text("ResourceName"));
                    let n = self.plan.samples;
                    self.report.lose(schema.name, CIDR_HOST_LOSS, || sample, n);
                    return Ok(Action::Drop);
                }
            }
        }
        let target = match self.plan.versions.get(api_key as usize) {
            None => return Ok(Action::Keep),
            Some(t) => *t,
        };
        let Some(to) = target else {
            return self.drop_record(schema, version, &value[body_at..], off, fpos);
        };
        if version <= to {
            return Ok(Action::Keep);
        }
        self.report.records_rewritten += 1;
        let body = &value[body_at..];
        let start = self.arena.len();
        self.lost_fields.clear();
        self.lost_steps.clear();
        let flexible = schema.flexible_versions.contains(version);
        let splice = if flexible && schema.flexible_versions.contains(to) { self.splice_plan(schema, version, to) } else { None };
        // Some(size) when only the new value's size was worked out (measure_only)
        let mut sized = None;
        let res = match &splice {
            Some(sp) if self.measure_only => {
                let mut n = Count(frame_size(api_key, to));
                let r = splice_struct(sp, body, &mut n, &mut self.lost_steps);
                sized = Some(n.0);
                r
            }
            Some(sp) => {
                write_frame(&mut self.arena, api_key, to);
                splice_struct(sp, body, &mut self.arena, &mut self.lost_steps)
            }
            None => {
                write_frame(&mut self.arena, api_key, to);
                let mut change = Change { record: schema.name, from: version, to, plan: self.plan, lost: &mut self.lost_fields };
                reencode(&mut change, schema, body, &mut self.arena).map(|_| false)
            }
        };
        let unchanged = res.map_err(|e| codec_err(e, off, fpos, schema.name))?;
        if unchanged {
            // only the version differs: patched in place when its varint keeps its size
            self.arena.truncate(start);
            if version < 0x80 && to >= 0 {
                return Ok(Action::SetVersion { at: (body_at - 1) as u32, to: to as u8 });
            }
            write_frame(&mut self.arena, api_key, to);
            self.arena.extend_from_slice(body);
        }
        let end = self.arena.len();
        if let (Some(sp), false) = (&splice, self.lost_steps.is_empty()) {
            // the common lossy case, once per record: loss entries found through the plan's
            // slots (no string work), a sample key decoded only while a loss still wants one
            let n = self.plan.samples;
            let mut wanted = false;
            for &i in &self.lost_steps {
                let slot = &sp.loss_slots[i];
                let idx = match slot.get() {
                    Some(idx) => idx,
                    None => {
                        let name = sp.lost_field(i).name;
                        let idx = match self.report.losses.iter().position(|l| l.record == schema.name && l.field == name) {
                            Some(idx) => idx,
                            None => {
                                self.report.losses.push(Loss { record: schema.name, field: name.to_string(), count: 0, samples: Vec::new() });
                                self.report.losses.len() - 1
                            }
                        };
                        slot.set(Some(idx));
                        idx
                    }
                };
                self.report.losses[idx].count += 1;
                wanted |= self.report.losses[idx].samples.len() < n;
            }
            if wanted {
                let sample = self.sample_key(schema, version, body);
                for &i in &self.lost_steps {
                    let l = &mut self.report.losses[sp.loss_slots[i].get().expect("slot set above")];
                    if l.samples.len() < n && !sample.is_empty() && !l.samples.contains(&sample) {
                        l.samples.push(sample.clone());
                    }
                }
            }
        } else if !self.lost_fields.is_empty() {
            let fields = std::mem::take(&mut self.lost_fields);
            let n = self.plan.samples;
            // a sample key costs a full decode: only while some loss still wants samples
            let wanted = fields.iter().any(|f| !self.report.losses.iter().any(|l| l.record == schema.name && l.field == *f && l.samples.len() >= n));
            let sample = if wanted { self.sample_key(schema, version, body) } else { String::new() };
            for f in &fields {
                self.report.lose(schema.name, f, || sample.clone(), n);
            }
            self.lost_fields = fields;
        }
        Ok(match sized {
            Some(n) => Action::Resized(n),
            None => Action::Replace(start..end),
        })
    }

    fn drop_record(&mut self, schema: &'static MessageSchema, version: i16, body: &[u8], off: i64, fpos: u64) -> Result<Action> {
        let st = codec::decode_message(schema, version, body).map_err(|e| codec_err(e, off, fpos, schema.name))?;
        let all_default = st.unknown_tags.is_empty()
            && schema.body.fields.iter().filter(|f| f.versions.contains(version)).all(|f| st.get(f.name).is_none_or(|x| is_default(f, x, version)));
        if all_default {
            self.report.records_dropped_silently += 1;
        } else {
            let sample = self.key_of(&st);
            let n = self.plan.samples;
            self.report.lose(schema.name, "", || sample, n);
        }
        Ok(Action::Drop)
    }

    fn feature_level(&mut self, schema: &'static MessageSchema, version: i16, value: &[u8], body_at: usize, off: i64, fpos: u64) -> Result<Action> {
        let st = codec::decode_message(schema, version, &value[body_at..]).map_err(|e| codec_err(e, off, fpos, schema.name))?;
        let (Some(Value::Str(name)), Some(Value::Int(level))) = (st.get("Name"), st.get("FeatureLevel")) else {
            return Err(Error::corrupt(fpos, Some(off), format!("record at offset {off}: FeatureLevelRecord without Name/FeatureLevel")));
        };
        let level = *level as i16;
        let map = self.plan.features.get(name.as_str());
        let new = map.and_then(|m| m.get(&level)).copied();
        let Some(new) = new else {
            if self.plan.refuse_unknown && level != 0 {
                return Err(refusal(fpos, off, self.unknown_level(name, level as i64)));
            }
            return Ok(Action::Keep);
        };
        if new == level {
            return Ok(Action::Keep);
        }
        self.report.feature_changes.push(FeatureChange { name: name.clone(), from: level, to: new });
        if new == 0 {
            return Ok(Action::Drop);
        }
        let mut st = st;
        for (n, v) in st.fields.iter_mut() {
            if *n == "FeatureLevel" {
                *v = Value::Int(new as i64);
            }
        }
        let out = schema::encode_metadata_record(FEATURE_LEVEL_RECORD, version, &st).map_err(|e| codec_err(e, off, fpos, schema.name))?;
        self.report.records_rewritten += 1;
        let start = self.arena.len();
        self.arena.extend_from_slice(&out);
        Ok(Action::Replace(start..self.arena.len()))
    }

    /// Why a finalized level is refused: newer than the caller's tables, or not one of theirs.
    fn unknown_level(&self, name: &str, level: i64) -> String {
        let Some(map) = self.plan.features.get(name) else {
            return format!("feature {name} (level {level}) is unknown to kraftkit");
        };
        let top = map.keys().copied().max().unwrap_or(0) as i64;
        let newest = self.plan.newest.get(name).cloned().unwrap_or_else(|| top.to_string());
        if level > top {
            format!("{name} level {level} is newer than kraftkit knows (newest: {newest})")
        } else {
            format!("{name} level {level} is not a level kraftkit knows (newest: {newest})")
        }
    }

    fn remember_topic(&mut self, schema: &'static MessageSchema, version: i16, body: &[u8]) {
        if let Ok(st) = codec::decode_message(schema, version, body) {
            if let (Some(Value::Str(name)), Some(Value::Uuid(id))) = (st.get("Name"), st.get("TopicId")) {
                self.topics.insert(*id, name.clone());
            }
        }
    }

    fn splice_plan(&mut self, m: &'static MessageSchema, from: i16, to: i16) -> Option<Rc<SplicePlan>> {
        let slot = &mut self.splice_plans[m.api_key as usize & 63];
        match slot {
            Some((f, t, plan)) if *f == from && *t == to => plan.clone(),
            _ => {
                let plan = struct_spliceable(m.body, from, to, true).then(|| Rc::new(SplicePlan::new(m.body, from, to, m.name, self.plan)));
                *slot = Some((from, to, plan.clone()));
                plan
            }
        }
    }

    fn sample_key(&self, m: &'static MessageSchema, v: i16, body: &[u8]) -> String {
        match codec::decode_message(m, v, body) {
            Ok(st) => self.key_of(&st),
            Err(_) => String::from("?"),
        }
    }

    /// A short human key for a record: topic-partition, broker or controller id, name...
    fn key_of(&self, st: &Struct) -> String {
        let topic = |id: &[u8; 16]| self.topics.get(id).cloned().unwrap_or_else(|| uuid_text(id));
        if let (Some(Value::Uuid(t)), Some(Value::Int(p))) = (st.get("TopicId"), st.get("PartitionId")) {
            return format!("{}-{p}", topic(t));
        }
        for (field, label) in [("BrokerId", "broker"), ("ControllerId", "controller")] {
            if let Some(Value::Int(id)) = st.get(field) {
                return format!("{label} {id}");
            }
        }
        for field in ["Name", "TopicName", "ResourceName", "TokenId", "Principal"] {
            if let Some(Value::Str(s)) = st.get(field) {
                return s.clone();
            }
        }
        if let Some(Value::Uuid(id)) = st.get("TopicId") {
            return topic(id);
        }
        if let Some(Value::Uuid(id)) = st.get("Id") {
            return uuid_text(id);
        }
        if let Some((name, v)) = st.fields.first() {
            return format!("{name}={}", short(v));
        }
        String::new()
    }
}

fn short(v: &Value) -> String {
    match v {
        Value::Int(i) => i.to_string(),
        Value::Str(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Uuid(u) => uuid_text(u),
        other => truncate(format!("{other:?}"), 60),
    }
}

pub(super) fn truncate(mut s: String, n: usize) -> String {
    if s.len() > n {
        let mut cut = n;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push('…');
    }
    s
}
