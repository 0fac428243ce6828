//! Arrow export: the records of a log segment or snapshot as Arrow column buffers (validity
//! bitmaps, offsets, values), one chunk of rows at a time, for the Spark data source. No
//! `arrow` crate: the buffers are built here and wrapped without a copy on the Python side
//! (`pyarrow.Array.from_buffers`).
//!
//! One row per record: `base_offset`, `offset`, `epoch` (partition leader epoch), `timestamp`
//! (ms), `crc_valid`, `is_control`, `control_type` (e.g. `LEADER_CHANGE`), `record_type`
//! (`FEATURE_LEVEL_RECORD`, or the control type for control records, as `metadata dump`
//! prints them), `record_version`, `record` (the body as JSON, what `kafka-dump-log
//! --cluster-metadata-decoder` prints as `data`), `value` (raw bytes), `position` (the batch's
//! byte position) and `error` (why the batch or record could not be read; null when fine).
//! Damage never stops the caller: a batch whose records cannot be parsed becomes one row with
//! its header fields and the error; bytes that do not frame a batch end the scan with one row
//! naming the position and reason.
//!
//! Only the columns asked for are built (a [`ColumnMask`]): the JSON of `record`, the costliest,
//! only when it is read.

use crate::batch::{self, BatchHeader, NextBatch};
use crate::error::Error;
use crate::schema::{self, json_direct};

mod columns;

pub use columns::{Bitmap, Bools, Columns, Prim, Var};

/// Column names, in the order of the bits of a [`ColumnMask`].
pub const COLUMNS: [&str; 13] = [
    "base_offset",
    "offset",
    "epoch",
    "timestamp",
    "crc_valid",
    "is_control",
    "control_type",
    "record_type",
    "record_version",
    "record",
    "value",
    "position",
    "error",
];

pub const BASE_OFFSET: usize = 0;
pub const OFFSET: usize = 1;
pub const EPOCH: usize = 2;
pub const TIMESTAMP: usize = 3;
pub const CRC_VALID: usize = 4;
pub const IS_CONTROL: usize = 5;
pub const CONTROL_TYPE: usize = 6;
pub const RECORD_TYPE: usize = 7;
pub const RECORD_VERSION: usize = 8;
pub const RECORD: usize = 9;
pub const VALUE: usize = 10;
pub const POSITION: usize = 11;
pub const ERROR: usize = 12;

/// Which columns to build (bit i: `COLUMNS[i]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ColumnMask(pub u32);

impl ColumnMask {
    pub const ALL: ColumnMask = ColumnMask((1 << COLUMNS.len()) - 1);
    pub fn has(self, c: usize) -> bool {
        self.0 & (1 << c) != 0
    }
    /// The mask for these column names; unknown names are returned as the error.
    pub fn from_names<'a>(names: impl IntoIterator<Item = &'a str>) -> std::result::Result<ColumnMask, String> {
        let mut m = 0u32;
        for n in names {
            let i = COLUMNS.iter().position(|c| *c == n).ok_or_else(|| n.to_string())?;
            m |= 1 << i;
        }
        Ok(ColumnMask(m))
    }
}

/// Options of a scan.
#[derive(Debug, Clone, Copy)]
pub struct ScanOptions {
    pub columns: ColumnMask,
    /// Records with offsets in `[min_offset, max_offset)` only.
    pub min_offset: i64,
    pub max_offset: i64,
    /// A chunk ends after the batch that brings it to this many rows...
    pub chunk_rows: usize,
    /// ...or this many bytes of strings and values.
    pub chunk_bytes: usize,
}

impl Default for ScanOptions {
    fn default() -> Self {
        ScanOptions { columns: ColumnMask::ALL, min_offset: i64::MIN, max_offset: i64::MAX, chunk_rows: 65536, chunk_bytes: 64 << 20 }
    }
}

/// Counters of a scan so far.
#[derive(Debug, Default, Clone, Copy)]
pub struct ScanStats {
    pub batches: u64,
    pub records: u64,
    /// Batches whose stored CRC differs from the computed one.
    pub crc_errors: u64,
    /// Batches or tails that could not be read (each is one error row).
    pub errors: u64,
    pub bytes: u64,
}

/// Walks the batches of `buf[start..end]` and fills [`Columns`] chunk by chunk.
pub struct RecordScanner<'a> {
    buf: &'a [u8],
    pos: usize,
    end: usize,
    opts: ScanOptions,
    done: bool,
    pub stats: ScanStats,
}

