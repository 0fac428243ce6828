//! Partition changes: `PartitionRegistration.merge(PartitionChangeRecord)` in place, over
//! decoded lists or raw big-endian ones ([`Seq`]).

use crate::image::repr::struct_repr;
use crate::image::{Partition, Uuid, MIGRATING};
use crate::schema::records::PartitionChange;
use crate::schema::Struct;

/// `PartitionRegistration.defaultToMigrating`.
pub(crate) fn default_to_migrating(dirs: Option<Vec<Uuid>>, n: usize) -> Vec<Uuid> {
    match dirs {
        Some(d) if !d.iter().all(|x| *x == MIGRATING) => d,
        _ => vec![MIGRATING; n],
    }
}

/// A list a partition change assigns: decoded values, or raw big-endian values straight from
/// the record (so that replaying a change allocates nothing).
pub(crate) trait Seq<T> {
    fn count(&self) -> usize;
    /// Replaces `v`'s contents with this list (reusing `v`'s allocation).
    fn assign_to(&self, v: &mut Vec<T>);
}

impl<T: Copy> Seq<T> for Vec<T> {
    fn count(&self) -> usize {
        self.len()
    }
    fn assign_to(&self, v: &mut Vec<T>) {
        v.clear();
        v.extend_from_slice(self);
    }
}

/// Why a merge failed (the caller words it: one message quotes the whole record).
pub(crate) enum MergeError {
    LengthMismatch,
    UnknownLeaderRecoveryState(i64),
}

/// `PartitionRegistration.merge(PartitionChangeRecord)`, in place. As in the Python image, a
/// bad leader recovery state is found after the other fields changed.
pub(crate) fn merge<I: Seq<i32>, U: Seq<Uuid>>(p: &mut Partition, c: &PartitionChange<I, U>) -> Result<(), MergeError> {
    if c.replicas.is_some() || c.directories.is_some() {
        if let (Some(d), Some(r)) = (&c.directories, &c.replicas) {
            if d.count() != 0 && d.count() != r.count() {
                return Err(MergeError::LengthMismatch);
            }
        }
        if let Some(r) = &c.replicas {
            r.assign_to(&mut p.replicas);
        }
        if let Some(d) = &c.directories {
            d.assign_to(&mut p.directories);
        }
        // PartitionRegistration.defaultToMigrating
        if p.directories.iter().all(|x| *x == MIGRATING) {
            p.directories.clear();
            p.directories.resize(p.replicas.len(), MIGRATING);
        }
    }
    for (new, old) in [
        (&c.isr, &mut p.isr),
        (&c.removing_replicas, &mut p.removing_replicas),
        (&c.adding_replicas, &mut p.adding_replicas),
        (&c.eligible_leader_replicas, &mut p.eligible_leader_replicas),
        (&c.last_known_elr, &mut p.last_known_elr),
    ] {
        if let Some(v) = new {
            v.assign_to(old);
        }
    }
    if c.leader != -2 {
        p.leader = c.leader;
        p.leader_epoch += 1;
    }
    let lrs = c.leader_recovery_state;
    if lrs != -1 {
        if lrs != 0 && lrs != 1 {
            return Err(MergeError::UnknownLeaderRecoveryState(lrs));
        }
        p.leader_recovery_state = lrs;
    }
    p.partition_epoch += 1;
    Ok(())
}

pub(super) fn length_mismatch(d: &Struct) -> String {
    format!("The lengths for replicas and directories do not match: {}", struct_repr(d))
}
