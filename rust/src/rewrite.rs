//! Rewriting a KRaft snapshot, record by record, to other record versions: the byte work of
//! metadata.version downgrades (and of upgrades, which only change feature levels).
//!
//! The caller decides the policy in a [`Plan`]: the version each record type is written at
//! (or that it cannot be written at all), what each finalized feature level becomes, and
//! whether the KRaft control records survive. This module streams the snapshot batch by
//! batch, keeps every record it can unchanged (a batch nobody touched is copied verbatim),
//! re-encodes the others, and accounts for everything it could not carry: a field that the
//! target version lacks is dropped silently only when it holds its default; otherwise the
//! loss is counted per record type and field, with sample keys (topic-partition, broker id,
//! name...). A record type the target cannot hold is dropped, silently only when all its
//! fields hold their defaults (a `ZkMigrationStateRecord` in state NONE carries nothing).
//! Unknown is never guessed: a record type or record version the schemas lack is refused, and
//! so, when the plan asks (`refuse_unknown`), are feature levels and control records the
//! caller's tables do not describe.
//!
//! Re-encoding splices bytes where it can (a metadata record's fields keep their encoding
//! across versions, so removing a field is cutting its bytes out and renumbering the tagged
//! section); records whose nested structs change shape between the versions go through the
//! generic decoder and encoder.

use crate::batch::{self, NextBatch, RecordView};
use crate::builder::{self, BatchParams, RawRecord};
#[cfg(test)]
use crate::builder::RecordInput;
use crate::error::{Error, ErrorKind, Result};
use crate::schema::codec::{self, is_default, Reader};
use crate::schema::json::uuid_text;
use crate::schema::types::*;
use crate::schema::{self, CodecError};
use crate::varint::{read_uvarint, size_of_uvarint, write_uvarint};
use std::cell::Cell;
use std::collections::HashMap;
use std::rc::Rc;
use std::io::{Read, Write};

const FEATURE_LEVEL_RECORD: i16 = 12;
const TOPIC_RECORD: i16 = 2;
const SNAPSHOT_HEADER: i16 = 3;
const SNAPSHOT_FOOTER: i16 = 4;
const KRAFT_VERSION: i16 = 5;
const KRAFT_VOTERS: i16 = 6;
const KRAFT_VERSION_FEATURE: &str = "kraft.version";

/// What to do with every record (the policy, decided by the caller).
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// Indexed by api key: the highest version the target can write, or `None` when the target
    /// cannot hold the record type at all. Api keys past the end are kept as they are.
    pub versions: Vec<Option<i16>>,
    /// `FeatureLevelRecord`: feature name -> (old level -> new level); a new level of 0 drops
    /// the record (level 0 means "not finalized"). Levels not in the map are kept.
    pub features: HashMap<String, HashMap<i16, i16>>,
    /// Drop `KRaftVersion` and `KRaftVoters` control records (a target older than KIP-853).
    pub drop_kraft_control: bool,
    /// Values that carry no information although they differ from the schema default, per
    /// (record type name, top-level field name): e.g. a `Directories` list of only `MIGRATING`
    /// (zero) uuids, which Kafka's image writer drops without a loss.
    pub semantic_defaults: Vec<(String, String, SemanticDefault)>,
    /// How many sample keys to keep per loss.
    pub samples: usize,
    /// The snapshot's epoch (from its name): every batch must carry it. None: every batch
    /// must carry the first batch's.
    pub epoch: Option<i32>,
    /// Refuse what the caller's tables do not describe instead of keeping it as it is: a
    /// `FeatureLevelRecord` whose feature is not in `features` or whose level (other than 0)
    /// is not in its map, a `KRaftVersion` control record whose level is not in the map of
    /// `kraft.version`, a control record type without a schema. (A metadata record type or
    /// record version the schemas do not know is always refused.)
    pub refuse_unknown: bool,
    /// Per feature, how the caller names the newest level it knows (`4.3-IV0 = 31`), for the
    /// refusal; absent: the highest level of the feature's map.
    pub newest: HashMap<String, String>,
}

/// A rule saying when a non-default value still carries nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SemanticDefault {
    /// An array whose elements are all the zero uuid (or that is empty or null).
    AllZeroUuids,
    /// An empty or null array.
    Empty,
}

/// Something the target could not carry.
#[derive(Debug, Clone, PartialEq)]
pub struct Loss {
    /// Record type (`PartitionRecord`) or control record label (`KRaftVoters`).
    pub record: &'static str,
    /// The field path (`Directories`, `EndPoints[].SecurityProtocol`), or "" when the whole
    /// record was dropped.
    pub field: String,
    pub count: u64,
    pub samples: Vec<String>,
}

/// A finalized feature level the rewrite changed.
#[derive(Debug, Clone, PartialEq)]
pub struct FeatureChange {
    pub name: String,
    pub from: i16,
    pub to: i16,
}

#[derive(Debug, Clone, Default)]
pub struct Report {
    pub batches_in: u64,
    pub batches_out: u64,
    pub records_in: u64,
    pub records_out: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    /// Records written with a new version (spliced or re-encoded).
    pub records_rewritten: u64,
    /// Records dropped without loss (every field at its default).
    pub records_dropped_silently: u64,
    pub losses: Vec<Loss>,
    pub feature_changes: Vec<FeatureChange>,
}

impl Report {
    fn lose(&mut self, record: &'static str, field: &str, sample: impl FnOnce() -> String, max: usize) {
        let i = match self.losses.iter().position(|l| l.record == record && l.field == field) {
            Some(i) => i,
            None => {
                self.losses.push(Loss { record, field: field.to_string(), count: 0, samples: Vec::new() });
                self.losses.len() - 1
            }
        };
        let l = &mut self.losses[i];
        l.count += 1;
        if l.samples.len() < max {
            let s = sample();
            if !s.is_empty() && !l.samples.contains(&s) {
                l.samples.push(s);
            }
        }
    }
}

/// Per-record outcome. Replacement values live in the rewriter's per-batch arena.
enum Action {
    Keep,
    Drop,
    Replace(std::ops::Range<usize>),
    /// The value unchanged but for its version, a one-byte varint at `at` in the value.
    SetVersion { at: u32, to: u8 },
    /// A new value of this size, not written out (`Rewriter::measure_only`).
    Resized(usize),
}

