//! Typed forms of the metadata records whose replay is hot
//! (`PartitionRecord`, `PartitionChangeRecord`), read from a decoded [`Struct`] by field name.
//! Their lists are generic so that a typed decoder can point them into the record's bytes
//! instead (`image::fast`).

use super::getters::{field, int, int_list, int_or, opt_list, uuid, uuid_list, FieldResult};
use super::Struct;

type Uuid = [u8; 16];

/// A `PartitionChangeRecord`: None for a list or value that stays unchanged.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct PartitionChange<I = Vec<i32>, U = Vec<Uuid>> {
    pub partition_id: i64,
    pub topic_id: Uuid,
    pub isr: Option<I>,
    /// -2: unchanged.
    pub leader: i64,
    pub replicas: Option<I>,
    pub removing_replicas: Option<I>,
    pub adding_replicas: Option<I>,
    /// -1: unchanged.
    pub leader_recovery_state: i64,
    pub directories: Option<U>,
    pub eligible_leader_replicas: Option<I>,
    pub last_known_elr: Option<I>,
}

impl PartitionChange {
    pub(crate) fn from_struct(d: &Struct) -> FieldResult<Self> {
        Ok(PartitionChange {
            partition_id: int(d, "PartitionId")?,
            topic_id: uuid(d, "TopicId")?,
            isr: opt_list(d, "Isr", int_list)?,
            leader: int_or(d, "Leader", -2)?,
            replicas: opt_list(d, "Replicas", int_list)?,
            removing_replicas: opt_list(d, "RemovingReplicas", int_list)?,
            adding_replicas: opt_list(d, "AddingReplicas", int_list)?,
            leader_recovery_state: int_or(d, "LeaderRecoveryState", -1)?,
            directories: opt_list(d, "Directories", uuid_list)?,
            eligible_leader_replicas: opt_list(d, "EligibleLeaderReplicas", int_list)?,
            last_known_elr: opt_list(d, "LastKnownElr", int_list)?,
        })
    }
}

/// A `PartitionRecord`: a partition's whole registration.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct NewPartition<I = Vec<i32>, U = Vec<Uuid>> {
    pub partition_id: i64,
    pub topic_id: Uuid,
    pub replicas: I,
    pub isr: I,
    pub removing_replicas: I,
    pub adding_replicas: I,
    pub leader: i64,
    pub leader_recovery_state: i64,
    pub leader_epoch: i64,
    pub partition_epoch: i64,
    /// None before version 1.
    pub directories: Option<U>,
    pub eligible_leader_replicas: Option<I>,
    pub last_known_elr: Option<I>,
}

impl NewPartition {
    pub(crate) fn from_struct(d: &Struct) -> FieldResult<Self> {
        Ok(NewPartition {
            partition_id: int(d, "PartitionId")?,
            topic_id: uuid(d, "TopicId")?,
            replicas: int_list(field(d, "Replicas")?, "Replicas")?,
            isr: int_list(field(d, "Isr")?, "Isr")?,
            removing_replicas: int_list(field(d, "RemovingReplicas")?, "RemovingReplicas")?,
            adding_replicas: int_list(field(d, "AddingReplicas")?, "AddingReplicas")?,
            leader: int(d, "Leader")?,
            leader_recovery_state: int_or(d, "LeaderRecoveryState", 0)?,
            leader_epoch: int(d, "LeaderEpoch")?,
            partition_epoch: int(d, "PartitionEpoch")?,
            directories: opt_list(d, "Directories", uuid_list)?,
            eligible_leader_replicas: opt_list(d, "EligibleLeaderReplicas", int_list)?,
            last_known_elr: opt_list(d, "LastKnownElr", int_list)?,
        })
    }
}
