//! Record batch v2 ("magic 2"): the header view, the record iterator, control record keys.
//! Layout: see Kafka's `DefaultRecordBatch` (clients, `org.apache.kafka.common.record`) and KIP-98.

use crate::compression::{self, Codec};
use crate::crc;
use crate::error::{Error, ErrorKind, Result};
use crate::varint::{read_varint, read_varlong};
use std::ops::Range;

pub const LOG_OVERHEAD: usize = 12;
pub const RECORD_BATCH_OVERHEAD: usize = 61;
pub const MAGIC_OFFSET: usize = 16;
pub const CRC_OFFSET: usize = 17;
pub const ATTRIBUTES_OFFSET: usize = 21;
pub const HEADER_SIZE_UP_TO_MAGIC: usize = 17;
/// `LegacyRecord.RECORD_OVERHEAD_V0`: the smallest Length any message format can have.
pub const LEGACY_RECORD_OVERHEAD_V0: i32 = 14;

pub const ATTR_COMPRESSION_MASK: i16 = 0x07;
pub const ATTR_TIMESTAMP_TYPE: i16 = 0x08;
pub const ATTR_TRANSACTIONAL: i16 = 0x10;
pub const ATTR_CONTROL: i16 = 0x20;
pub const ATTR_DELETE_HORIZON: i16 = 0x40;

pub const NO_SEQUENCE: i32 = -1;

#[inline(always)]
fn be_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}
#[inline(always)]
fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(b[at..at + 4].try_into().unwrap())
}
#[inline(always)]
fn be_i64(b: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(b[at..at + 8].try_into().unwrap())
}

/// Every field of a v2 batch header, decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    /// The Length field: batch size minus LOG_OVERHEAD.
    pub length: i32,
    pub partition_leader_epoch: i32,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub records_count: i32,
}

impl BatchHeader {
    /// Decodes the 61-byte header. `b` must hold at least RECORD_BATCH_OVERHEAD bytes.
    #[inline]
    pub fn parse(b: &[u8]) -> BatchHeader {
        BatchHeader {
            base_offset: be_i64(b, 0),
            length: be_i32(b, 8),
            partition_leader_epoch: be_i32(b, 12),
            magic: b[16] as i8,
            crc: be_i32(b, 17) as u32,
            attributes: be_i16(b, 21),
            last_offset_delta: be_i32(b, 23),
            base_timestamp: be_i64(b, 27),
            max_timestamp: be_i64(b, 35),
            producer_id: be_i64(b, 43),
            producer_epoch: be_i16(b, 51),
            base_sequence: be_i32(b, 53),
            records_count: be_i32(b, 57),
        }
    }
    pub fn size(&self) -> usize {
        self.length as usize + LOG_OVERHEAD
    }
    pub fn last_offset(&self) -> i64 {
        self.base_offset + self.last_offset_delta as i64
    }
    pub fn codec_id(&self) -> u8 {
        (self.attributes & ATTR_COMPRESSION_MASK) as u8
    }
    pub fn codec(&self) -> Option<Codec> {
        Codec::from_id(self.codec_id())
    }
    pub fn is_log_append_time(&self) -> bool {
        self.attributes & ATTR_TIMESTAMP_TYPE != 0
    }
    pub fn timestamp_type_name(&self) -> &'static str {
        if self.is_log_append_time() {
            "LogAppendTime"
        } else {
            "CreateTime"
        }
    }
    pub fn is_transactional(&self) -> bool {
        self.attributes & ATTR_TRANSACTIONAL != 0
    }
    pub fn is_control(&self) -> bool {
        self.attributes & ATTR_CONTROL != 0
    }
    pub fn has_delete_horizon(&self) -> bool {
        self.attributes & ATTR_DELETE_HORIZON != 0
    }
    /// `deleteHorizonMs` as Kafka reports it: the base timestamp when the flag is set.
    pub fn delete_horizon_ms(&self) -> Option<i64> {
        if self.has_delete_horizon() {
            Some(self.base_timestamp)
        } else {
            None
        }
    }
    /// Kafka's `DefaultRecordBatch.lastSequence`: base + delta, wrapping at i32::MAX.
    pub fn last_sequence(&self) -> i32 {
        if self.base_sequence == NO_SEQUENCE {
            return NO_SEQUENCE;
        }
        let delta = self.last_offset_delta as i64;
        let s = self.base_sequence as i64 + delta;
        if s > i32::MAX as i64 {
            (s - i32::MAX as i64 - 1) as i32
        } else {
            s as i32
        }
    }
    /// Sequence of the record at `offset_delta` (Kafka's `DefaultRecord.sequence`).
    pub fn record_sequence(&self, offset_delta: i32) -> i32 {
        if self.base_sequence == NO_SEQUENCE {
            return NO_SEQUENCE;
        }
        let s = self.base_sequence as i64 + offset_delta as i64;
        if s > i32::MAX as i64 {
            (s - i32::MAX as i64 - 1) as i32
        } else {
            s as i32
        }
    }
}