struct Rewriter<'p> {
    plan: &'p Plan,
    report: Report,
    topics: HashMap<[u8; 16], String>,
    /// Indexed by api key: the splice plan of the last (from, to) seen.
    splice_plans: Vec<Option<CachedPlan>>,
    lost_fields: Vec<String>,
    lost_steps: Vec<usize>,
    /// Replacement record values of the current batch, back to back.
    arena: Vec<u8>,
    /// Work out only the size of spliced values, not their bytes (a dry run of an uncompressed
    /// batch, or a loss report): they come back as `Action::Resized`.
    measure_only: bool,
}

/// Rewrites the snapshot in `input` into `out` (None: a dry run that only reports). The input
/// must be a whole snapshot; every batch's CRC is checked. Output batches keep the input's
/// boundaries, leader epochs and timestamps; offsets are renumbered from 0 when records are
/// dropped. Errors name the byte position and base offset of the batch at fault.
pub fn rewrite(input: &[u8], plan: &Plan, out: Option<&mut dyn Write>) -> Result<Report> {
    run(&mut SliceBatches { data: input, pos: 0 }, plan, out)
}

/// [`rewrite`] reading the snapshot from a stream, one batch at a time: memory holds one input
/// and one output batch, whatever the snapshot's size.
pub fn rewrite_stream(input: &mut dyn Read, plan: &Plan, out: Option<&mut dyn Write>) -> Result<Report> {
    run(&mut ReadBatches { input, buf: Vec::new(), start: 0, end: 0, eof: false }, plan, out)
}

/// Where the batches come from: a stream read batch by batch, or bytes in memory (or mapped).
trait Batches {
    /// The next batch (header, and its bytes from the base offset on) at file position `fpos`,
    /// or None at the end; a torn or corrupt batch is an error naming `fpos`.
    fn next_batch(&mut self, fpos: u64) -> Result<Option<(batch::BatchHeader, &[u8])>>;
}

/// Reads the stream in chunks straight into one buffer and hands out the batches in it (a
/// batch split by a chunk boundary is completed by the next read).
struct ReadBatches<'a> {
    input: &'a mut dyn Read,
    buf: Vec<u8>,
    /// the unread bytes are buf[start..end]
    start: usize,
    end: usize,
    eof: bool,
}

/// Bytes read at a time (the buffer grows only for a larger batch).
const READ_CHUNK: usize = 256 << 10;

impl Batches for ReadBatches<'_> {
    fn next_batch(&mut self, fpos: u64) -> Result<Option<(batch::BatchHeader, &[u8])>> {
        loop {
            let avail = self.end - self.start;
            // the bytes the next batch needs: its header up to the magic byte, then all of it as
            // its length says (a length too small to be a batch is next_batch's to report)
            let need = if avail >= batch::LOG_OVERHEAD {
                let b = &self.buf[self.start..];
                let length = i32::from_be_bytes([b[8], b[9], b[10], b[11]]);
                if length < batch::LEGACY_RECORD_OVERHEAD_V0 { batch::HEADER_SIZE_UP_TO_MAGIC } else { (length as usize + batch::LOG_OVERHEAD).max(batch::HEADER_SIZE_UP_TO_MAGIC) }
            } else {
                batch::HEADER_SIZE_UP_TO_MAGIC
            };
            if avail >= need || self.eof {
                if avail == 0 {
                    return Ok(None);
                }
                // a short tail at the end of the stream: next_batch says how it is torn
                return match batch::next_batch(&self.buf[self.start..self.end], 0, fpos)? {
                    NextBatch::End => Ok(None),
                    NextBatch::Batch(h, r) => {
                        let at = self.start;
                        self.start += r.end;
                        Ok(Some((h, &self.buf[at + r.start..at + r.end])))
                    }
                };
            }
            // room for more: move the partial batch to the front, and grow the buffer only a
            // chunk at a time beyond the bytes read (a corrupt length cannot make it allocate
            // more than the stream holds)
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end = avail;
                self.start = 0;
            }
            let want = need.min(self.end + READ_CHUNK).max(READ_CHUNK);
            if self.buf.len() < want {
                self.buf.resize(want, 0);
            }
            let n = match self.input.read(&mut self.buf[self.end..]) {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(Error::from(e).at(fpos, None)),
            };
            if n == 0 {
                self.eof = true;
            }
            self.end += n;
        }
    }
}

struct SliceBatches<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Batches for SliceBatches<'_> {
    fn next_batch(&mut self, fpos: u64) -> Result<Option<(batch::BatchHeader, &[u8])>> {
        debug_assert_eq!(fpos, self.pos as u64);
        match batch::next_batch(self.data, self.pos, 0)? {
            NextBatch::End => Ok(None),
            NextBatch::Batch(h, r) => {
                self.pos = r.end;
                Ok(Some((h, &self.data[r])))
            }
        }
    }
}

/// Output bytes are gathered up to this size before each write.
const WRITE_CHUNK: usize = 1 << 20;