impl<'a> RecordScanner<'a> {
    /// `buf` is a whole file (positions are file positions); the scan covers `[start, end)`,
    /// which must start at a batch boundary (see [`batch_splits`]).
    pub fn new(buf: &'a [u8], start: usize, end: usize, opts: ScanOptions) -> Self {
        let end = end.min(buf.len());
        RecordScanner { buf, pos: start.min(end), end, opts, done: false, stats: ScanStats::default() }
    }

    pub fn position(&self) -> usize {
        self.pos
    }

    /// True once the end (or bytes that do not frame a batch) was reached.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// The next chunk of rows, None at the end.
    pub fn next_chunk(&mut self) -> Option<Columns> {
        let mut c = Columns::default();
        self.fill_chunk(&mut c).then_some(c)
    }

    /// As [`next_chunk`](Self::next_chunk), into `c` (cleared first, its buffers' room reused):
    /// false at the end.
    pub fn fill_chunk(&mut self, c: &mut Columns) -> bool {
        c.clear();
        if self.done {
            return false;
        }
        while c.rows < self.opts.chunk_rows && c.bytes < self.opts.chunk_bytes {
            let area = &self.buf[..self.end];
            match batch::next_batch(area, self.pos, 0) {
                Ok(NextBatch::End) => {
                    self.done = true;
                    break;
                }
                Ok(NextBatch::Batch(h, r)) => {
                    let fpos = self.pos as u64;
                    self.pos = r.end;
                    self.stats.batches += 1;
                    self.stats.bytes += (r.end - r.start) as u64;
                    if h.last_offset() < self.opts.min_offset || h.base_offset >= self.opts.max_offset {
                        continue;
                    }
                    self.emit_batch(c, &h, &self.buf[r], fpos);
                }
                Err(e) => {
                    self.done = true;
                    self.stats.errors += 1;
                    // damage is reported unless it is known to lie past the offsets asked for
                    if e.offset.is_none_or(|o| o < self.opts.max_offset) {
                        let pos = e.position.unwrap_or(self.pos as u64);
                        self.error_row(c, e.offset, None, None, pos, &e);
                    }
                    break;
                }
            }
        }
        !(c.rows == 0 && self.done)
    }

    /// A row for a batch (or bytes) that could not be read: header fields when known.
    fn error_row(&self, c: &mut Columns, base_offset: Option<i64>, h: Option<&BatchHeader>, crc_valid: Option<bool>, pos: u64, e: &Error) {
        let m = self.opts.columns;
        c.rows += 1;
        if m.has(BASE_OFFSET) {
            c.base_offset.push(base_offset);
        }
        if m.has(OFFSET) {
            c.offset.push(None);
        }
        if m.has(EPOCH) {
            c.epoch.push(h.map(|h| h.partition_leader_epoch));
        }
        if m.has(TIMESTAMP) {
            c.timestamp.push(None);
        }
        if m.has(CRC_VALID) {
            c.crc_valid.push(crc_valid);
        }
        if m.has(IS_CONTROL) {
            c.is_control.push(h.map(|h| h.is_control()));
        }
        for (i, col) in [(CONTROL_TYPE, &mut c.control_type), (RECORD_TYPE, &mut c.record_type), (RECORD, &mut c.record), (VALUE, &mut c.value)] {
            if m.has(i) {
                col.push(None);
            }
        }
        if m.has(RECORD_VERSION) {
            c.record_version.push(None);
        }
        if m.has(POSITION) {
            c.position.push(Some(pos as i64));
        }
        if m.has(ERROR) {
            let reason = e.reason.as_bytes();
            c.bytes += reason.len();
            c.error.push(Some(reason));
        }
    }

