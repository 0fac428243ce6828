//! Rendering a segment the way `kafka-dump-log` prints it (text), or as JSON lines.
//! Formatting lives here because it is the hot loop of `kraftkit dump-log`.

use crate::batch::{self, BatchHeader, NextBatch};
use crate::error::Error;
use crate::java_utf8;
use crate::schema::control_types;
use base64::Engine;
use std::io::{IoSlice, Write};

#[derive(Debug, Clone, Copy)]
pub struct DumpOptions {
    pub deep: bool,
    pub print_data: bool,
    pub json: bool,
    pub max_bytes: usize,
    /// A KRaft file (snapshot, metadata log): its batches hold offsets base..=base+count-1, so a
    /// lastOffsetDelta other than count - 1 is an error.
    pub dense: bool,
}

/// Counters and findings of a dump.
#[derive(Default)]
pub struct DumpState {
    pub batches: u64,
    pub records: u64,
    pub invalid_batches: u64,
    /// (previous offset, offset) pairs that are not consecutive, with the base offset and byte
    /// position of the batch holding the second.
    pub non_consecutive: Vec<(i64, i64, i64, u64)>,
    /// The first error met (a bad record, or what stopped the dump).
    pub error: Option<Error>,
    /// Bytes after the last complete batch.
    pub trailing_bytes: u64,
    last_offset: Option<i64>,
}

/// What rendering one batch found; batches are rendered in parallel, and their findings
/// merged into the dump's [`DumpState`] in file order.
#[derive(Default)]
struct BatchFindings {
    invalid: bool,
    records: u64,
    first_offset: Option<i64>,
    last_offset: Option<i64>,
    /// Within the batch (the step from the previous batch is checked when merging).
    non_consecutive: Vec<(i64, i64, i64, u64)>,
    /// The batch's base offset and byte position.
    at: (i64, u64),
    error: Option<Error>,
}

impl BatchFindings {
    fn saw_offset(&mut self, offset: i64) {
        match self.last_offset {
            Some(last) if offset != last + 1 => self.non_consecutive.push((last, offset, self.at.0, self.at.1)),
            Some(_) => {}
            None => self.first_offset = Some(offset),
        }
        self.last_offset = Some(offset);
    }

    fn note_error(&mut self, e: Error) {
        if self.error.is_none() {
            self.error = Some(e);
        }
    }
}

impl DumpState {
    fn merge(&mut self, f: BatchFindings) {
        self.batches += 1;
        self.invalid_batches += f.invalid as u64;
        self.records += f.records;
        if let (Some(last), Some(first)) = (self.last_offset, f.first_offset) {
            if first != last + 1 {
                self.non_consecutive.push((last, first, f.at.0, f.at.1));
            }
        }
        self.non_consecutive.extend(f.non_consecutive);
        if f.last_offset.is_some() {
            self.last_offset = f.last_offset;
        }
        if self.error.is_none() {
            self.error = f.error;
        }
    }
}

/// Writes named fields either as kafka-dump-log's text (`name: value`, space separated) or
/// as JSON object members (`"name":value`, comma separated), so both outputs share one field
/// list. The caller writes the enclosing braces or line prefix.
struct Fields<'a> {
    out: &'a mut Vec<u8>,
    json: bool,
    first: bool,
}