/// The outcome of locating one batch in a buffer.
pub enum NextBatch {
    /// A complete batch: its header and its byte range in the buffer.
    Batch(BatchHeader, Range<usize>),
    /// No bytes left.
    End,
}

/// Locates the batch starting at `pos`. Validates sizes and magic, but not the CRC.
/// `base` is the file position of `buf[0]`, used in error messages.
#[inline]
pub fn next_batch(buf: &[u8], pos: usize, base: u64) -> Result<NextBatch> {
    if pos > buf.len() {
        return Err(Error::invalid(format!("position {} is past the end of the data ({} bytes)", base + pos as u64, buf.len())));
    }
    let remaining = buf.len() - pos;
    if remaining == 0 {
        return Ok(NextBatch::End);
    }
    let fpos = base + pos as u64;
    if remaining < LOG_OVERHEAD {
        return Err(Error::truncated(fpos, None, format!("{remaining} trailing bytes, fewer than the 12-byte log overhead")));
    }
    let b = &buf[pos..];
    let base_offset = be_i64(b, 0);
    let length = be_i32(b, 8);
    if remaining < HEADER_SIZE_UP_TO_MAGIC {
        return Err(Error::truncated(fpos, Some(base_offset), format!("{remaining} trailing bytes, too few to hold a batch header")));
    }
    // As Kafka's FileLogInputStream.nextBatch: the size is checked against the smallest
    // overhead of any format (LegacyRecord.RECORD_OVERHEAD_V0) before the magic byte is read,
    // so a zero-filled tail (a torn write into preallocated space) is corrupt, not "magic 0".
    if length < LEGACY_RECORD_OVERHEAD_V0 {
        return Err(Error::corrupt(fpos, Some(base_offset), format!("record size {length} is smaller than the minimum record overhead ({LEGACY_RECORD_OVERHEAD_V0})")));
    }
    let magic = b[MAGIC_OFFSET] as i8;
    if magic != 2 {
        if magic == 0 || magic == 1 {
            return Err(Error {
                kind: ErrorKind::Unsupported,
                position: Some(fpos),
                offset: Some(base_offset),
                reason: format!("message format v{magic} (magic {magic}, Kafka < 0.11) is not supported; only record batch v2"),
            });
        }
        return Err(Error::corrupt(fpos, Some(base_offset), format!("invalid magic byte {magic}")));
    }
    if length < (RECORD_BATCH_OVERHEAD - LOG_OVERHEAD) as i32 {
        return Err(Error::corrupt(fpos, Some(base_offset), format!("batch length {length} is smaller than the minimum {}", RECORD_BATCH_OVERHEAD - LOG_OVERHEAD)));
    }
    let size = length as usize + LOG_OVERHEAD;
    if size > remaining {
        return Err(Error::truncated(fpos, Some(base_offset), format!("batch of {size} bytes runs past the end ({remaining} bytes left)")));
    }
    let h = BatchHeader::parse(b);
    Ok(NextBatch::Batch(h, pos..pos + size))
}

