//! Offset index (`.index`: int32 relative offset, int32 position) and time index
//! (`.timeindex`: int64 timestamp, int32 relative offset), built with Kafka's rules
//! (`LogSegment.append` / `LogSegment.recover`, `TimeIndex.maybeAppend`).

use crate::error::{Error, ErrorKind, Result};

pub const OFFSET_ENTRY: usize = 8;
pub const TIME_ENTRY: usize = 12;
pub const DEFAULT_INDEX_INTERVAL: usize = 4096;
/// `segment.index.bytes` default: the most an index file may hold.
pub const DEFAULT_MAX_INDEX_SIZE: usize = 10 * 1024 * 1024;

fn idx_err(reason: String) -> Error {
    Error::new(ErrorKind::Index, reason)
}

/// Builds both index files for one segment.
#[derive(Debug, Clone)]
pub struct IndexBuilder {
    pub base_offset: i64,
    pub interval: usize,
    pub offset_index: Vec<u8>,
    pub time_index: Vec<u8>,
    last_indexed_offset: Option<i64>,
    /// Last entry of the time index; (-1, base offset) when empty, as in Kafka.
    last_time_entry: (i64, i64),
    time_entries: usize,
    /// (max timestamp so far, the offset Kafka pairs with it).
    pub max_ts: (i64, i64),
    pub bytes_since_last_entry: usize,
}

impl IndexBuilder {
    pub fn new(base_offset: i64, interval: usize) -> Self {
        IndexBuilder {
            base_offset,
            interval,
            offset_index: Vec::new(),
            time_index: Vec::new(),
            last_indexed_offset: None,
            last_time_entry: (-1, base_offset),
            time_entries: 0,
            max_ts: (-1, base_offset),
            bytes_since_last_entry: 0,
        }
    }

    fn relative(&self, offset: i64) -> Result<i32> {
        let rel = offset - self.base_offset;
        if rel < 0 || rel > i32::MAX as i64 {
            return Err(idx_err(format!("offset {offset} cannot be stored relative to base offset {}", self.base_offset)));
        }
        Ok(rel as i32)
    }

    fn append_offset_entry(&mut self, offset: i64, position: u64) -> Result<()> {
        if let Some(last) = self.last_indexed_offset {
            if offset <= last {
                return Err(idx_err(format!("offset index entry {offset} is not larger than the previous entry {last}")));
            }
        }
        if position > i32::MAX as u64 {
            return Err(idx_err(format!("position {position} does not fit the offset index")));
        }
        let rel = self.relative(offset)?;
        self.offset_index.extend_from_slice(&rel.to_be_bytes());
        self.offset_index.extend_from_slice(&(position as i32).to_be_bytes());
        self.last_indexed_offset = Some(offset);
        Ok(())
    }

    /// `TimeIndex.maybeAppend`: only a strictly larger timestamp adds an entry.
    pub fn maybe_append_time(&mut self, ts: i64, offset: i64) -> Result<()> {
        if self.time_entries != 0 && offset < self.last_time_entry.1 {
            return Err(idx_err(format!("time index offset {offset} is smaller than the last entry's {}", self.last_time_entry.1)));
        }
        if self.time_entries != 0 && ts < self.last_time_entry.0 {
            return Err(idx_err(format!("time index timestamp {ts} is smaller than the last entry's {}", self.last_time_entry.0)));
        }
        if ts > self.last_time_entry.0 {
            let rel = self.relative(offset)?;
            self.time_index.extend_from_slice(&ts.to_be_bytes());
            self.time_index.extend_from_slice(&rel.to_be_bytes());
            self.time_entries += 1;
            self.last_time_entry = (ts, offset);
        }
        Ok(())
    }

    /// The index rule of `LogSegment.append` and `LogSegment.recover` alike, one batch at a time
    /// (an append of several batches walks them): `position` is where the batch starts.
    pub fn on_recovered_batch(&mut self, last_offset: i64, max_timestamp: i64, position: u64, size: usize) -> Result<()> {
        if max_timestamp > self.max_ts.0 {
            self.max_ts = (max_timestamp, last_offset);
        }
        if self.bytes_since_last_entry > self.interval {
            self.append_offset_entry(last_offset, position)?;
            self.maybe_append_time(self.max_ts.0, self.max_ts.1)?;
            self.bytes_since_last_entry = 0;
        }
        self.bytes_since_last_entry += size;
        Ok(())
    }