impl<'a> Fields<'a> {
    fn new(out: &'a mut Vec<u8>, json: bool) -> Self {
        Fields { out, json, first: true }
    }
    fn key(&mut self, name: &str) {
        if self.json {
            if !self.first {
                self.out.push(b',');
            }
            self.out.push(b'"');
            s(self.out, name);
            s(self.out, "\":");
        } else {
            if !self.first {
                self.out.push(b' ');
            }
            s(self.out, name);
            s(self.out, ": ");
        }
        self.first = false;
    }
    fn int(&mut self, name: &str, v: impl itoa::Integer) {
        self.key(name);
        num(self.out, v);
    }
    fn boolean(&mut self, name: &str, v: bool) {
        self.raw(name, bool_str(v));
    }
    /// A value written as is in both forms.
    fn raw(&mut self, name: &str, v: &str) {
        self.key(name);
        s(self.out, v);
    }
    /// A string: quoted and escaped in JSON, bare in text.
    fn text(&mut self, name: &str, v: &str) {
        self.key(name);
        if self.json {
            json_str(self.out, v.as_bytes());
        } else {
            s(self.out, v);
        }
    }
    /// A list of strings: `[a,b]` in text (decoded as Java would), a JSON array otherwise.
    fn strings<'b>(&mut self, name: &str, items: impl Iterator<Item = &'b [u8]>) {
        self.key(name);
        self.out.push(b'[');
        for (j, item) in items.enumerate() {
            if j > 0 {
                self.out.push(b',');
            }
            if self.json {
                json_str(self.out, item);
            } else {
                java_utf8::lossy(self.out, item);
            }
        }
        self.out.push(b']');
    }
}

/// Incremental renderer: each `next_chunk` call renders the batches of about `chunk` bytes of input.
pub struct Dumper<B: AsRef<[u8]>> {
    buf: B,
    limit: usize,
    opts: DumpOptions,
    pos: usize,
    done: bool,
    pub state: DumpState,
}

fn num(out: &mut Vec<u8>, v: impl itoa::Integer) {
    let mut b = itoa::Buffer::new();
    out.extend_from_slice(b.format(v).as_bytes());
}

fn s(out: &mut Vec<u8>, t: &str) {
    out.extend_from_slice(t.as_bytes());
}

fn json_str(out: &mut Vec<u8>, t: &[u8]) {
    out.push(b'"');
    let text = String::from_utf8_lossy(t);
    for c in text.chars() {
        match c {
            '"' => s(out, "\\\""),
            '\\' => s(out, "\\\\"),
            '\n' => s(out, "\\n"),
            '\r' => s(out, "\\r"),
            '\t' => s(out, "\\t"),
            c if (c as u32) < 0x20 => {
                out.extend_from_slice(format!("\\u{:04x}", c as u32).as_bytes());
            }
            c => {
                let mut b = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut b).as_bytes());
            }
        }
    }
    out.push(b'"');
}

/// A key or value in JSON: a string when it is UTF-8, else {"base64": ...}.
fn json_bytes(out: &mut Vec<u8>, b: Option<&[u8]>) {
    match b {
        None => s(out, "null"),
        Some(b) => match std::str::from_utf8(b) {
            Ok(t) => json_str(out, t.as_bytes()),
            Err(_) => {
                s(out, "{\"base64\":\"");
                s(out, &base64::engine::general_purpose::STANDARD.encode(b));
                s(out, "\"}");
            }
        },
    }
}

fn bool_str(b: bool) -> &'static str {
    if b {
        "true"
    } else {
        "false"
    }
}

fn slice(r: &Option<std::ops::Range<u32>>) -> Option<std::ops::Range<usize>> {
    r.as_ref().map(|r| r.start as usize..r.end as usize)
}

impl<B: AsRef<[u8]>> Dumper<B> {
    pub fn new(buf: B, opts: DumpOptions) -> Self {
        let limit = buf.as_ref().len().min(opts.max_bytes);
        Dumper { buf, limit, opts, pos: 0, done: false, state: DumpState::default() }
    }

    pub fn is_done(&self) -> bool {
        self.done
    }

    /// How much input to render per `next_chunk` call: 4 MB when records are printed (their
    /// text can be three times the input, held until written), 32 MB for batch lines alone
    /// (~300 bytes of text per batch), where fewer parallel steps, each waiting for its slowest
    /// batch, took the 268 MB metadata-shaped log from ~30 to ~26 ms.
    pub fn chunk_size(&self) -> usize {
        if self.opts.deep {
            4 << 20
        } else {
            32 << 20
        }
    }

