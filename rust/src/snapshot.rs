//! KRaft snapshot files (`<end offset>-<epoch>.checkpoint`): validation of their structure and
//! the values of the control records that frame them. See Kafka's ``Snapshots``, ``RecordsSnapshotWriter`` and ``ControlRecordUtils``.

use crate::batch::{self, NextBatch, RecordView};
use crate::error::{Error, Result};

pub use crate::schema::control_types::{KRAFT_VERSION, KRAFT_VOTERS, SNAPSHOT_FOOTER, SNAPSHOT_HEADER};
/// `KafkaRaftClient.MAX_BATCH_SIZE_BYTES`.
pub const MAX_BATCH_SIZE: usize = 8 * 1024 * 1024;

/// `SnapshotHeaderRecord` v0: Version, LastContainedLogTimestamp, no tagged fields.
pub fn header_value(last_contained_log_timestamp: i64) -> Vec<u8> {
    let mut v = Vec::with_capacity(11);
    v.extend_from_slice(&0i16.to_be_bytes());
    v.extend_from_slice(&last_contained_log_timestamp.to_be_bytes());
    v.push(0);
    v
}

/// `SnapshotFooterRecord` v0: Version, no tagged fields.
pub fn footer_value() -> Vec<u8> {
    vec![0, 0, 0]
}

/// `KRaftVersionRecord` v0: Version, KRaftVersion, no tagged fields.
pub fn kraft_version_value(level: i16) -> Vec<u8> {
    let mut v = vec![0, 0];
    v.extend_from_slice(&level.to_be_bytes());
    v.push(0);
    v
}

/// The 4-byte key of a control record: version 0, type.
pub fn control_key(t: i16) -> [u8; 4] {
    let k = t.to_be_bytes();
    [0, 0, k[0], k[1]]
}

#[derive(Debug, Clone, Default)]
pub struct SnapshotReport {
    pub batches: u64,
    pub records: u64,
    /// Metadata (data) records, i.e. without the control records.
    pub data_records: u64,
    pub valid_bytes: u64,
    pub last_contained_log_timestamp: Option<i64>,
    pub kraft_version: Option<i16>,
    pub has_voters: bool,
    pub has_footer: bool,
    /// Offset after the last record (records are numbered from 0 inside a snapshot).
    pub next_offset: i64,
    pub error: Option<Error>,
}

fn bad(pos: u64, off: i64, reason: String) -> Error {
    Error::corrupt(pos, Some(off), reason)
}

/// Checks a whole snapshot file: every batch valid (CRC, sizes), offsets contiguous from 0,
/// every batch's leader epoch equal to the snapshot's epoch (when given), a first control
/// batch whose first record is the SnapshotHeader, KRaft record rules for data records
/// (null key, timestamp delta 0, no headers, non-empty value), and a final SnapshotFooter batch
/// with nothing after it. Stops at the first problem.
pub fn validate(buf: &[u8], epoch: Option<i32>) -> SnapshotReport {
    let mut rep = SnapshotReport::default();
    if let Err(e) = validate_into(buf, epoch, &mut rep) {
        rep.error = Some(e);
    }
    rep
}