/// CRC-32C over bytes [21, end) of a complete batch.
#[inline]
pub fn compute_crc(batch: &[u8]) -> u32 {
    crc::crc32c(&batch[ATTRIBUTES_OFFSET..])
}

/// Checks the stored CRC and the header's internal consistency.
pub fn validate(h: &BatchHeader, batch: &[u8], fpos: u64) -> Result<()> {
    let computed = compute_crc(batch);
    if computed != h.crc {
        return Err(Error::corrupt(fpos, Some(h.base_offset), format!("CRC mismatch: stored {} computed {computed}", h.crc)));
    }
    if h.records_count < 0 {
        return Err(Error::corrupt(fpos, Some(h.base_offset), format!("negative records count {}", h.records_count)));
    }
    if h.last_offset_delta < 0 {
        return Err(Error::corrupt(fpos, Some(h.base_offset), format!("negative last offset delta {}", h.last_offset_delta)));
    }
    if h.codec().is_none() {
        return Err(Error::corrupt(fpos, Some(h.base_offset), format!("unknown compression codec id {}", h.codec_id())));
    }
    Ok(())
}

/// One record inside a batch; ranges index into the (decompressed) records buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordView {
    pub attributes: i8,
    pub timestamp_delta: i64,
    pub offset_delta: i32,
    pub key: Option<Range<u32>>,
    pub value: Option<Range<u32>>,
    /// Raw header area (after the headers count) and the count.
    pub headers: Range<u32>,
    pub header_count: u32,
    /// Total size of the record including its length varint.
    pub size: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderView {
    pub key: Range<u32>,
    pub value: Option<Range<u32>>,
}

/// Reads a length-prefixed (zig-zag varint) byte field; -1 = null.
#[inline(always)]
fn read_bytes_field(buf: &[u8], pos: &mut usize, end: usize, what: &str) -> std::result::Result<Option<Range<u32>>, String> {
    let n = read_varint(&buf[..end], pos).ok_or_else(|| format!("invalid {what} length varint"))?;
    if n < 0 {
        if n != -1 {
            return Err(format!("invalid {what} length {n}"));
        }
        return Ok(None);
    }
    let n = n as usize;
    if end - *pos < n {
        return Err(format!("{what} of {n} bytes runs past the end of the record"));
    }
    let r = *pos as u32..(*pos + n) as u32;
    *pos += n;
    Ok(Some(r))
}

/// Parses one record at `*pos` (which ends no later than `end`).
#[inline(always)]
pub fn read_record(buf: &[u8], pos: &mut usize, end: usize) -> std::result::Result<RecordView, String> {
    let start = *pos;
    let len = read_varint(&buf[..end], pos).ok_or("invalid record length varint")?;
    if len <= 0 {
        return Err(format!("invalid record size {len}"));
    }
    let body_start = *pos;
    let len = len as usize;
    if end - body_start < len {
        return Err(format!("record of {len} bytes runs past the end of the batch"));
    }
    let rend = body_start + len;
    let attributes = buf[*pos] as i8;
    *pos += 1;
    let timestamp_delta = read_varlong(&buf[..rend], pos).ok_or("invalid timestamp delta varlong")?;
    let offset_delta = read_varint(&buf[..rend], pos).ok_or("invalid offset delta varint")?;
    let key = read_bytes_field(buf, pos, rend, "key")?;
    let value = read_bytes_field(buf, pos, rend, "value")?;
    let hc = read_varint(&buf[..rend], pos).ok_or("invalid headers count varint")?;
    if hc < 0 {
        return Err(format!("invalid negative header count {hc}"));
    }
    let hstart = *pos;
    for _ in 0..hc {
        let k = read_bytes_field(buf, pos, rend, "header key")?;
        if k.is_none() {
            return Err("invalid null header key".into());
        }
        read_bytes_field(buf, pos, rend, "header value")?;
    }
    if *pos != rend {
        return Err(format!("invalid record size: expected to read {len} bytes in record payload, but instead read {}", *pos - body_start));
    }
    Ok(RecordView {
        attributes,
        timestamp_delta,
        offset_delta,
        key,
        value,
        headers: hstart as u32..rend as u32,
        header_count: hc as u32,
        size: (rend - start) as u32,
    })
}