    /// What Kafka does when a segment closes or rolls: one last time-index entry if new.
    pub fn finish(&mut self) -> Result<()> {
        let (ts, off) = self.max_ts;
        self.maybe_append_time(ts, off)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetEntry {
    pub offset: i64,
    pub position: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeEntry {
    pub timestamp: i64,
    pub offset: i64,
}

/// Whether an index file starts with two all-zero entries: space Kafka preallocated for an
/// active segment and has not trimmed (the broker is running or did not shut down cleanly).
/// No real index holds it: offsets strictly increase, so a second entry is never relative 0.
fn preallocated(data: &[u8], entry: usize) -> bool {
    data.len() >= 2 * entry && data[..2 * entry].iter().all(|&b| b == 0)
}

/// Reads the entries of an offset index. Like Kafka's dump tool, a zero entry after the first
/// (left by preallocation before a crash) ends the list; a file that is zeros from its first
/// entry on (an untrimmed active segment's index) has none.
pub fn read_offset_index(data: &[u8], base_offset: i64) -> Vec<OffsetEntry> {
    if preallocated(data, OFFSET_ENTRY) {
        return Vec::new();
    }
    let n = data.len() / OFFSET_ENTRY;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let e = &data[i * OFFSET_ENTRY..];
        let rel = i32::from_be_bytes(e[0..4].try_into().unwrap());
        let pos = i32::from_be_bytes(e[4..8].try_into().unwrap());
        if i > 0 && rel == 0 {
            break;
        }
        out.push(OffsetEntry { offset: base_offset + rel as i64, position: pos as u32 });
    }
    out
}

pub fn read_time_index(data: &[u8], base_offset: i64) -> Vec<TimeEntry> {
    if preallocated(data, TIME_ENTRY) {
        return Vec::new();
    }
    let n = data.len() / TIME_ENTRY;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let e = &data[i * TIME_ENTRY..];
        let ts = i64::from_be_bytes(e[0..8].try_into().unwrap());
        let rel = i32::from_be_bytes(e[8..12].try_into().unwrap());
        if i > 0 && rel == 0 {
            break;
        }
        out.push(TimeEntry { timestamp: ts, offset: base_offset + rel as i64 });
    }
    out
}

/// Kafka's `OffsetIndex.sanityCheck` (what decides whether an index is rebuilt at start-up).
pub fn sanity_check_offset_index(data: &[u8], base_offset: i64) -> Result<()> {
    if !data.len().is_multiple_of(OFFSET_ENTRY) {
        return Err(idx_err(format!("index file has {} bytes, which is not a multiple of {OFFSET_ENTRY}", data.len())));
    }
    let n = data.len() / OFFSET_ENTRY;
    if n > 0 {
        let last = &data[(n - 1) * OFFSET_ENTRY..];
        let rel = i32::from_be_bytes(last[0..4].try_into().unwrap());
        if rel < 0 {
            return Err(idx_err(format!("index has non-zero size but the last offset is {} which is less than the base offset {base_offset}", base_offset + rel as i64)));
        }
    }
    Ok(())
}

/// Kafka's `TimeIndex.sanityCheck`.
pub fn sanity_check_time_index(data: &[u8], base_offset: i64) -> Result<()> {
    if !data.len().is_multiple_of(TIME_ENTRY) {
        return Err(idx_err(format!("time index file has {} bytes, which is not a multiple of {TIME_ENTRY}", data.len())));
    }
    let n = data.len() / TIME_ENTRY;
    if n > 0 {
        let first_ts = i64::from_be_bytes(data[0..8].try_into().unwrap());
        let last = &data[(n - 1) * TIME_ENTRY..];
        let last_ts = i64::from_be_bytes(last[0..8].try_into().unwrap());
        let rel = i32::from_be_bytes(last[8..12].try_into().unwrap());
        if last_ts < first_ts {
            // the same words as Kafka's, and what they mean when the tail is preallocated zeros
            let used = (1..n).find(|&i| data[i * TIME_ENTRY..(i + 1) * TIME_ENTRY].iter().all(|&b| b == 0));
            let why = match used {
                Some(k) if data[k * TIME_ENTRY..].iter().all(|&b| b == 0) => format!(
                    "; entries {k}.. are zero-filled preallocation ({} bytes), as an unclean shutdown leaves the active \
                     segment's index: Kafka rebuilds this index from its segment at start-up", data.len()),
                _ => String::new(),
            };
            return Err(idx_err(format!("time index has non-zero size but the last timestamp is {last_ts} which is less than the first timestamp {first_ts}{why}")));
        }
        if rel < 0 {
            return Err(idx_err(format!("time index has non-zero size but the last offset is {} which is less than the base offset {base_offset}", base_offset + rel as i64)));
        }
    }
    Ok(())
}

/// Greatest entry with offset <= target (binary search), as `OffsetIndex.lookup`.
pub fn lookup_offset(entries: &[OffsetEntry], target: i64) -> Option<OffsetEntry> {
    let i = entries.partition_point(|e| e.offset <= target);
    if i == 0 {
        None
    } else {
        Some(entries[i - 1])
    }
}

/// Greatest entry with timestamp <= target, as `TimeIndex.lookup`.
pub fn lookup_time(entries: &[TimeEntry], target: i64) -> Option<TimeEntry> {
    let i = entries.partition_point(|e| e.timestamp <= target);
    if i == 0 {
        None
    } else {
        Some(entries[i - 1])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recovery_rule_first_batch_never_indexed() {
        let mut b = IndexBuilder::new(100, 4096);
        b.on_recovered_batch(109, 5, 0, 5000).unwrap();
        assert!(b.offset_index.is_empty());
        b.on_recovered_batch(119, 7, 5000, 100).unwrap();
        assert_eq!(read_offset_index(&b.offset_index, 100), vec![OffsetEntry { offset: 119, position: 5000 }]);
        assert_eq!(read_time_index(&b.time_index, 100), vec![TimeEntry { timestamp: 7, offset: 119 }]);
        b.finish().unwrap();
        assert_eq!(b.time_index.len(), TIME_ENTRY); // 7 is not new
    }

    #[test]
    fn finish_adds_newer_max_timestamp() {
        let mut b = IndexBuilder::new(0, 4096);
        b.on_recovered_batch(0, 10, 0, 100).unwrap();
        b.finish().unwrap();
        assert_eq!(read_time_index(&b.time_index, 0), vec![TimeEntry { timestamp: 10, offset: 0 }]);
    }

    #[test]
    fn preallocated_zeros_are_no_entries() {
        assert!(read_offset_index(&[0u8; 80], 364).is_empty());
        assert!(read_time_index(&[0u8; 120], 364).is_empty());
        // One trimmed entry (relative 0, position 0) is an entry.
        assert_eq!(read_offset_index(&[0u8; 8], 364), vec![OffsetEntry { offset: 364, position: 0 }]);
    }

    #[test]
    fn preallocated_time_index_tail_is_named() {
        let mut data = vec![0u8; 12 * 100];
        data[0..8].copy_from_slice(&1_795_592_084_006i64.to_be_bytes());
        data[8..12].copy_from_slice(&36i32.to_be_bytes());
        let err = sanity_check_time_index(&data, 0).unwrap_err().to_string();
        assert!(err.contains("last timestamp is 0 which is less than the first timestamp 1795592084006"), "{err}");
        assert!(err.contains("entries 1.. are zero-filled preallocation (1200 bytes)"), "{err}");
        // a zero entry in the middle followed by data is not preallocation
        data[12 * 50] = 1;
        let err = sanity_check_time_index(&data, 0).unwrap_err().to_string();
        assert!(!err.contains("preallocation"), "{err}");
    }

    #[test]
    fn lookups() {
        let e = vec![OffsetEntry { offset: 10, position: 100 }, OffsetEntry { offset: 20, position: 200 }];
        assert_eq!(lookup_offset(&e, 5), None);
        assert_eq!(lookup_offset(&e, 15).unwrap().position, 100);
        assert_eq!(lookup_offset(&e, 20).unwrap().position, 200);
    }
}