fn run(src: &mut dyn Batches, plan: &Plan, mut out: Option<&mut dyn Write>) -> Result<Report> {
    let mut rw = Rewriter { plan, report: Report::default(), topics: HashMap::new(), splice_plans: vec![None; 64], lost_fields: Vec::new(), lost_steps: Vec::new(), arena: Vec::new(), measure_only: false };
    let mut fpos = 0u64;
    let mut next_offset: i64 = 0;
    let mut views: Vec<RecordView> = Vec::new();
    // output batches, back to back, written out in chunks of WRITE_CHUNK
    let mut buf: Vec<u8> = Vec::new();
    let mut actions: Vec<Action> = Vec::new();
    let mut expect_in: i64 = 0;
    let mut expect_epoch = plan.epoch;
    let mut footer_seen = false;
    let dry_run = out.is_none();
    while let Some((h, bytes)) = src.next_batch(fpos)? {
        batch::validate(&h, bytes, fpos)?;
        if h.base_offset != expect_in {
            return Err(Error::corrupt(fpos, Some(h.base_offset), format!("batch base offset {} where offset {expect_in} was expected (snapshot offsets start at 0 and are contiguous)", h.base_offset)));
        }
        if h.records_count as i64 != h.last_offset_delta as i64 + 1 {
            return Err(Error::corrupt(fpos, Some(h.base_offset), format!(
                "{} records but a lastOffsetDelta of {} (a snapshot's batches hold one offset per record)",
                h.records_count, h.last_offset_delta)));
        }
        expect_in = h.base_offset + h.last_offset_delta as i64 + 1;
        let epoch = *expect_epoch.get_or_insert(h.partition_leader_epoch);
        if h.partition_leader_epoch != epoch {
            return Err(Error::corrupt(fpos, Some(h.base_offset), format!("batch leader epoch {} differs from the snapshot epoch {epoch}", h.partition_leader_epoch)));
        }
        rw.report.batches_in += 1;
        rw.report.bytes_in += bytes.len() as u64;
        let data = batch::records_data(&h, bytes, fpos)?;
        let d = data.bytes();
        views.clear();
        batch::parse_records(&h, d, fpos, &mut views)?;
        rw.report.records_in += views.len() as u64;

        actions.clear();
        rw.arena.clear();
        // a dry run needs the bytes of new values only to compress them
        rw.measure_only = dry_run && h.codec_id() == 0;
        let mut all_kept = true;
        let mut same_size = true;
        if footer_seen {
            return Err(Error::corrupt(fpos, Some(h.base_offset), "batch after the SnapshotFooter"));
        }
        if rw.report.batches_in == 1 {
            let first = views.first().and_then(|r| r.key.as_ref()).map(|k| &d[k.start as usize..k.end as usize]);
            if !h.is_control() || batch::parse_control_key(first).map(|(_, t)| t) != Ok(SNAPSHOT_HEADER) {
                return Err(Error::corrupt(fpos, Some(h.base_offset), "the snapshot does not start with a SnapshotHeader"));
            }
        }
        if h.is_control() {
            let last = views.last().and_then(|r| r.key.as_ref()).map(|k| &d[k.start as usize..k.end as usize]);
            footer_seen = batch::parse_control_key(last).map(|(_, t)| t) == Ok(SNAPSHOT_FOOTER);
        }
        for r in &views {
            let value = r.value.as_ref().map(|v| &d[v.start as usize..v.end as usize]);
            let key = r.key.as_ref().map(|k| &d[k.start as usize..k.end as usize]);
            let off = h.base_offset + r.offset_delta as i64;
            let a = if h.is_control() { rw.control(key, value, off, fpos)? } else { rw.data(value, off, fpos)? };
            match &a {
                Action::Keep => {}
                Action::SetVersion { .. } => all_kept = false,
                Action::Drop => {
                    all_kept = false;
                    same_size = false;
                }
                Action::Replace(v) => {
                    all_kept = false;
                    same_size &= r.value.as_ref().is_some_and(|x| (x.end - x.start) as usize == v.len());
                }
                Action::Resized(n) => {
                    all_kept = false;
                    same_size &= r.value.as_ref().is_some_and(|x| (x.end - x.start) as usize == *n);
                }
            }
            actions.push(a);
        }
        let kept = actions.iter().filter(|a| !matches!(a, Action::Drop)).count();
        fpos += bytes.len() as u64;
        if kept == 0 {
            continue;
        }
        rw.report.batches_out += 1;
        rw.report.records_out += kept as u64;
        let at = buf.len();
        if all_kept && h.codec_id() == 0 {
            // untouched: the same bytes at the new base offset (outside the CRC)
            rw.report.bytes_out += bytes.len() as u64;
            if !dry_run {
                buf.extend_from_slice(&next_offset.to_be_bytes());
                buf.extend_from_slice(&bytes[8..]);
            }
        } else if h.codec_id() == 0 && same_size {
            // every new value has the length of the old one (e.g. only the version in the
            // frame changed): patch them into a copy of the batch and recompute its CRC
            rw.report.bytes_out += bytes.len() as u64;
            if !dry_run {
                buf.extend_from_slice(bytes);
                let b = &mut buf[at..];
                for (r, a) in views.iter().zip(&actions) {
                    let Some(x) = r.value.as_ref() else { continue };
                    let start = batch::RECORD_BATCH_OVERHEAD + x.start as usize;
                    match a {
                        Action::Replace(v) => b[start..start + v.len()].copy_from_slice(&rw.arena[v.clone()]),
                        Action::SetVersion { at, to } => b[start + *at as usize] = *to,
                        Action::Resized(_) => unreachable!("sizes only in dry runs"),
                        Action::Keep | Action::Drop => {}
                    }
                }
                builder::set_base_offset(b, next_offset);
                let crc = batch::compute_crc(b);
                b[batch::CRC_OFFSET..batch::CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
            }
        } else {
            // batches that change size are built anew: the kept records carried over (new
            // values, headers as they were), offsets renumbered, timestamps kept; a version
            // patch becomes a patched copy
            for (r, a) in views.iter().zip(actions.iter_mut()) {
                if let (Action::SetVersion { at, to }, Some(v)) = (&*a, r.value.as_ref()) {
                    let s = rw.arena.len();
                    rw.arena.extend_from_slice(&d[v.start as usize..v.end as usize]);
                    rw.arena[s + *at as usize] = *to;
                    *a = Action::Replace(s..rw.arena.len());
                }
            }
            let raw = |(r, a): (&RecordView, &Action)| -> Option<RawRecord> {
                let slice = |x: &std::ops::Range<u32>| &d[x.start as usize..x.end as usize];
                let value = match a {
                    Action::Drop => return None,
                    Action::Replace(v) => Some(&rw.arena[v.clone()]),
                    Action::Keep => r.value.as_ref().map(slice),
                    Action::SetVersion { .. } => unreachable!("patched into the arena above"),
                    Action::Resized(_) => unreachable!("sizes only when measuring"),
                };
                Some(RawRecord { timestamp: h.base_timestamp + r.timestamp_delta, key: r.key.as_ref().map(slice), value, header_count: r.header_count, headers: slice(&r.headers) })
            };
            let records = || views.iter().zip(&actions).filter_map(raw);
            let base = views.iter().zip(&actions).find(|(_, a)| !matches!(a, Action::Drop)).map_or(-1, |(r, _)| h.base_timestamp + r.timestamp_delta);
            if rw.measure_only {
                // the size it would have is enough
                let mut size = batch::RECORD_BATCH_OVERHEAD;
                let mut i = 0i32;
                for (r, a) in views.iter().zip(&actions) {
                    let len = |x: &std::ops::Range<u32>| (x.end - x.start) as usize;
                    let value = match a {
                        Action::Drop => continue,
                        Action::Resized(n) => Some(*n),
                        Action::Replace(v) => Some(v.len()),
                        Action::Keep | Action::SetVersion { .. } => r.value.as_ref().map(len),
                    };
                    let ts = h.base_timestamp + r.timestamp_delta;
                    size += builder::record_size(i, ts.wrapping_sub(base), r.key.as_ref().map(len), value, r.header_count, len(&r.headers));
                    i += 1;
                }
                rw.report.bytes_out += size as u64;
            } else {
                let params = BatchParams {
                    base_offset: next_offset,
                    partition_leader_epoch: h.partition_leader_epoch,
                    producer_id: h.producer_id,
                    producer_epoch: h.producer_epoch,
                    base_sequence: h.base_sequence,
                    transactional: h.is_transactional(),
                    control: h.is_control(),
                    log_append_time: h.is_log_append_time(),
                    codec: h.codec().unwrap_or(crate::compression::Codec::None),
                    ..BatchParams::default()
                };
                builder::encode_batch_with(&params, kept, base, h.max_timestamp, d.len(), &mut buf, |out| {
                    for (i, r) in records().enumerate() {
                        r.write(out, i as i32, r.timestamp.wrapping_sub(base));
                    }
                })
                .map_err(|e| e.at(fpos, Some(h.base_offset)))?;
                rw.report.bytes_out += (buf.len() - at) as u64;
                if dry_run {
                    buf.truncate(at); // compressed: its size is known once encoded
                }
            }
        }
        next_offset += kept as i64;
        if buf.len() >= WRITE_CHUNK {
            if let Some(w) = out.as_mut() {
                w.write_all(&buf)?;
            }
            buf.clear();
        }
    }
    if rw.report.batches_in == 0 {
        return Err(Error::new(ErrorKind::Corrupt, "empty snapshot: no batches"));
    }
    if !footer_seen {
        return Err(Error::new(ErrorKind::Truncated, "no SnapshotFooter at the end: the snapshot is incomplete").at(fpos, None));
    }
    if let Some(w) = out.as_mut() {
        w.write_all(&buf)?;
    }
    Ok(rw.report)
}

/// Input the tables do not describe, refused rather than guessed at.
fn refusal(fpos: u64, off: i64, why: String) -> Error {
    Error::new(ErrorKind::Unsupported, format!("record at offset {off}: {why}; refusing to rewrite")).at(fpos, Some(off))
}

fn codec_err(e: CodecError, off: i64, fpos: u64, what: &str) -> Error {
    Error::corrupt(fpos, Some(off), format!("record at offset {off}: {what}: {e}"))
}

impl Rewriter<'_> {
    fn control(&mut self, key: Option<&[u8]>, value: Option<&[u8]>, off: i64, fpos: u64) -> Result<Action> {
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

    fn data(&mut self, value: Option<&[u8]>, off: i64, fpos: u64) -> Result<Action> {
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

fn truncate(mut s: String, n: usize) -> String {
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

/// Parses the `ApiMessageAndVersion` frame: (api key, version, where the body starts).
fn frame(value: &[u8]) -> std::result::Result<(i16, i16, usize), CodecError> {
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
fn frame_size(api_key: i16, version: i16) -> usize {
    1 + size_of_uvarint(api_key as u32) + size_of_uvarint(version as u32)
}

/// Where a splice puts the new value: its bytes, or only their count.
trait Sink {
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
struct Count(usize);

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

fn write_frame(out: &mut Vec<u8>, api_key: i16, version: i16) {
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
fn struct_spliceable(s: &'static StructSchema, from: i16, to: i16, top: bool) -> bool {
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

fn semantic_default(record: &str, f: &Field, val: &Value, plan: &Plan) -> bool {
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
struct Change<'a> {
    /// the record type's name (for the plan's semantic defaults)
    record: &'a str,
    from: i16,
    to: i16,
    plan: &'a Plan,
    lost: &'a mut Vec<String>,
}

/// Whether the encoded array `raw` of field `f` carries nothing (empty, null with a null default,
/// or all-zero uuids under that semantic rule), judged from the bytes alone; None when the
/// field is not such an array (the caller decodes it).
fn quick_carries_nothing(f: &Field, raw: &[u8], compact: bool, rule: Option<SemanticDefault>) -> Option<bool> {
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
type CachedPlan = (i16, i16, Option<Rc<SplicePlan>>);

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
struct SplicePlan {
    from: i16,
    steps: Vec<SpliceStep>,
    /// tags of fields the source version has (tagged) and the target does not, with their rule
    dropped_tags: Vec<(u32, &'static Field, Option<SemanticDefault>)>,
    /// per lost field (steps, then dropped tags): its entry in the report's losses, once known
    loss_slots: Vec<Cell<Option<usize>>>,
    /// the target version has every non-tagged field of the source
    keeps_all: bool,
}

impl SplicePlan {
    fn new(s: &'static StructSchema, from: i16, to: i16, record: &str, plan: &Plan) -> Self {
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
    fn lost_field(&self, i: usize) -> &'static Field {
        if i < self.steps.len() { self.steps[i].field } else { self.dropped_tags[i - self.steps.len()].1 }
    }
}

/// Writes the top-level struct `body` (version `from`) at version `to` by copying the bytes of
/// the fields both versions have and cutting out the others (recording the non-default ones).
/// The fields it loses (non-default values the target cannot carry) go to `lost` as indices
/// into the plan (see [`SplicePlan::lost_field`]).
/// Returns true, having written nothing, when the body is the same at `to` (every field kept
/// and no dropped tag present).
fn splice_struct(sp: &SplicePlan, body: &[u8], out: &mut impl Sink, lost: &mut Vec<usize>) -> std::result::Result<bool, CodecError> {
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
fn reencode(c: &mut Change, m: &'static MessageSchema, body: &[u8], out: &mut Vec<u8>) -> std::result::Result<(), CodecError> {
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

/// What single records would lose under a plan, one at a time (the rewrite's judgement, without
/// a snapshot around them): for the Spark UDF over record values read anywhere.
pub struct RecordLosses<'p> {
    rw: Rewriter<'p>,
    /// Loss counts before the current record (the report accumulates: splice plans cache
    /// indexes into it, so it is never cleared; a record's losses are the counts that grew).
    before: Vec<u64>,
}

impl<'p> RecordLosses<'p> {
    pub fn new(plan: &'p Plan) -> Self {
        RecordLosses {
            rw: Rewriter { plan, report: Report::default(), topics: HashMap::new(), splice_plans: vec![None; 64], lost_fields: Vec::new(), lost_steps: Vec::new(), arena: Vec::new(), measure_only: true },
            before: Vec::new(),
        }
    }

    fn grown(&mut self) -> Vec<(&'static str, String)> {
        let before = &self.before;
        self.rw.report.losses.iter().enumerate().filter(|(i, l)| l.count > before.get(*i).copied().unwrap_or(0)).map(|(_, l)| (l.record, l.field.clone())).collect()
    }

    fn start(&mut self) {
        self.before.clear();
        self.before.extend(self.rw.report.losses.iter().map(|l| l.count));
        self.rw.arena.clear();
    }

    /// The losses of one metadata record value (frame + body): (record type, field) pairs,
    /// the field "" when the whole record would be dropped; empty when nothing is lost.
    pub fn data(&mut self, value: &[u8]) -> Result<Vec<(&'static str, String)>> {
        self.start();
        self.rw.data(Some(value), 0, 0)?;
        Ok(self.grown())
    }

    /// The losses of one control record (key and value).
    pub fn control(&mut self, key: Option<&[u8]>, value: Option<&[u8]>) -> Result<Vec<(&'static str, String)>> {
        self.start();
        self.rw.control(key, value, 0, 0)?;
        Ok(self.grown())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{encode_metadata_record, metadata_schema_by_name};

    fn rec(name: &str, v: i16, fields: Vec<(&'static str, Value)>) -> Vec<u8> {
        let m = metadata_schema_by_name(name).unwrap();
        let mut st = codec::default_struct(m.body, v);
        for (n, val) in fields {
            let slot = st.fields.iter_mut().find(|(k, _)| *k == n).unwrap();
            slot.1 = val;
        }
        encode_metadata_record(m.api_key, v, &st).unwrap()
    }

    /// A snapshot: a SnapshotHeader batch, one data batch per group, a SnapshotFooter batch.
    fn snapshot_of(groups: &[&[Vec<u8>]]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut offset = 0i64;
        let control = |out: &mut Vec<u8>, offset: i64, t: i16, value: Vec<u8>| {
            let key = crate::snapshot::control_key(t);
            let r = RecordInput { timestamp: 5, key: Some(&key), value: Some(&value), headers: vec![] };
            builder::encode_batch(&BatchParams { base_offset: offset, partition_leader_epoch: 3, control: true, ..Default::default() }, &[r], out).unwrap();
        };
        control(&mut out, offset, SNAPSHOT_HEADER, crate::snapshot::header_value(5));
        offset += 1;
        for g in groups {
            let inputs: Vec<RecordInput> = g.iter().map(|r| RecordInput { timestamp: 5, key: None, value: Some(r), headers: vec![] }).collect();
            builder::encode_batch(&BatchParams { base_offset: offset, partition_leader_epoch: 3, ..Default::default() }, &inputs, &mut out).unwrap();
            offset += g.len() as i64;
        }
        control(&mut out, offset, SNAPSHOT_FOOTER, crate::snapshot::footer_value());
        out
    }

    fn snapshot(records: &[Vec<u8>]) -> Vec<u8> {
        snapshot_of(&[records])
    }

    fn decode_all(buf: &[u8]) -> Vec<(i16, i16, Struct)> {
        let mut pos = 0;
        let mut out = vec![];
        let mut views = vec![];
        while let NextBatch::Batch(h, r) = batch::next_batch(buf, pos, 0).unwrap() {
            let b = &buf[r.clone()];
            batch::validate(&h, b, 0).unwrap();
            let d = batch::records_data(&h, b, 0).unwrap();
            views.clear();
            batch::parse_records(&h, d.bytes(), 0, &mut views).unwrap();
            for v in views.iter().filter(|_| !h.is_control()) {
                let val = &d.bytes()[v.value.clone().unwrap().start as usize..v.value.clone().unwrap().end as usize];
                let m = schema::decode_metadata_record(val).unwrap();
                out.push((m.schema.api_key, m.version, m.data));
            }
            pos = r.end;
        }
        out
    }

    fn plan_to(versions: &[(i16, Option<i16>)]) -> Plan {
        let mut p = Plan { versions: vec![Some(i16::MAX); 64], samples: 3, ..Default::default() };
        p.semantic_defaults.push(("PartitionRecord".into(), "Directories".into(), SemanticDefault::AllZeroUuids));
        for (k, v) in versions {
            p.versions[*k as usize] = *v;
        }
        p
    }

    #[test]
    fn partition_record_v2_to_v0_splices_and_counts_losses() {
        let topic = rec("TopicRecord", 0, vec![("Name", Value::Str("orders".into())), ("TopicId", Value::Uuid([7; 16]))]);
        let zero_dirs = rec("PartitionRecord", 2, vec![
            ("PartitionId", Value::Int(0)), ("TopicId", Value::Uuid([7; 16])),
            ("Replicas", Value::Array(vec![Value::Int(1), Value::Int(2)])),
            ("Directories", Value::Array(vec![Value::Uuid([0; 16]), Value::Uuid([0; 16])])),
        ]);
        let real_dirs = rec("PartitionRecord", 2, vec![
            ("PartitionId", Value::Int(1)), ("TopicId", Value::Uuid([7; 16])),
            ("Replicas", Value::Array(vec![Value::Int(1)])),
            ("Directories", Value::Array(vec![Value::Uuid([9; 16])])),
            ("EligibleLeaderReplicas", Value::Array(vec![Value::Int(2)])),
        ]);
        let input = snapshot(&[topic.clone(), zero_dirs, real_dirs]);
        let rep = rewrite(&input, &plan_to(&[(3, Some(0))]), None).unwrap();
        assert_eq!(rep.records_rewritten, 2);
        let fields: Vec<(&str, u64, Vec<String>)> = rep.losses.iter().map(|l| (l.field.as_str(), l.count, l.samples.clone())).collect();
        assert_eq!(fields, vec![("Directories", 1, vec!["orders-1".to_string()]), ("EligibleLeaderReplicas", 1, vec!["orders-1".to_string()])]);

        let mut out = Vec::new();
        rewrite(&input, &plan_to(&[(3, Some(0))]), Some(&mut out)).unwrap();
        let recs = decode_all(&out);
        assert_eq!(recs.len(), 3);
        assert_eq!((recs[1].0, recs[1].1), (3, 0));
        // the spliced bytes equal what the encoder writes at v0 for the same surviving fields
        let mut expect = recs[2].2.clone();
        expect.fields.retain(|(n, _)| metadata_schema_by_name("PartitionRecord").unwrap().body.fields.iter().any(|f| f.name == *n && f.versions.contains(0)));
        assert_eq!(recs[2].2, expect);
        assert_eq!(recs[2].2.get("Replicas"), Some(&Value::Array(vec![Value::Int(1)])));
    }

    #[test]
    fn quick_default_check_agrees_with_decoding() {
        let m = metadata_schema_by_name("PartitionRecord").unwrap();
        let dirs = m.body.fields.iter().find(|f| f.name == "Directories").unwrap();
        let elr = m.body.fields.iter().find(|f| f.name == "EligibleLeaderReplicas").unwrap();
        let with_rule = plan_to(&[]);
        let mut no_rule = plan_to(&[]);
        no_rule.semantic_defaults.clear();
        let uuids = |us: &[[u8; 16]]| Value::Array(us.iter().map(|u| Value::Uuid(*u)).collect());
        let cases = [
            (dirs, uuids(&[])), (dirs, uuids(&[[0; 16]])), (dirs, uuids(&[[0; 16], [0; 16]])),
            (dirs, uuids(&[[0; 16], [3; 16]])), (dirs, uuids(&[[5; 16]])),
            (elr, Value::Null), (elr, Value::Array(vec![])), (elr, Value::Array(vec![Value::Int(1)])),
        ];
        for plan in [&with_rule, &no_rule] {
            for (f, val) in &cases {
                let mut raw = Vec::new();
                codec::write_value_for_test(&mut raw, f, 2, val).unwrap();
                let rule = plan.semantic_defaults.iter().find(|(r, n, _)| r == "PartitionRecord" && n == f.name).map(|x| x.2);
                let quick = quick_carries_nothing(f, &raw, true, rule);
                let slow = is_default(f, val, 2) || semantic_default("PartitionRecord", f, val, plan);
                assert_eq!(quick, Some(slow), "{} = {val:?}", f.name);
            }
        }
    }

    #[test]
    fn splice_equals_generic_reencode() {
        let r = rec("RegisterBrokerRecord", 4, vec![
            ("BrokerId", Value::Int(3)), ("Rack", Value::Str("r1".into())),
            ("LogDirs", Value::Array(vec![Value::Uuid([1; 16])])),
        ]);
        let m = metadata_schema_by_name("RegisterBrokerRecord").unwrap();
        let (_, v, at) = frame(&r).unwrap();
        for to in 0..v {
            let plan = plan_to(&[]);
            let (mut a, mut b) = (Vec::new(), Vec::new());
            let (mut la, mut lb) = (Vec::new(), Vec::new());
            if struct_spliceable(m.body, v, to, true) {
                let sp = SplicePlan::new(m.body, v, to, m.name, &plan);
                let mut steps = Vec::new();
                if splice_struct(&sp, &r[at..], &mut a, &mut steps).unwrap() {
                    assert!(a.is_empty());
                    a.extend_from_slice(&r[at..]); // unchanged: the same body
                }
                la.extend(steps.iter().map(|&i| sp.lost_field(i).name.to_string()));
                reencode(&mut Change { record: m.name, from: v, to, plan: &plan, lost: &mut lb }, m, &r[at..], &mut b).unwrap();
                assert_eq!(a, b, "version {v} -> {to}");
                assert_eq!(la, lb);
            }
        }
    }

    #[test]
    fn dropped_types_features_and_untouched_batches() {
        let mv = rec("FeatureLevelRecord", 0, vec![("Name", Value::Str("metadata.version".into())), ("FeatureLevel", Value::Int(30))]);
        let gv = rec("FeatureLevelRecord", 0, vec![("Name", Value::Str("group.version".into())), ("FeatureLevel", Value::Int(1))]);
        let zk_none = rec("ZkMigrationStateRecord", 0, vec![]);
        let scram = rec("UserScramCredentialRecord", 0, vec![("Name", Value::Str("alice".into())), ("Mechanism", Value::Int(1))]);
        let cfg = rec("ConfigRecord", 0, vec![("ResourceType", Value::Int(2)), ("ResourceName", Value::Str("t".into())), ("Name", Value::Str("k".into())), ("Value", Value::Str("v".into()))]);
        let input = snapshot_of(&[&[mv, gv, zk_none, scram], std::slice::from_ref(&cfg)]);
        let untouched = {
            // the config batch as it sits in the input (the third batch)
            let mut pos = 0;
            let mut found = Vec::new();
            for i in 0..3 {
                if let NextBatch::Batch(_, r) = batch::next_batch(&input, pos, 0).unwrap() {
                    if i == 2 {
                        found = input[r.clone()].to_vec();
                    }
                    pos = r.end;
                }
            }
            found
        };
        let mut plan = plan_to(&[(21, None), (11, None)]);
        plan.features.insert("metadata.version".into(), HashMap::from([(30, 7)]));
        plan.features.insert("group.version".into(), HashMap::from([(1, 0)]));
        let mut out = Vec::new();
        let rep = rewrite(&input, &plan, Some(&mut out)).unwrap();
        assert_eq!(rep.feature_changes, vec![
            FeatureChange { name: "metadata.version".into(), from: 30, to: 7 },
            FeatureChange { name: "group.version".into(), from: 1, to: 0 },
        ]);
        assert_eq!(rep.records_dropped_silently, 1);
        assert_eq!(rep.losses.len(), 1);
        assert_eq!((rep.losses[0].record, rep.losses[0].samples[0].as_str()), ("UserScramCredentialRecord", "alice"));
        let recs = decode_all(&out);
        assert_eq!(recs.len(), 2);
        assert_eq!(recs[0].2.get("FeatureLevel"), Some(&Value::Int(7)));
        // the config batch was copied verbatim, moved from offset 5 to offset 2: only the
        // header and the metadata.version record come before it now
        let at = out.windows(untouched.len() - 8).position(|w| w == &untouched[8..]).expect("config batch copied verbatim") - 8;
        assert_eq!(i64::from_be_bytes(out[at..at + 8].try_into().unwrap()), 2);
    }

    #[test]
    fn corrupt_input_is_an_error_with_position() {
        let cfg = rec("ConfigRecord", 0, vec![("Name", Value::Str("k".into()))]);
        let mut input = snapshot(&[cfg]);
        let n = input.len();
        input[n - 3] ^= 0xff;
        let e = rewrite(&input, &plan_to(&[]), None).unwrap_err();
        assert!(e.reason.contains("CRC"), "{e:?}");
        assert!(e.position.is_some());
        let e = rewrite(&input[..n - 5], &plan_to(&[]), None).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Truncated);
        // whole batches, but no footer: incomplete
        let good = snapshot(&[rec("ConfigRecord", 0, vec![("Name", Value::Str("k".into()))])]);
        let mut pos = 0;
        for _ in 0..2 {
            if let NextBatch::Batch(_, r) = batch::next_batch(&good, pos, 0).unwrap() {
                pos = r.end;
            }
        }
        let e = rewrite(&good[..pos], &plan_to(&[]), None).unwrap_err();
        assert!(e.reason.contains("SnapshotFooter"), "{e:?}");
        assert_eq!(e.kind, ErrorKind::Truncated);
    }

    /// A reader handing out at most a few bytes per call.
    struct Trickle<'a>(&'a [u8], usize);

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            self.1 = self.1 % 7 + 1;
            let n = self.1.min(buf.len()).min(self.0.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    #[test]
    fn streamed_input_matches_in_memory_input_across_read_boundaries() {
        // ~1 MB: batches straddle the reader's chunks; some batches change size, some only
        // their version, some nothing
        let mut groups: Vec<Vec<Vec<u8>>> = Vec::new();
        for t in 0..400u32 {
            let tid = Value::Uuid([(t % 251) as u8 + 1; 16]);
            let mut g = vec![rec("TopicRecord", 0, vec![("Name", Value::Str(format!("t{t}"))), ("TopicId", tid.clone())])];
            for p in 0..20 {
                let dirs = if t % 3 == 0 { vec![Value::Uuid([0; 16]); 3] } else { vec![Value::Uuid([9; 16]); 3] };
                g.push(rec("PartitionRecord", 2, vec![("PartitionId", Value::Int(p)), ("TopicId", tid.clone()),
                    ("Replicas", Value::Array(vec![Value::Int(1), Value::Int(2), Value::Int(3)])), ("Directories", Value::Array(dirs))]));
            }
            groups.push(g);
        }
        let refs: Vec<&[Vec<u8>]> = groups.iter().map(|g| &g[..]).collect();
        let input = snapshot_of(&refs);
        assert!(input.len() > 3 * READ_CHUNK);
        for plan in [plan_to(&[]), plan_to(&[(3, Some(1))]), plan_to(&[(3, Some(0))])] {
            let mut a = Vec::new();
            let ra = rewrite(&input, &plan, Some(&mut a)).unwrap();
            for chunked in [true, false] {
                let mut b = Vec::new();
                let rb = if chunked {
                    rewrite_stream(&mut &input[..], &plan, Some(&mut b)).unwrap()
                } else {
                    rewrite_stream(&mut Trickle(&input, 0), &plan, Some(&mut b)).unwrap()
                };
                assert_eq!(a, b);
                assert_eq!(ra.losses, rb.losses);
                assert_eq!((ra.bytes_out, ra.records_out), (rb.bytes_out, rb.records_out));
            }
            // the dry run counts the bytes it would write
            let dry = rewrite(&input, &plan, None).unwrap();
            assert_eq!(dry.bytes_out as usize, a.len());
            assert_eq!(dry.losses, ra.losses);
        }
        // cut anywhere: the same error either way
        for cut in [5usize, 16, 17, 100, READ_CHUNK - 3, READ_CHUNK + 61, input.len() - 1] {
            let e1 = rewrite(&input[..cut], &plan_to(&[]), None).unwrap_err();
            let e2 = rewrite_stream(&mut Trickle(&input[..cut], 0), &plan_to(&[]), None).unwrap_err();
            assert_eq!((e1.kind, e1.position, &e1.reason), (e2.kind, e2.position, &e2.reason), "cut at {cut}");
        }
    }

    #[test]
    fn a_huge_declared_batch_length_allocates_only_what_the_stream_holds() {
        let mut input = snapshot(&[rec("ConfigRecord", 0, vec![("Name", Value::Str("k".into()))])]);
        input[8..12].copy_from_slice(&i32::MAX.to_be_bytes());
        let mut src = ReadBatches { input: &mut &input[..], buf: Vec::new(), start: 0, end: 0, eof: false };
        let e = src.next_batch(0).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Truncated, "{e:?}");
        assert!(src.buf.len() <= 2 * READ_CHUNK, "buffer grew to {}", src.buf.len());
    }

    #[test]
    fn record_headers_survive_a_rebuilt_batch() {
        let pr = rec("PartitionRecord", 2, vec![("PartitionId", Value::Int(1)), ("Directories", Value::Array(vec![Value::Uuid([9; 16])]))]);
        let mut input = snapshot_of(&[]);
        // between the header and the footer, a data batch whose record has a header
        let NextBatch::Batch(_, first) = batch::next_batch(&input, 0, 0).unwrap() else { panic!() };
        let footer = input[first.end..].to_vec();
        input.truncate(first.end);
        let r = RecordInput { timestamp: 5, key: None, value: Some(&pr), headers: vec![(&b"h"[..], Some(&b"v"[..]))] };
        builder::encode_batch(&BatchParams { base_offset: 1, partition_leader_epoch: 3, ..Default::default() }, &[r], &mut input).unwrap();
        let mut footer = footer;
        builder::set_base_offset(&mut footer, 2);
        input.extend_from_slice(&footer);
        let mut out = Vec::new();
        let rep = rewrite(&input, &plan_to(&[(3, Some(0))]), Some(&mut out)).unwrap();
        assert_eq!(rep.records_rewritten, 1);
        let NextBatch::Batch(_, r0) = batch::next_batch(&out, 0, 0).unwrap() else { panic!() };
        let NextBatch::Batch(h, r1) = batch::next_batch(&out, r0.end, 0).unwrap() else { panic!() };
        let b = &out[r1];
        let data = batch::records_data(&h, b, 0).unwrap();
        let mut views = Vec::new();
        batch::parse_records(&h, data.bytes(), 0, &mut views).unwrap();
        let hv = batch::read_headers(data.bytes(), &views[0]);
        assert_eq!(hv.len(), 1);
        assert_eq!(&data.bytes()[hv[0].key.start as usize..hv[0].key.end as usize], b"h");
    }

    #[test]
    fn dry_run_sizes_rebuilt_batches_exactly() {
        // the first record dropped (the base timestamp moves), timestamps far apart, a header
        let topic = rec("TopicRecord", 0, vec![("Name", Value::Str("t".into())), ("TopicId", Value::Uuid([4; 16]))]);
        let pr = rec("PartitionRecord", 2, vec![("PartitionId", Value::Int(1)), ("Directories", Value::Array(vec![Value::Uuid([9; 16])]))]);
        let mut input = snapshot_of(&[]);
        let NextBatch::Batch(_, first) = batch::next_batch(&input, 0, 0).unwrap() else { panic!() };
        let mut footer = input[first.end..].to_vec();
        input.truncate(first.end);
        let recs = [
            RecordInput { timestamp: 100, key: None, value: Some(&topic), headers: vec![] },
            RecordInput { timestamp: 5, key: Some(&b"k"[..]), value: Some(&pr), headers: vec![(&b"h"[..], None)] },
            RecordInput { timestamp: 1_000_000_000_000, key: None, value: Some(&pr), headers: vec![] },
        ];
        builder::encode_batch(&BatchParams { base_offset: 1, partition_leader_epoch: 3, ..Default::default() }, &recs, &mut input).unwrap();
        builder::set_base_offset(&mut footer, 4);
        input.extend_from_slice(&footer);
        for (plan, pr_version) in [(plan_to(&[(2, None), (3, Some(0))]), 0), (plan_to(&[(2, None)]), 2), (plan_to(&[(3, Some(1))]), 1), (plan_to(&[(2, None), (3, Some(1))]), 1)] {
            let mut out = Vec::new();
            let written = rewrite(&input, &plan, Some(&mut out)).unwrap();
            let dry = rewrite(&input, &plan, None).unwrap();
            assert_eq!(dry.bytes_out as usize, out.len());
            assert_eq!(written.bytes_out as usize, out.len());
            assert_eq!((dry.records_out, dry.losses.len()), (written.records_out, written.losses.len()));
            let versions: Vec<(i16, i16)> = decode_all(&out).into_iter().map(|(k, v, _)| (k, v)).collect();
            assert!(versions.iter().all(|&(k, v)| k != 3 || v == pr_version), "{versions:?}");
            assert_eq!(versions.iter().filter(|(k, _)| *k == 3).count(), 2);
        }
    }

    #[test]
    fn a_record_version_above_the_schema_is_refused_never_spliced() {
        // PartitionRecord at the version above the newest its schema knows, body of the newest
        let m = metadata_schema_by_name("PartitionRecord").unwrap();
        let top = m.valid_versions.max;
        let mut newer = rec("PartitionRecord", top, vec![("PartitionId", Value::Int(1))]);
        assert_eq!(&newer[..3], &[1, m.api_key as u8, top as u8]);
        newer[2] = (top + 1) as u8;
        let input = snapshot(&[newer.clone()]);
        for plan in [plan_to(&[(m.api_key, Some(0))]), plan_to(&[])] {
            let e = rewrite(&input, &plan, None).unwrap_err();
            assert_eq!(e.kind, ErrorKind::Unsupported);
            assert!(e.reason.contains(&format!("PartitionRecord version {} is newer than kraftkit knows (newest: {top}); refusing to rewrite", top + 1)), "{}", e.reason);
            assert_eq!(e.offset, Some(1));
        }
        // the Spark judgement of single records refuses it the same way
        let plan = plan_to(&[(m.api_key, Some(0))]);
        assert!(RecordLosses::new(&plan).data(&newer).is_err());
    }

    #[test]
    fn unknown_feature_levels_are_refused_when_asked_kept_otherwise() {
        let lvl = |name: &str, l: i64| rec("FeatureLevelRecord", 0, vec![("Name", Value::Str(name.into())), ("FeatureLevel", Value::Int(l))]);
        let mut plan = plan_to(&[]);
        plan.features.insert("metadata.version".into(), HashMap::from([(30, 7), (31, 7)]));
        plan.newest.insert("metadata.version".into(), "4.4-IV0 = 31".into());
        plan.features.insert("group.version".into(), HashMap::from([(1, 1)]));
        for (input, want) in [
            (snapshot(&[lvl("metadata.version", 32)]), "metadata.version level 32 is newer than kraftkit knows (newest: 4.4-IV0 = 31); refusing to rewrite"),
            (snapshot(&[lvl("metadata.version", 31), lvl("group.version", 2)]), "group.version level 2 is newer than kraftkit knows (newest: 1); refusing to rewrite"),
            (snapshot(&[lvl("metadata.version", 31), lvl("nova.version", 1)]), "feature nova.version (level 1) is unknown to kraftkit; refusing to rewrite"),
        ] {
            plan.refuse_unknown = false;
            rewrite(&input, &plan, None).unwrap();
            plan.refuse_unknown = true;
            let e = rewrite(&input, &plan, None).unwrap_err();
            assert_eq!(e.kind, ErrorKind::Unsupported);
            assert!(e.reason.contains(want), "{}", e.reason);
        }
        // level 0 (not finalized) is not a level to know
        let rep = rewrite(&snapshot(&[lvl("metadata.version", 31), lvl("group.version", 0)]), &plan, None).unwrap();
        assert_eq!(rep.feature_changes, vec![FeatureChange { name: "metadata.version".into(), from: 31, to: 7 }]);
    }

    #[test]
    fn unknown_control_records_are_refused_when_asked() {
        let mut plan = plan_to(&[]);
        plan.refuse_unknown = true;
        plan.features.insert(KRAFT_VERSION_FEATURE.into(), HashMap::from([(1, 1)]));
        let with_control = |t: i16, value: Vec<u8>| {
            let mut input = snapshot_of(&[]);
            let NextBatch::Batch(_, first) = batch::next_batch(&input, 0, 0).unwrap() else { panic!() };
            let mut footer = input[first.end..].to_vec();
            input.truncate(first.end);
            let key = crate::snapshot::control_key(t);
            let r = RecordInput { timestamp: 5, key: Some(&key), value: Some(&value), headers: vec![] };
            builder::encode_batch(&BatchParams { base_offset: 1, partition_leader_epoch: 3, control: true, ..Default::default() }, &[r], &mut input).unwrap();
            builder::set_base_offset(&mut footer, 2);
            input.extend_from_slice(&footer);
            input
        };
        let kv = |level: i64| {
            let st = Struct { fields: vec![("Version", Value::Int(0)), ("KRaftVersion", Value::Int(level))], unknown_tags: vec![] };
            schema::encode_control_record(KRAFT_VERSION, &st).unwrap()
        };
        rewrite(&with_control(KRAFT_VERSION, kv(1)), &plan, None).unwrap();
        let e = rewrite(&with_control(KRAFT_VERSION, kv(2)), &plan, None).unwrap_err();
        assert!(e.reason.contains("kraft.version level 2 is newer than kraftkit knows (newest: 1)"), "{}", e.reason);
        let top = schema::control_schema(KRAFT_VERSION).unwrap().schema.valid_versions.max;
        let mut newer = kv(1);
        newer[..2].copy_from_slice(&(top + 1).to_be_bytes());
        let e = rewrite(&with_control(KRAFT_VERSION, newer), &plan, None).unwrap_err();
        assert!(e.reason.contains(&format!("version {} is newer than kraftkit knows (newest: {top})", top + 1)), "{}", e.reason);
        let unknown_type = schema::CONTROL_RECORDS.iter().map(|c| c.control_type).max().unwrap() + 1;
        let e = rewrite(&with_control(unknown_type, vec![0, 0]), &plan, None).unwrap_err();
        assert!(e.reason.contains(&format!("control record type {unknown_type} is unknown to kraftkit")), "{}", e.reason);
        plan.refuse_unknown = false;
        rewrite(&with_control(unknown_type, vec![0, 0]), &plan, None).unwrap();
    }
}