/// Parses the headers of a record again (they were validated by `read_record`).
pub fn read_headers(buf: &[u8], r: &RecordView) -> Vec<HeaderView> {
    let mut out = Vec::with_capacity(r.header_count as usize);
    let mut pos = r.headers.start as usize;
    let end = r.headers.end as usize;
    for _ in 0..r.header_count {
        let k = read_bytes_field(buf, &mut pos, end, "header key").ok().flatten().unwrap_or(0..0);
        let v = read_bytes_field(buf, &mut pos, end, "header value").ok().flatten();
        out.push(HeaderView { key: k, value: v });
    }
    out
}

/// The records area of a batch: borrowed when uncompressed, owned after decompression.
pub enum RecordsData<'a> {
    Borrowed(&'a [u8]),
    Owned(Vec<u8>),
}

impl RecordsData<'_> {
    pub fn bytes(&self) -> &[u8] {
        match self {
            RecordsData::Borrowed(b) => b,
            RecordsData::Owned(v) => v,
        }
    }
}

/// Returns the (decompressed) records area of a complete batch; a compressed one may inflate to
/// at most `compression::max_uncompressed_bytes()`.
pub fn records_data<'a>(h: &BatchHeader, batch: &'a [u8], fpos: u64) -> Result<RecordsData<'a>> {
    records_data_limited(h, batch, fpos, compression::max_uncompressed_bytes())
}

/// `records_data` with an explicit limit on the decompressed size.
pub fn records_data_limited<'a>(h: &BatchHeader, batch: &'a [u8], fpos: u64, limit: usize) -> Result<RecordsData<'a>> {
    let area = &batch[RECORD_BATCH_OVERHEAD..];
    match h.codec() {
        Some(Codec::None) => Ok(RecordsData::Borrowed(area)),
        Some(c) => compression::decompress_limited(c, area, (h.records_count.max(0) as usize).saturating_mul(24), limit)
            .map(RecordsData::Owned)
            .map_err(|e| e.at(fpos, Some(h.base_offset))),
        None => Err(Error::corrupt(fpos, Some(h.base_offset), format!("unknown compression codec id {}", h.codec_id()))),
    }
}

/// Parses every record of the records area, checking counts and sizes like Kafka does.
pub fn parse_records(h: &BatchHeader, data: &[u8], fpos: u64, out: &mut Vec<RecordView>) -> Result<()> {
    let n = record_count(h, data, fpos)?;
    out.reserve(n);
    let mut pos = 0usize;
    let mut prefetch = Prefetch { next: 0 };
    let mut deltas = Deltas::new(h);
    for i in 0..n {
        prefetch.ahead_of(data, pos);
        match read_record(data, &mut pos, data.len()) {
            Ok(r) => {
                deltas.check(&r).map_err(|reason| record_error(h, fpos, i, n, &reason))?;
                out.push(r)
            }
            Err(reason) => return Err(record_error(h, fpos, i, n, &reason)),
        }
    }
    if pos != data.len() {
        return Err(bytes_left_error(h, fpos, data.len() - pos, n));
    }
    Ok(())
}

/// The offset deltas of a batch's records: each above the one before (a producer writes 0..n-1,
/// compaction keeps a subset) and none above the batch's `lastOffsetDelta`, which compaction
/// keeps as it was.
struct Deltas {
    prev: i64,
    last: i32,
}

impl Deltas {
    #[inline(always)]
    fn new(h: &BatchHeader) -> Self {
        Deltas { prev: -1, last: h.last_offset_delta }
    }

    #[inline(always)]
    fn check(&mut self, r: &RecordView) -> std::result::Result<(), String> {
        let d = r.offset_delta as i64;
        // one unsigned compare: d - prev - 1 must be below last - prev (d in prev+1..=last)
        if ((d - self.prev - 1) as u64) >= ((self.last as i64 - self.prev) as u64) {
            return Err(delta_error(r.offset_delta, self.prev, self.last));
        }
        self.prev = d;
        Ok(())
    }
}