    /// Renders the next batches, about `chunk` bytes of the input (at least one batch), into
    /// `parts`: one buffer per batch, in file order (none at the end). The buffers are reused
    /// from one call to the next, so pass the same `parts` each time. The batches of a chunk are
    /// rendered in parallel (CRC, decompression, records and their text are independent per
    /// batch); what they find is merged into `state` in file order.
    pub fn next_chunk(&mut self, chunk: usize, parts: &mut Vec<Vec<u8>>) {
        let buf = &self.buf.as_ref()[..self.limit];
        let mut found: Vec<(BatchHeader, std::ops::Range<usize>)> = Vec::new();
        let mut taken = 0usize;
        let mut stop = None;
        while !self.done && taken < chunk {
            match batch::next_batch(buf, self.pos, 0) {
                Ok(NextBatch::End) => self.done = true,
                Ok(NextBatch::Batch(h, r)) => {
                    taken += r.len();
                    self.pos = r.end;
                    found.push((h, r));
                }
                Err(e) => {
                    // Like kafka-dump-log: what follows the last complete batch is reported, not dumped.
                    stop = Some(e);
                    self.done = true;
                }
            }
        }
        parts.resize_with(found.len(), Vec::new);
        let opts = self.opts;
        let render = |((h, r), out): (&(BatchHeader, std::ops::Range<usize>), &mut Vec<u8>)| {
            out.clear();
            // room for the usual text at once: a batch line, a line per record, and keys and
            // values at up to three bytes out per byte in
            // the declared count is the batch header's word: a lying one must not size memory
            let records = (h.records_count.max(0) as usize).min(r.len() / 7 + 1);
            out.reserve(512 + if opts.deep { records * 160 } else { 0 } + if opts.print_data { 3 * r.len() } else { 0 });
            let mut f = BatchFindings::default();
            render_batch(&opts, h, &buf[r.clone()], r.start as u64, out, &mut f);
            f
        };
        let findings: Vec<BatchFindings> = if found.len() > 1 {
            use rayon::prelude::*;
            found.par_iter().zip(parts.par_iter_mut()).map(render).collect()
        } else {
            found.iter().zip(parts.iter_mut()).map(render).collect()
        };
        for f in findings {
            self.state.merge(f);
        }
        if let Some(e) = stop {
            self.state.trailing_bytes = (self.limit - self.pos) as u64;
            self.state.error = Some(e);
        }
    }

