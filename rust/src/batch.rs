//! Record batch v2 ("magic 2"): the header view, the record iterator, control record keys.
//! Layout: see Kafka's `DefaultRecordBatch` (clients, `org.apache.kafka.common.record`) and KIP-98.

use crate::compression::Codec;
use crate::crc;
use crate::error::{Error, ErrorKind, Result};
use std::ops::Range;

mod records;

pub use records::{
    for_each_record, parse_records, read_headers, read_record, record_count, records_data, records_data_limited, HeaderView, RecordCursor, RecordView, RecordsData,
};

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