#[cold]
fn delta_error(d: i32, prev: i64, last: i32) -> String {
    if d > last {
        format!("offset delta {d} is above the batch's lastOffsetDelta {last}")
    } else {
        format!("offset delta {d} does not follow the previous record's {prev}")
    }
}

/// How far ahead of the record being parsed its bytes are asked for.
const PREFETCH_DISTANCE: usize = 1024;

/// Asks the CPU to start loading every cache line up to `PREFETCH_DISTANCE` bytes past the
/// record being parsed (perhaps past the end of the data: a prefetch is only a hint and never
/// faults). Records are parsed in a chain of dependent loads (each length says where the next
/// record starts), which the hardware prefetcher does not run ahead of across pages; without
/// this, parsing a log that is not in the cache waits on memory for most of its time.
struct Prefetch {
    next: usize,
}

impl Prefetch {
    #[inline(always)]
    fn ahead_of(&mut self, data: &[u8], pos: usize) {
        while self.next < pos + PREFETCH_DISTANCE {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: _mm_prefetch is a hint: it reads nothing and cannot fault, whatever the
            // address (wrapping_add: computing it is not an access).
            unsafe {
                use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
                _mm_prefetch::<_MM_HINT_T0>(data.as_ptr().wrapping_add(self.next).cast());
            }
            #[cfg(not(target_arch = "x86_64"))]
            let _ = data;
            self.next += 64;
        }
    }
}

/// The declared record count, checked against the data size (before anything is allocated for it).
pub fn record_count(h: &BatchHeader, data: &[u8], fpos: u64) -> Result<usize> {
    let n = h.records_count;
    if n < 0 {
        return Err(Error::corrupt(fpos, Some(h.base_offset), format!("negative records count {n}")));
    }
    // Each record takes at least 7 bytes; refuse absurd counts before allocating.
    if (n as usize) > data.len() / 7 + 1 {
        return Err(Error::corrupt(fpos, Some(h.base_offset), format!("records count {n} cannot fit in {} bytes", data.len())));
    }
    // Records have distinct offset deltas from 0 to lastOffsetDelta.
    if n as i64 > h.last_offset_delta as i64 + 1 {
        return Err(Error::corrupt(fpos, Some(h.base_offset), format!(
            "records count {n} is more than lastOffsetDelta {} + 1", h.last_offset_delta)));
    }
    Ok(n as usize)
}

/// Parses the records of a records area one at a time, for a caller that hands each one out
/// before it asks for the next (Python's record iterator). The checks are those of
/// `for_each_record`, which is this cursor in one loop.
pub struct RecordCursor {
    n: usize,
    i: usize,
    pos: usize,
    done: bool,
    prefetch: Prefetch,
    deltas: Deltas,
}

impl RecordCursor {
    /// A cursor over `data`, the records area of the batch `h` at file position `fpos`; fails
    /// when the declared record count cannot fit in it.
    pub fn new(h: &BatchHeader, data: &[u8], fpos: u64) -> Result<Self> {
        Ok(RecordCursor { n: record_count(h, data, fpos)?, i: 0, pos: 0, done: false, prefetch: Prefetch { next: 0 }, deltas: Deltas::new(h) })
    }

    /// The next record; None after the last one (or after an error). Bytes left over after the
    /// declared count are an error in place of the end.
    #[inline(always)]
    pub fn next(&mut self, h: &BatchHeader, data: &[u8], fpos: u64) -> Option<Result<RecordView>> {
        if self.done {
            return None;
        }
        if self.i == self.n {
            self.done = true;
            if self.pos != data.len() {
                return Some(Err(bytes_left_error(h, fpos, data.len() - self.pos, self.n)));
            }
            return None;
        }
        self.prefetch.ahead_of(data, self.pos);
        match read_record(data, &mut self.pos, data.len()) {
            Ok(r) => {
                if let Err(reason) = self.deltas.check(&r) {
                    self.done = true;
                    return Some(Err(record_error(h, fpos, self.i, self.n, &reason)));
                }
                self.i += 1;
                Some(Ok(r))
            }
            Err(reason) => {
                self.done = true;
                Some(Err(record_error(h, fpos, self.i, self.n, &reason)))
            }
        }
    }
}