    /// Renders everything left, chunk by chunk, into `w` (a file or pipe: each chunk's parts go
    /// out in vectored writes, with no copy in between).
    pub fn write_to(&mut self, w: &mut impl Write, chunk: usize) -> std::io::Result<()> {
        let mut parts = Vec::new();
        while !self.done {
            self.next_chunk(chunk, &mut parts);
            let mut slices: Vec<IoSlice<'_>> = parts.iter().filter(|p| !p.is_empty()).map(|p| IoSlice::new(p)).collect();
            let mut rest = &mut slices[..];
            while !rest.is_empty() {
                // at most IOV_MAX (1024 on Linux) buffers per call
                let n = rest.len().min(1024);
                match w.write_vectored(&rest[..n]) {
                    Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
                    Ok(written) => IoSlice::advance_slices(&mut rest, written),
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
        }
        w.flush()
    }
}

fn render_batch(opts: &DumpOptions, h: &BatchHeader, bytes: &[u8], fpos: u64, out: &mut Vec<u8>, found: &mut BatchFindings) {
    let computed = batch::compute_crc(bytes);
    let valid = computed == h.crc;
    found.invalid = !valid;
    found.records = h.records_count.max(0) as u64;
    found.at = (h.base_offset, fpos);
    let json = opts.json;
    if json {
        out.push(b'{');
    }
    let mut f = Fields::new(out, json);
    if json {
        f.text("type", "batch");
    }
    f.int("baseOffset", h.base_offset);
    f.int("lastOffset", h.last_offset());
    f.int("count", h.records_count);
    f.int("baseSequence", h.base_sequence);
    f.int("lastSequence", h.last_sequence());
    f.int("producerId", h.producer_id);
    f.int("producerEpoch", h.producer_epoch);
    f.int("partitionLeaderEpoch", h.partition_leader_epoch);
    f.boolean("isTransactional", h.is_transactional());
    f.boolean("isControl", h.is_control());
    // Kafka prints Java's OptionalLong; JSON gets a number or null.
    match (json, h.delete_horizon_ms()) {
        (true, Some(v)) => f.int("deleteHorizonMs", v),
        (true, None) => f.raw("deleteHorizonMs", "null"),
        (false, Some(v)) => f.raw("deleteHorizonMs", &format!("OptionalLong[{v}]")),
        (false, None) => f.raw("deleteHorizonMs", "OptionalLong.empty"),
    }
    f.int("position", fpos);
    if json {
        f.text("timestampType", h.timestamp_type_name());
        f.int("maxTimestamp", h.max_timestamp);
        f.int("baseTimestamp", h.base_timestamp);
    } else {
        f.int(h.timestamp_type_name(), h.max_timestamp);
    }
    f.int("size", bytes.len());
    f.int("magic", 2);
    f.text("compresscodec", h.codec().map_or("unknown", |c| c.name()));
    f.int("crc", h.crc);
    f.boolean("isvalid", valid);
    if !json {
        out.push(b'\n');
    }
    if opts.dense && valid && h.records_count as i64 != h.last_offset_delta as i64 + 1 {
        found.note_error(Error::corrupt(fpos, Some(h.base_offset), format!(
            "{} records but a lastOffsetDelta of {}: a KRaft batch holds the offsets from its base offset on, one per record",
            h.records_count, h.last_offset_delta)));
    }
    if opts.deep {
        render_records(opts, h, bytes, fpos, out, found);
    } else if opts.dense && valid && h.records_count > 0 {
        // a KRaft file's offsets as its headers give them: a gap between batches is damage
        found.saw_offset(h.base_offset);
        found.last_offset = Some(h.last_offset());
    }
    if json {
        s(out, "}\n");
    }
}

fn render_records(opts: &DumpOptions, h: &BatchHeader, bytes: &[u8], fpos: u64, out: &mut Vec<u8>, found: &mut BatchFindings) {
    let json = opts.json;
    let data = match batch::records_data(h, bytes, fpos) {
        Ok(d) => d,
        Err(e) => {
            note_record_error(json, e, out, found);
            return;
        }
    };
    let mut recs = Vec::new();
    let parsed = batch::parse_records(h, data.bytes(), fpos, &mut recs);
    let d = data.bytes();
    if json {
        s(out, ",\"records\":[");
    }
    for (i, r) in recs.iter().enumerate() {
        let offset = h.base_offset + r.offset_delta as i64;
        found.saw_offset(offset);
        let ts = if h.is_log_append_time() { h.max_timestamp } else { h.base_timestamp.wrapping_add(r.timestamp_delta) };
        let key = slice(&r.key).map(|x| &d[x]);
        let value = slice(&r.value).map(|x| &d[x]);
        let headers = batch::read_headers(d, r);
        if json {
            if i > 0 {
                out.push(b',');
            }
            out.push(b'{');
        } else {
            s(out, "| ");
        }
        let mut f = Fields::new(out, json);
        f.int("offset", offset);
        f.int(if json { "timestamp" } else { h.timestamp_type_name() }, ts);
        f.int("keySize", key.map_or(-1, |k| k.len() as i64));
        f.int("valueSize", value.map_or(-1, |v| v.len() as i64));
        f.int("sequence", h.record_sequence(r.offset_delta));
        f.strings("headerKeys", headers.iter().map(|hd| &d[hd.key.start as usize..hd.key.end as usize]));
        if h.is_control() {
            render_control(key, value, json, out);
        } else if opts.print_data {
            if json {
                s(out, ",\"key\":");
                json_bytes(out, key);
                s(out, ",\"payload\":");
                json_bytes(out, value);
            } else {
                if let Some(k) = key {
                    s(out, " key: ");
                    java_utf8::lossy(out, k);
                }
                if let Some(v) = value {
                    s(out, " payload: ");
                    java_utf8::lossy(out, v);
                }
            }
        }
        if json {
            out.push(b'}');
        } else {
            out.push(b'\n');
        }
    }
    if json {
        s(out, "]");
    }
    if let Err(e) = parsed {
        note_record_error(json, e, out, found);
    }
}

fn note_record_error(json: bool, e: Error, out: &mut Vec<u8>, found: &mut BatchFindings) {
    if json {
        s(out, ",\"error\":");
        json_str(out, e.to_string().as_bytes());
    } else {
        s(out, "| error: ");
        s(out, &e.to_string());
        out.push(b'\n');
    }
    found.note_error(e);
}

fn render_control(key: Option<&[u8]>, value: Option<&[u8]>, json: bool, out: &mut Vec<u8>) {
    match batch::parse_control_key(key) {
        Err(reason) => {
            if json {
                s(out, ",\"controlError\":");
                json_str(out, reason.as_bytes());
            } else {
                s(out, " controlError: ");
                s(out, &reason);
            }
        }
        Ok((_, t)) => {
            let name = batch::control_type_name(t);
            if t == control_types::ABORT || t == control_types::COMMIT {
                match batch::parse_end_txn_marker(value) {
                    Ok((_, epoch)) => {
                        if json {
                            s(out, ",\"endTxnMarker\":\"");
                            s(out, name);
                            s(out, "\",\"coordinatorEpoch\":");
                            num(out, epoch);
                        } else {
                            s(out, " endTxnMarker: ");
                            s(out, name);
                            s(out, " coordinatorEpoch: ");
                            num(out, epoch);
                        }
                    }
                    Err(reason) => {
                        s(out, if json { ",\"controlError\":" } else { " controlError: " });
                        if json {
                            json_str(out, reason.as_bytes());
                        } else {
                            s(out, &reason);
                        }
                    }
                }
            } else if let Some(c) = crate::schema::control_schema(t) {
                // Kafka 4.x prints "LeaderChange:" with a colon, the other types without one.
                let label = if t == control_types::LEADER_CHANGE { "LeaderChange:" } else { c.label };
                let rendered = crate::schema::decode_control_record(t, value.unwrap_or(&[]))
                    .map(|(c, v, st)| crate::schema::json::message_json(c.schema, v, &st))
                    .map_err(|e| e.to_string());
                match rendered {
                    Ok(js) => {
                        if json {
                            s(out, ",\"controlType\":\"");
                            s(out, name);
                            s(out, "\",\"control\":");
                            s(out, &js);
                        } else {
                            s(out, " ");
                            s(out, label);
                            s(out, " ");
                            s(out, &js);
                        }
                    }
                    Err(reason) => {
                        if json {
                            s(out, ",\"controlType\":\"");
                            s(out, name);
                            s(out, "\",\"controlError\":");
                            json_str(out, reason.as_bytes());
                        } else {
                            s(out, " controlType: ");
                            s(out, name);
                            s(out, "(");
                            num(out, t);
                            s(out, ") controlError: ");
                            s(out, &reason);
                        }
                    }
                }
            } else if json {
                s(out, ",\"controlType\":\"");
                s(out, name);
                s(out, "\",\"controlTypeId\":");
                num(out, t);
            } else {
                s(out, " controlType: ");
                s(out, name);
                s(out, "(");
                num(out, t);
                s(out, ")");
            }
        }
    }
}