    fn emit_batch(&mut self, c: &mut Columns, h: &BatchHeader, bytes: &[u8], fpos: u64) {
        let crc_ok = batch::compute_crc(bytes) == h.crc;
        if !crc_ok {
            self.stats.crc_errors += 1;
        }
        let data = match batch::records_data(h, bytes, fpos) {
            Ok(d) => d,
            Err(e) => {
                self.stats.errors += 1;
                self.error_row(c, Some(h.base_offset), Some(h), Some(crc_ok), fpos, &e);
                return;
            }
        };
        let d = data.bytes();
        let m = self.opts.columns;
        let (min, max) = (self.opts.min_offset, self.opts.max_offset);
        let control = h.is_control();
        let rows_before = c.rows;
        let mut scratch = Scratch::default();
        let res = batch::for_each_record(h, d, fpos, |r| -> Result<(), Error> {
            let off = h.base_offset + r.offset_delta as i64;
            if off < min || off >= max {
                return Ok(());
            }
            let key = r.key.as_ref().map(|k| &d[k.start as usize..k.end as usize]);
            let value = r.value.as_ref().map(|v| &d[v.start as usize..v.end as usize]);
            c.rows += 1;
            if m.has(BASE_OFFSET) {
                c.base_offset.push(Some(h.base_offset));
            }
            if m.has(OFFSET) {
                c.offset.push(Some(off));
            }
            if m.has(EPOCH) {
                c.epoch.push(Some(h.partition_leader_epoch));
            }
            if m.has(TIMESTAMP) {
                let ts = if h.is_log_append_time() { h.max_timestamp } else { h.base_timestamp + r.timestamp_delta };
                c.timestamp.push(Some(ts));
            }
            if m.has(CRC_VALID) {
                c.crc_valid.push(Some(crc_ok));
            }
            if m.has(IS_CONTROL) {
                c.is_control.push(Some(control));
            }
            let info = if control { control_info(key, value, m.has(RECORD), &mut scratch) } else { data_info(value, m.has(RECORD), &mut scratch) };
            if m.has(CONTROL_TYPE) {
                c.control_type.push(if control { info.type_name.map(str::as_bytes) } else { None });
            }
            if m.has(RECORD_TYPE) {
                c.record_type.push(info.type_name.map(str::as_bytes));
            }
            if m.has(RECORD_VERSION) {
                c.record_version.push(info.version.map(i32::from));
            }
            if m.has(RECORD) {
                let j = info.json.then_some(scratch.out.as_slice());
                c.bytes += scratch.out.len();
                c.record.push(j);
            }
            if m.has(VALUE) {
                c.bytes += value.map_or(0, <[u8]>::len);
                c.value.push(value);
            }
            if m.has(POSITION) {
                c.position.push(Some(fpos as i64));
            }
            if m.has(ERROR) {
                let e = info.error.as_deref().map(str::as_bytes);
                c.bytes += e.map_or(0, <[u8]>::len);
                c.error.push(e);
            }
            Ok(())
        });
        self.stats.records += (c.rows - rows_before) as u64;
        if let Err(e) = res {
            // the records parsed before the damage stay; one row says where and why it stopped
            self.stats.errors += 1;
            self.error_row(c, Some(h.base_offset), Some(h), Some(crc_ok), fpos, &e);
        }
    }
}

/// What a record is, as far as the columns asked for need to know.
struct Info {
    type_name: Option<&'static str>,
    version: Option<i16>,
    /// `scratch.out` holds the record's JSON.
    json: bool,
    error: Option<String>,
}

/// A record's JSON (`out`), written straight from its bytes (`tmp`: the writer's own room).
#[derive(Default)]
struct Scratch {
    out: Vec<u8>,
    tmp: json_direct::Scratch,
}

fn data_info(value: Option<&[u8]>, want_json: bool, scratch: &mut Scratch) -> Info {
    let Some(v) = value else {
        return Info { type_name: None, version: None, json: false, error: Some("metadata record with a null value".into()) };
    };
    if !want_json {
        return match frame(v) {
            Some((k, ver)) => match schema::metadata_schema(k) {
                Some(s) => Info { type_name: Some(s.type_name), version: Some(ver), json: false, error: None },
                None => Info { type_name: None, version: Some(ver), json: false, error: Some(format!("Unknown metadata id {k}")) },
            },
            None => Info { type_name: None, version: None, json: false, error: Some("Could not read the metadata record frame".into()) },
        };
    }
    scratch.out.clear();
    match json_direct::metadata_json(v, &mut scratch.out, &mut scratch.tmp, |_, _, _| {}) {
        Ok((m, ver)) => Info { type_name: Some(m.type_name), version: Some(ver), json: true, error: None },
        Err(e) => {
            let (t, ver) = match frame(v) {
                Some((k, ver)) => (schema::metadata_schema(k).map(|s| s.type_name), Some(ver)),
                None => (None, None),
            };
            Info { type_name: t, version: ver, json: false, error: Some(e.to_string()) }
        }
    }
}