fn validate_into(buf: &[u8], epoch: Option<i32>, rep: &mut SnapshotReport) -> Result<()> {
    let mut pos = 0usize;
    let mut recs: Vec<RecordView> = Vec::new();
    loop {
        let (h, range) = match batch::next_batch(buf, pos, 0)? {
            NextBatch::End => break,
            NextBatch::Batch(h, r) => (h, r),
        };
        let fpos = pos as u64;
        let bytes = &buf[range.clone()];
        batch::validate(&h, bytes, fpos)?;
        if rep.has_footer {
            return Err(bad(fpos, h.base_offset, "batch after the SnapshotFooter".into()));
        }
        if h.base_offset != rep.next_offset {
            return Err(bad(fpos, h.base_offset, format!("batch base offset {} where offset {} was expected (snapshot offsets start at 0 and are contiguous)", h.base_offset, rep.next_offset)));
        }
        if let Some(e) = epoch {
            if h.partition_leader_epoch != e {
                return Err(bad(fpos, h.base_offset, format!("batch leader epoch {} differs from the snapshot epoch {e}", h.partition_leader_epoch)));
            }
        }
        if h.codec_id() != 0 {
            return Err(bad(fpos, h.base_offset, format!("compressed ({}) batch: KRaft snapshots are never compressed", h.codec().map_or("unknown", |c| c.name()))));
        }
        let data = batch::records_data(&h, bytes, fpos)?;
        let d = data.bytes();
        recs.clear();
        batch::parse_records(&h, d, fpos, &mut recs)?;
        if recs.is_empty() {
            return Err(bad(fpos, h.base_offset, "empty batch".into()));
        }
        crate::segment::check_dense_header(&h, fpos)?;
        let first_batch = rep.batches == 0;
        for (i, r) in recs.iter().enumerate() {
            let off = h.base_offset + r.offset_delta as i64;
            if r.offset_delta as i64 != i as i64 {
                return Err(crate::segment::dense_delta_error(&h, fpos, i, r.offset_delta));
            }
            if r.timestamp_delta != 0 {
                return Err(bad(fpos, h.base_offset, format!("record at offset {off} has timestamp delta {} (KRaft requires 0)", r.timestamp_delta)));
            }
            if r.header_count != 0 {
                return Err(bad(fpos, h.base_offset, format!("record at offset {off} has {} headers (KRaft requires none)", r.header_count)));
            }
            let key = r.key.as_ref().map(|k| &d[k.start as usize..k.end as usize]);
            let value = r.value.as_ref().map(|v| &d[v.start as usize..v.end as usize]);
            if value.is_none_or(|v| v.is_empty()) {
                return Err(bad(fpos, h.base_offset, format!("record at offset {off} has no value")));
            }
            if h.is_control() {
                let (_, t) = batch::parse_control_key(key).map_err(|e| bad(fpos, h.base_offset, format!("record at offset {off}: {e}")))?;
                if first_batch && i == 0 && t != SNAPSHOT_HEADER {
                    return Err(bad(fpos, h.base_offset, format!("first control record is {} , not a SnapshotHeader", batch::control_type_name(t))));
                }
                let v = value.unwrap();
                match t {
                    SNAPSHOT_HEADER => {
                        if !(first_batch && i == 0) {
                            return Err(bad(fpos, h.base_offset, format!("SnapshotHeader at offset {off}: only the first record may be one")));
                        }
                        if v.len() < 10 {
                            return Err(bad(fpos, h.base_offset, "SnapshotHeader value is too short".into()));
                        }
                        rep.last_contained_log_timestamp = Some(i64::from_be_bytes(v[2..10].try_into().unwrap()));
                    }
                    SNAPSHOT_FOOTER => {
                        if i + 1 != recs.len() {
                            return Err(bad(fpos, h.base_offset, format!("SnapshotFooter at offset {off} is not the last record")));
                        }
                        rep.has_footer = true;
                    }
                    KRAFT_VERSION => {
                        if v.len() < 4 {
                            return Err(bad(fpos, h.base_offset, "KRaftVersion value is too short".into()));
                        }
                        rep.kraft_version = Some(i16::from_be_bytes(v[2..4].try_into().unwrap()));
                    }
                    KRAFT_VOTERS => rep.has_voters = true,
                    other => {
                        return Err(bad(fpos, h.base_offset, format!("control record {} ({other}) does not belong in a snapshot", batch::control_type_name(other))));
                    }
                }
            } else {
                if first_batch {
                    return Err(bad(fpos, h.base_offset, "first batch is not a control batch with a SnapshotHeader".into()));
                }
                if key.is_some() {
                    return Err(bad(fpos, h.base_offset, format!("data record at offset {off} has a key (KRaft requires null)")));
                }
                rep.data_records += 1;
            }
        }
        rep.batches += 1;
        rep.records += recs.len() as u64;
        rep.next_offset = h.last_offset() + 1;
        pos = range.end;
        rep.valid_bytes = pos as u64;
    }
    if rep.batches == 0 {
        return Err(Error::truncated(0, None, "empty snapshot: no SnapshotHeader".to_string()));
    }
    if !rep.has_footer {
        return Err(Error::truncated(rep.valid_bytes, None, "snapshot ends without a SnapshotFooter (an unfinished write?)".to_string()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::{encode_batch, BatchParams, RecordInput};

    fn control(base: i64, t: i16, v: &[u8]) -> Vec<u8> {
        let k = control_key(t);
        let mut out = Vec::new();
        let p = BatchParams { base_offset: base, partition_leader_epoch: 3, control: true, ..Default::default() };
        encode_batch(&p, &[RecordInput { timestamp: 5, key: Some(&k), value: Some(v), headers: vec![] }], &mut out).unwrap();
        out
    }

    fn snapshot() -> Vec<u8> {
        let mut s = control(0, SNAPSHOT_HEADER, &header_value(42));
        let vals = [vec![1u8, 12, 0, 0], vec![1u8, 20, 0, 0]];
        let recs: Vec<RecordInput> = vals.iter().map(|v| RecordInput { timestamp: 5, key: None, value: Some(v), headers: vec![] }).collect();
        encode_batch(&BatchParams { base_offset: 1, partition_leader_epoch: 3, ..Default::default() }, &recs, &mut s).unwrap();
        s.extend(control(3, SNAPSHOT_FOOTER, &footer_value()));
        s
    }

    #[test]
    fn valid_snapshot() {
        let r = validate(&snapshot(), Some(3));
        assert!(r.error.is_none(), "{:?}", r.error);
        assert_eq!((r.batches, r.records, r.data_records, r.next_offset), (3, 4, 2, 4));
        assert_eq!(r.last_contained_log_timestamp, Some(42));
    }

    #[test]
    fn wrong_epoch_missing_footer_and_gaps() {
        assert!(validate(&snapshot(), Some(4)).error.unwrap().reason.contains("snapshot epoch"));
        let s = snapshot();
        let without_footer = &s[..s.len() - control(3, SNAPSHOT_FOOTER, &footer_value()).len()];
        assert!(validate(without_footer, Some(3)).error.unwrap().reason.contains("without a SnapshotFooter"));
        let mut gap = control(0, SNAPSHOT_HEADER, &header_value(1));
        gap.extend(control(5, SNAPSHOT_FOOTER, &footer_value()));
        assert!(validate(&gap, None).error.unwrap().reason.contains("contiguous"));
    }

    #[test]
    fn lying_last_offset_delta() {
        let mut s = snapshot();
        let n = s.len();
        let footer = control(3, SNAPSHOT_FOOTER, &footer_value()).len();
        let at = n - footer;
        s[at + 23..at + 27].copy_from_slice(&i32::MAX.to_be_bytes());
        let crc = batch::compute_crc(&s[at..]);
        s[at + 17..at + 21].copy_from_slice(&crc.to_be_bytes());
        let e = validate(&s, Some(3)).error.unwrap();
        assert!(e.reason.contains("lastOffsetDelta 2147483647 does not match the batch's 1 records"), "{}", e.reason);
        assert_eq!(e.position, Some(at as u64));
    }
}