/// Parses the records of the records area one at a time, handing each to `f` (checking counts and
/// sizes like `parse_records`); stops at the first error, a corrupt record's or `f`'s.
#[inline]
pub fn for_each_record<E: From<Error>>(h: &BatchHeader, data: &[u8], fpos: u64, mut f: impl FnMut(RecordView) -> std::result::Result<(), E>) -> std::result::Result<(), E> {
    // One loop rather than a RecordCursor: its end-of-records checks cost ~2% here.
    let n = record_count(h, data, fpos)?;
    let mut pos = 0usize;
    let mut prefetch = Prefetch { next: 0 };
    let mut deltas = Deltas::new(h);
    for i in 0..n {
        prefetch.ahead_of(data, pos);
        match read_record(data, &mut pos, data.len()) {
            Ok(r) => {
                if let Err(reason) = deltas.check(&r) {
                    return Err(record_error(h, fpos, i, n, &reason).into());
                }
                f(r)?
            }
            Err(reason) => return Err(record_error(h, fpos, i, n, &reason).into()),
        }
    }
    if pos != data.len() {
        return Err(bytes_left_error(h, fpos, data.len() - pos, n).into());
    }
    Ok(())
}

#[cold]
fn record_error(h: &BatchHeader, fpos: u64, i: usize, n: usize, reason: &str) -> Error {
    Error::corrupt(fpos, Some(h.base_offset), format!("record {i} of {n}: {reason}"))
}

#[cold]
fn bytes_left_error(h: &BatchHeader, fpos: u64, left: usize, n: usize) -> Error {
    Error::corrupt(fpos, Some(h.base_offset), format!("incorrect declared batch size: {left} bytes remain after {n} records"))
}

/// Kafka's name of a control record type (`ControlRecordType`), `UNKNOWN` for one it does not define.
pub fn control_type_name(t: i16) -> &'static str {
    crate::schema::generated::control_type_name(t).unwrap_or("UNKNOWN")
}

/// Decodes a control record key: int16 version, int16 type.
pub fn parse_control_key(key: Option<&[u8]>) -> std::result::Result<(i16, i16), String> {
    let k = key.ok_or("control record has a null key")?;
    if k.len() < 4 {
        return Err(format!("control record key of {} bytes is shorter than 4", k.len()));
    }
    let version = be_i16(k, 0);
    if version < 0 {
        return Err(format!("invalid control record key version {version}"));
    }
    Ok((version, be_i16(k, 2)))
}

/// An `EndTransactionMarker` value: int16 version, int32 coordinator epoch.
pub fn parse_end_txn_marker(value: Option<&[u8]>) -> std::result::Result<(i16, i32), String> {
    let v = value.ok_or("end transaction marker has a null value")?;
    if v.len() < 6 {
        return Err(format!("end transaction marker value of {} bytes is shorter than 6", v.len()));
    }
    Ok((be_i16(v, 0), be_i32(v, 2)))
}