fn control_info(key: Option<&[u8]>, value: Option<&[u8]>, want_json: bool, scratch: &mut Scratch) -> Info {
    let t = match batch::parse_control_key(key) {
        Ok((_, t)) => t,
        Err(reason) => return Info { type_name: None, version: None, json: false, error: Some(reason) },
    };
    let name = Some(batch::control_type_name(t));
    let v = value.unwrap_or(&[]);
    if schema::control_schema(t).is_none() {
        // transaction markers (and unknown types) have no schema to print
        return Info { type_name: name, version: None, json: false, error: None };
    }
    if !want_json {
        let version = (v.len() >= 2).then(|| i16::from_be_bytes([v[0], v[1]]));
        return Info { type_name: name, version, json: false, error: None };
    }
    scratch.out.clear();
    match json_direct::control_json(t, v, &mut scratch.out, &mut scratch.tmp, |_, _, _| {}) {
        Ok((_, ver)) => Info { type_name: name, version: Some(ver), json: true, error: None },
        Err(e) => {
            let version = (v.len() >= 2).then(|| i16::from_be_bytes([v[0], v[1]]));
            Info { type_name: name, version, json: false, error: Some(e.to_string()) }
        }
    }
}

/// The (api key, version) of a metadata record's frame (frame version 1), without the body.
#[inline]
pub fn frame(v: &[u8]) -> Option<(i16, i16)> {
    let mut pos = 0;
    let f = crate::varint::read_uvarint(v, &mut pos)?;
    if f != schema::FRAME_VERSION {
        return None;
    }
    let k = crate::varint::read_uvarint(v, &mut pos)?;
    let ver = crate::varint::read_uvarint(v, &mut pos)?;
    if k > i16::MAX as u32 || ver > i16::MAX as u32 {
        return None;
    }
    Some((k as i16, ver as i16))
}

/// Byte positions that cut `buf` into ranges of about `target` bytes at batch boundaries
/// (reading only batch headers): `[0, p1, p2, ..., len]`. A range of damaged bytes stays in
/// the last range, whose scan reports it.
pub fn batch_splits(buf: &[u8], target: usize) -> Vec<usize> {
    let mut out = vec![0];
    let mut pos = 0;
    let mut last = 0;
    let target = target.max(1);
    while let Ok(NextBatch::Batch(_, r)) = batch::next_batch(buf, pos, 0) {
        pos = r.end;
        if pos - last >= target && pos < buf.len() {
            out.push(pos);
            last = pos;
        }
    }
    out.push(buf.len());
    out
}

/// One column of values handed in by a caller (e.g. an Arrow binary array): offsets into data.
pub struct ValuesIn<'a> {
    pub offsets: &'a [i32],
    pub data: &'a [u8],
    /// Validity bitmap and the bit offset of the first value in it (Arrow slices), if any.
    pub validity: Option<(&'a [u8], usize)>,
}

impl ValuesIn<'_> {
    pub fn len(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    #[inline]
    pub fn get(&self, i: usize) -> Option<&[u8]> {
        if let Some((bits, off)) = self.validity {
            let j = off + i;
            if bits[j >> 3] & (1 << (j & 7)) == 0 {
                return None;
            }
        }
        let (a, b) = (self.offsets[i] as usize, self.offsets[i + 1] as usize);
        self.data.get(a..b)
    }
}

/// Decodes metadata record values (frame + body): record type, version, body JSON and error.
pub fn decode_values(values: &ValuesIn<'_>) -> (Var, Prim<i32>, Var, Var) {
    let (mut types, mut versions, mut jsons, mut errors) = (Var::default(), Prim::default(), Var::default(), Var::default());
    let mut scratch = Scratch::default();
    for i in 0..values.len() {
        match values.get(i) {
            None => {
                types.push(None);
                versions.push(None);
                jsons.push(None);
                errors.push(None);
            }
            Some(v) => {
                let info = data_info(Some(v), true, &mut scratch);
                types.push(info.type_name.map(str::as_bytes));
                versions.push(info.version.map(i32::from));
                jsons.push(info.json.then_some(scratch.out.as_slice()));
                errors.push(info.error.as_deref().map(str::as_bytes));
            }
        }
    }
    (types, versions, jsons, errors)
}

