//! A typed decoder for `PartitionChangeRecord` values, the bulk of a busy controller's log.
//!
//! It reads the common, well-formed shapes straight into a [`PartitionChange`] without building
//! the generic value tree. Anything else -- an unknown or repeated tagged field, a version it
//! does not know, bytes that do not parse -- returns None, and the caller decodes the value with
//! the generic codec, which gives the same result or Kafka's precise error. Every value it
//! accepts decodes to the same record through the generic codec (tested in `tests.rs`).

use super::replay::PartitionChange;
use super::Uuid;
use crate::varint::read_uvarint;

const PARTITION_CHANGE: u32 = 5;

struct Cursor<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let s = self.b.get(self.pos..end)?;
        self.pos = end;
        Some(s)
    }
    fn uvarint(&mut self) -> Option<u32> {
        read_uvarint(self.b, &mut self.pos)
    }
    fn i32(&mut self) -> Option<i32> {
        Some(i32::from_be_bytes(self.take(4)?.try_into().ok()?))
    }
    fn uuid(&mut self) -> Option<Uuid> {
        self.take(16)?.try_into().ok()
    }
    /// A compact nullable array length: None = null.
    fn compact_len(&mut self) -> Option<Option<usize>> {
        let n = self.uvarint()?;
        Some(if n == 0 { None } else { Some(n as usize - 1) })
    }
    fn int32_array(&mut self) -> Option<Option<Vec<i32>>> {
        let Some(n) = self.compact_len()? else { return Some(None) };
        let bytes = self.take(n.checked_mul(4)?)?;
        Some(Some(bytes.chunks_exact(4).map(|c| i32::from_be_bytes([c[0], c[1], c[2], c[3]])).collect()))
    }
    fn uuid_array(&mut self) -> Option<Option<Vec<Uuid>>> {
        let Some(n) = self.compact_len()? else { return Some(None) };
        let bytes = self.take(n.checked_mul(16)?)?;
        Some(Some(bytes.chunks_exact(16).filter_map(|c| c.try_into().ok()).collect()))
    }
}

/// Decodes a framed `PartitionChangeRecord` value of versions 0-2, or returns None.
pub(crate) fn decode_partition_change(value: &[u8]) -> Option<PartitionChange> {
    let mut c = Cursor { b: value, pos: 0 };
    if c.uvarint()? != 1 || c.uvarint()? != PARTITION_CHANGE {
        return None;
    }
    let version = c.uvarint()?;
    if version > 2 {
        return None;
    }
    let mut out = PartitionChange {
        partition_id: c.i32()? as i64,
        topic_id: c.uuid()?,
        leader: -2,
        leader_recovery_state: -1,
        ..Default::default()
    };
    let n = c.uvarint()?;
    let mut seen = 0u32;
    for _ in 0..n {
        let tag = c.uvarint()?;
        let size = c.uvarint()? as usize;
        let end = c.pos.checked_add(size)?;
        if tag >= 32 || seen & (1 << tag) != 0 {
            return None;
        }
        seen |= 1 << tag;
        match (tag, version) {
            (0, _) => out.isr = c.int32_array()?,
            (1, _) => out.leader = c.i32()? as i64,
            (2, _) => out.replicas = c.int32_array()?,
            (3, _) => out.removing_replicas = c.int32_array()?,
            (4, _) => out.adding_replicas = c.int32_array()?,
            (5, _) => out.leader_recovery_state = *c.take(1)?.first()? as i8 as i64,
            (6, 2) => out.eligible_leader_replicas = c.int32_array()?,
            (7, 2) => out.last_known_elr = c.int32_array()?,
            (8, 1..=2) => out.directories = c.uuid_array()?,
            _ => return None,
        }
        if c.pos != end {
            return None;
        }
    }
    if c.pos != value.len() {
        return None;
    }
    Some(out)
}