/// What a leader does to a client's batches before appending them (Kafka's `LogValidator` with
/// offsets assigned in place, for magic 2): every batch of `buf` is checked (sizes, magic, CRC,
/// a record count that matches its offset range), then gets consecutive offsets from
/// `base_offset`, the `partition_leader_epoch`, and a new CRC. Returns the new bytes and the
/// number of records. A partial trailing batch is an error: a produce request holds whole ones.
pub fn assign_offsets(buf: &[u8], base_offset: i64, partition_leader_epoch: i32) -> Result<(Vec<u8>, i64)> {
    let mut out = buf.to_vec();
    let mut pos = 0usize;
    let mut next = base_offset;
    while let NextBatch::Batch(h, range) = next_batch(buf, pos, 0)? {
        let fpos = range.start as u64;
        validate(&h, &buf[range.clone()], fpos)?;
        if h.records_count as i64 != h.last_offset_delta as i64 + 1 {
            return Err(Error::corrupt(fpos, Some(h.base_offset), format!(
                "{} records but a last offset delta of {}", h.records_count, h.last_offset_delta)));
        }
        let b = &mut out[range.clone()];
        b[0..8].copy_from_slice(&next.to_be_bytes());
        b[12..16].copy_from_slice(&partition_leader_epoch.to_be_bytes());
        let crc = compute_crc(b);
        b[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
        next += h.records_count as i64;
        pos = range.end;
    }
    Ok((out, next - base_offset))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    #[test]
    fn zero_filled_tail_is_corrupt_not_magic_0() {
        let zeros = [0u8; 64];
        let Err(e) = next_batch(&zeros, 0, 100) else { panic!("zeros parsed as a batch") };
        assert_eq!((e.kind, e.position), (ErrorKind::Corrupt, Some(100)));
    }

    /// A batch of three records with the given offset deltas and lastOffsetDelta (CRC valid).
    fn batch_with(deltas: [i32; 3], last_offset_delta: i32) -> Vec<u8> {
        use crate::builder::{encode_batch_with, write_record, BatchParams, RecordInput};
        let r = RecordInput { timestamp: 0, key: None, value: Some(b"v"), headers: vec![] };
        let mut out = Vec::new();
        encode_batch_with(&BatchParams::default(), 3, 0, 0, 64, &mut out, |o| {
            for d in deltas {
                write_record(o, d, 0, &r);
            }
        })
        .unwrap();
        out[23..27].copy_from_slice(&last_offset_delta.to_be_bytes());
        let crc = compute_crc(&out);
        out[17..21].copy_from_slice(&crc.to_be_bytes());
        out
    }

    fn parse(b: &[u8]) -> Result<usize> {
        let NextBatch::Batch(h, _) = next_batch(b, 0, 0)? else { panic!() };
        validate(&h, b, 0)?;
        let data = records_data(&h, b, 0)?;
        let mut views = Vec::new();
        parse_records(&h, data.bytes(), 0, &mut views)?;
        // the other two readers agree with parse_records
        let mut n = 0;
        for_each_record(&h, data.bytes(), 0, |_| -> Result<()> {
            n += 1;
            Ok(())
        })?;
        let mut c = RecordCursor::new(&h, data.bytes(), 0)?;
        while let Some(r) = c.next(&h, data.bytes(), 0) {
            r?;
        }
        assert_eq!(n, views.len());
        Ok(views.len())
    }

    #[test]
    fn offset_deltas_rise_and_stay_within_the_last_offset_delta() {
        assert_eq!(parse(&batch_with([0, 1, 2], 2)).unwrap(), 3);
        // compaction keeps a subset of the records and the batch's lastOffsetDelta
        assert_eq!(parse(&batch_with([1, 4, 9], 9)).unwrap(), 3);
        let e = parse(&batch_with([0, 1, 2], 1)).unwrap_err();
        assert!(e.reason.contains("records count 3 is more than lastOffsetDelta 1 + 1"), "{}", e.reason);
        let e = parse(&batch_with([0, 1, 7], 5)).unwrap_err();
        assert!(e.reason.contains("record 2 of 3: offset delta 7 is above the batch's lastOffsetDelta 5"), "{}", e.reason);
        let e = parse(&batch_with([0, 2, 2], 5)).unwrap_err();
        assert!(e.reason.contains("record 2 of 3: offset delta 2 does not follow the previous record's 2"), "{}", e.reason);
        let e = parse(&batch_with([-1, 0, 1], 5)).unwrap_err();
        assert!(e.reason.contains("record 0 of 3: offset delta -1"), "{}", e.reason);
    }

    #[test]
    fn magic_0_message_with_a_plausible_size_is_unsupported() {
        let mut m = vec![0u8; 12 + 20];
        m[8..12].copy_from_slice(&20i32.to_be_bytes());
        let Err(e) = next_batch(&m, 0, 0) else { panic!() };
        assert_eq!(e.kind, ErrorKind::Unsupported);
    }
}