/// Whether each value is a whole v2 record batch whose stored CRC matches its bytes (null: not
/// a record batch at all, e.g. too short or a bad magic byte).
pub fn batch_crcs(values: &ValuesIn<'_>) -> Bools {
    let mut out = Bools::default();
    for i in 0..values.len() {
        let r = values.get(i).and_then(|b| match batch::next_batch(b, 0, 0) {
            Ok(NextBatch::Batch(h, r)) if r.end == b.len() => Some(batch::compute_crc(b) == h.crc),
            _ => None,
        });
        out.push(r);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::{encode_batch, BatchParams, RecordInput};

    fn data_batch(base: i64, values: &[Vec<u8>]) -> Vec<u8> {
        let inputs: Vec<RecordInput> = values.iter().map(|v| RecordInput { timestamp: 1000, key: None, value: Some(v), headers: Vec::new() }).collect();
        let mut out = Vec::new();
        encode_batch(&BatchParams { base_offset: base, partition_leader_epoch: 3, ..BatchParams::default() }, &inputs, &mut out).unwrap();
        out
    }

    fn feature(level: i64) -> Vec<u8> {
        let st = schema::Struct { fields: vec![("Name", schema::Value::Str("metadata.version".into())), ("FeatureLevel", schema::Value::Int(level))], unknown_tags: Vec::new() };
        schema::encode_metadata_record(12, 0, &st).unwrap()
    }

    #[test]
    fn rows_columns_and_a_damaged_tail() {
        let mut buf = data_batch(0, &[feature(21), feature(20)]);
        let second = buf.len();
        buf.extend(data_batch(2, &[feature(19)]));
        let third = buf.len();
        let mut bad = data_batch(3, &[feature(18)]);
        let n = bad.len();
        bad[n - 3] ^= 0x01; // the low byte of FeatureLevel: a CRC mismatch, the records still parse
        buf.extend(&bad);
        buf.extend([0u8; 20]); // not a batch
        let mut s = RecordScanner::new(&buf, 0, buf.len(), ScanOptions::default());
        let c = s.next_chunk().unwrap();
        assert!(s.next_chunk().is_none());
        assert_eq!(c.rows, 5);
        assert_eq!(c.offset.values[..4], [0, 1, 2, 3]);
        assert!(!c.offset.validity.get(4));
        assert_eq!(c.record_type.get(0), Some(&b"FEATURE_LEVEL_RECORD"[..]));
        assert_eq!(c.record.get(1), Some(&br#"{"name":"metadata.version","featureLevel":20}"#[..]));
        assert_eq!(c.position.values[2], second as i64);
        assert!(c.crc_valid.values.get(2) && !c.crc_valid.values.get(3));
        assert!(c.error.get(3).is_none() && c.error.get(4).is_some());
        assert_eq!((s.stats.batches, s.stats.records, s.stats.crc_errors, s.stats.errors), (3, 4, 1, 1));
        // offset range and pruning
        let opts = ScanOptions { columns: ColumnMask::from_names(["offset"]).unwrap(), min_offset: 1, max_offset: 3, ..ScanOptions::default() };
        let c = RecordScanner::new(&buf, 0, third, opts).next_chunk().unwrap();
        assert_eq!(c.offset.values, [1, 2]);
        assert!(c.record_type.is_empty());
        assert_eq!(batch_splits(&buf, 1), [0, second, third, third + n, buf.len()]);
    }

    /// A chunk filled into reused buffers holds what a fresh one does, whatever the chunk
    /// before it held (nulls, longer strings, more rows).
    #[test]
    fn reused_chunks_equal_fresh_ones() {
        let mut buf = Vec::new();
        for b in 0..6 {
            let n = 1 + (b % 3) as usize;
            buf.extend(data_batch(b * 3, &vec![feature(b); n]));
        }
        let n = buf.len();
        buf[n - 3] ^= 0x01;
        buf.extend([0u8; 20]);
        let opts = ScanOptions { chunk_rows: 2, ..ScanOptions::default() };
        let fresh: Vec<Columns> = {
            let mut s = RecordScanner::new(&buf, 0, buf.len(), opts);
            std::iter::from_fn(|| s.next_chunk()).collect()
        };
        assert!(fresh.len() > 3);
        let mut s = RecordScanner::new(&buf, 0, buf.len(), opts);
        let mut c = Columns::default();
        for want in &fresh {
            assert!(s.fill_chunk(&mut c));
            assert_eq!(format!("{c:?}"), format!("{want:?}"));
        }
        assert!(!s.fill_chunk(&mut c));
        assert_eq!(c.rows, 0);
    }
}
