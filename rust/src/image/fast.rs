//! Typed decoders for `PartitionChangeRecord` values, the bulk of a busy controller's log, and
//! `PartitionRecord` values, the bulk of a snapshot.
//!
//! It reads the common, well-formed shapes into a [`PartitionChange`] whose lists point into
//! the record's bytes, without building the generic value tree or allocating. Anything else -- an unknown or repeated tagged field, a version it
//! does not know, bytes that do not parse -- returns None, and the caller decodes the value with
//! the generic codec, which gives the same result or Kafka's precise error. Every value it
//! accepts decodes to the same record through the generic codec (tested in `tests.rs`).

use super::replay::Seq;
use crate::schema::api_keys;
use crate::schema::records::{NewPartition, PartitionChange};
use super::Uuid;
use crate::varint::read_uvarint;

const PARTITION_CHANGE: u32 = api_keys::PARTITION_CHANGE as u32;

/// A compact int32 array's elements, big-endian, as in the record.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct BeInts<'a>(&'a [u8]);

impl Seq<i32> for BeInts<'_> {
    fn count(&self) -> usize {
        self.0.len() / 4
    }
    fn assign_to(&self, v: &mut Vec<i32>) {
        v.clear();
        v.extend(self.0.chunks_exact(4).map(|c| i32::from_be_bytes([c[0], c[1], c[2], c[3]])));
    }
}

/// A compact uuid array's elements, as in the record.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct RawUuids<'a>(&'a [u8]);

impl Seq<Uuid> for RawUuids<'_> {
    fn count(&self) -> usize {
        self.0.len() / 16
    }
    fn assign_to(&self, v: &mut Vec<Uuid>) {
        v.clear();
        v.extend(self.0.chunks_exact(16).filter_map(|c| <Uuid>::try_from(c).ok()));
    }
}

/// A `PartitionChangeRecord` whose lists point into its bytes.
pub(crate) type ChangeView<'a> = PartitionChange<BeInts<'a>, RawUuids<'a>>;

/// A `PartitionRecord` whose lists point into its bytes.
pub(crate) type PartitionView<'a> = NewPartition<BeInts<'a>, RawUuids<'a>>;

const PARTITION: u32 = api_keys::PARTITION as u32;

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
    fn i8(&mut self) -> Option<i8> {
        Some(*self.take(1)?.first()? as i8)
    }
    fn uuid(&mut self) -> Option<Uuid> {
        self.take(16)?.try_into().ok()
    }
    /// A compact nullable array length: None = null.
    fn compact_len(&mut self) -> Option<Option<usize>> {
        let n = self.uvarint()?;
        Some(if n == 0 { None } else { Some(n as usize - 1) })
    }
    fn int32_array(&mut self) -> Option<Option<BeInts<'a>>> {
        let Some(n) = self.compact_len()? else { return Some(None) };
        Some(Some(BeInts(self.take(n.checked_mul(4)?)?)))
    }
    fn uuid_array(&mut self) -> Option<Option<RawUuids<'a>>> {
        let Some(n) = self.compact_len()? else { return Some(None) };
        Some(Some(RawUuids(self.take(n.checked_mul(16)?)?)))
    }
}

/// Decodes a framed `PartitionChangeRecord` value of versions 0-2, or returns None.
pub(crate) fn decode_partition_change(value: &[u8]) -> Option<ChangeView<'_>> {
    let mut c = Cursor { b: value, pos: 0 };
    if c.uvarint()? != 1 || c.uvarint()? != PARTITION_CHANGE {
        return None;
    }
    let version = c.uvarint()?;
    if version > 2 {
        return None;
    }
    let mut out = ChangeView {
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
            (5, _) => out.leader_recovery_state = c.i8()? as i64,
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

/// Decodes a framed `PartitionRecord` value of versions 0-2, or returns None.
pub(crate) fn decode_partition(value: &[u8]) -> Option<PartitionView<'_>> {
    let mut c = Cursor { b: value, pos: 0 };
    if c.uvarint()? != 1 || c.uvarint()? != PARTITION {
        return None;
    }
    let version = c.uvarint()?;
    if version > 2 {
        return None;
    }
    let partition_id = c.i32()? as i64;
    let topic_id = c.uuid()?;
    // the four replica lists are not nullable: a null one is for the codec to reject
    let replicas = c.int32_array()??;
    let isr = c.int32_array()??;
    let removing_replicas = c.int32_array()??;
    let adding_replicas = c.int32_array()??;
    let leader = c.i32()? as i64;
    let leader_epoch = c.i32()? as i64;
    let partition_epoch = c.i32()? as i64;
    let directories = if version >= 1 { Some(c.uuid_array()??) } else { None };
    let mut out = PartitionView {
        partition_id,
        topic_id,
        replicas,
        isr,
        removing_replicas,
        adding_replicas,
        leader,
        leader_recovery_state: 0,
        leader_epoch,
        partition_epoch,
        directories,
        eligible_leader_replicas: None,
        last_known_elr: None,
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
            (0, _) => out.leader_recovery_state = c.i8()? as i64,
            (1, 2) => out.eligible_leader_replicas = c.int32_array()?,
            (2, 2) => out.last_known_elr = c.int32_array()?,
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

#[cfg(test)]
impl ChangeView<'_> {
    /// The same change with its lists decoded (for comparisons).
    pub(crate) fn to_owned_change(&self) -> PartitionChange {
        let ints = |l: &Option<BeInts>| {
            l.map(|b| {
                let mut v = Vec::new();
                b.assign_to(&mut v);
                v
            })
        };
        PartitionChange {
            partition_id: self.partition_id,
            topic_id: self.topic_id,
            isr: ints(&self.isr),
            leader: self.leader,
            replicas: ints(&self.replicas),
            removing_replicas: ints(&self.removing_replicas),
            adding_replicas: ints(&self.adding_replicas),
            leader_recovery_state: self.leader_recovery_state,
            directories: self.directories.map(|d| {
                let mut v = Vec::new();
                d.assign_to(&mut v);
                v
            }),
            eligible_leader_replicas: ints(&self.eligible_leader_replicas),
            last_known_elr: ints(&self.last_known_elr),
        }
    }
}

#[cfg(test)]
impl PartitionView<'_> {
    /// The same record with its lists decoded (for comparisons).
    pub(crate) fn to_owned_partition(&self) -> NewPartition {
        let v = |b: &BeInts| {
            let mut v = Vec::new();
            b.assign_to(&mut v);
            v
        };
        NewPartition {
            partition_id: self.partition_id,
            topic_id: self.topic_id,
            replicas: v(&self.replicas),
            isr: v(&self.isr),
            removing_replicas: v(&self.removing_replicas),
            adding_replicas: v(&self.adding_replicas),
            leader: self.leader,
            leader_recovery_state: self.leader_recovery_state,
            leader_epoch: self.leader_epoch,
            partition_epoch: self.partition_epoch,
            directories: self.directories.map(|d| {
                let mut out = Vec::new();
                d.assign_to(&mut out);
                out
            }),
            eligible_leader_replicas: self.eligible_leader_replicas.as_ref().map(v),
            last_known_elr: self.last_known_elr.as_ref().map(v),
        }
    }
}
