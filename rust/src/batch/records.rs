//! The records inside a batch: the record and header views, the readers (a whole batch into a
//! vector, a callback per record, a cursor) and the checks of their offset deltas and sizes.

use super::{BatchHeader, RECORD_BATCH_OVERHEAD};
use crate::compression::{self, Codec};
use crate::error::{Error, Result};
use crate::varint::{read_varint, read_varlong};
use std::ops::Range;

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
