//! The KRaft metadata image: the state a node builds by replaying metadata records, and the
//! snapshot that writes it back.
//!
//! * this module -- the image's state ([`Image`] and the types it holds);
//! * `replay` -- applying one decoded record (Kafka's image deltas, with Kafka's messages);
//! * `fast` -- a typed decoder for `PartitionChangeRecord`, the bulk of a busy log;
//! * `hash` -- the hash of the maps looked up once per record;
//! * `log` -- replaying whole batches, segment files and snapshot files;
//! * `write` -- the records of a snapshot of the image and the snapshot file;
//! * `repr` -- Python's `repr` of a decoded record, which some of Kafka's messages quote.
//!
//! The semantics are those of kraftkit's pure-Python image (kept as the test oracle in
//! `tests/image/reference_image.py`): every decision below mirrors it, including the order of
//! checks and mutations, so both give the same image and the same errors for any input.

mod fast;
mod hash;
mod log;
mod replay;
mod repr;
mod write;

pub use hash::WordHash;
pub use log::{read_file, ImageLoadError, LogReplay};
pub use replay::ReplayError;
pub use write::{SnapshotOptions, SnapshotRecord, Unwritable, WriteError};

use crate::schema::Struct;
use std::collections::{BTreeMap, HashMap};

/// A Kafka `Uuid` as its 16 bytes.
pub type Uuid = [u8; 16];

/// `DirectoryId.MIGRATING`, the zero uuid.
pub const MIGRATING: Uuid = [0; 16];

/// The feature whose level is the metadata.version.
pub const MV_FEATURE: &str = "metadata.version";
/// The feature that enables eligible leader replicas in snapshots.
pub const ELR_FEATURE: &str = "eligible.leader.replicas.version";

/// `ZkMigrationState` names by id (`ZkMigrationState.java`).
pub const ZK_MIGRATION_STATES: [(i64, &str); 5] = [(0, "NONE"), (1, "MIGRATION"), (2, "PRE_MIGRATION"), (3, "POST_MIGRATION"), (4, "ZK")];

/// The name of a ZK migration state id, None for an unknown id.
pub fn zk_migration_state_name(state: i64) -> Option<&'static str> {
    ZK_MIGRATION_STATES.iter().find(|(id, _)| *id == state).map(|(_, n)| *n)
}

/// `MetadataProvenance`: the last offset in the image, its epoch and append time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Provenance {
    pub offset: i64,
    pub epoch: i64,
    pub timestamp: i64,
}

impl Default for Provenance {
    fn default() -> Self {
        Provenance { offset: -1, epoch: -1, timestamp: -1 }
    }
}

/// A broker registration (`RegisterBrokerRecord` as amended by fencing and change records).
#[derive(Clone, Debug, PartialEq)]
pub struct Broker {
    pub broker_id: i64,
    pub is_migrating_zk_broker: bool,
    pub incarnation_id: Uuid,
    pub broker_epoch: i64,
    /// `BrokerEndpoint` structs, sorted by name.
    pub end_points: Vec<Struct>,
    /// `BrokerFeature` structs, sorted by name.
    pub features: Vec<Struct>,
    pub rack: Option<String>,
    pub fenced: bool,
    pub in_controlled_shutdown: bool,
    pub log_dirs: Vec<Uuid>,
    pub cordoned_log_dirs: Option<Vec<Uuid>>,
}

/// A partition's registration (`PartitionRegistration`).
#[derive(Clone, Debug, PartialEq)]
pub struct Partition {
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    pub removing_replicas: Vec<i32>,
    pub adding_replicas: Vec<i32>,
    pub leader: i64,
    pub leader_recovery_state: i64,
    pub leader_epoch: i64,
    pub partition_epoch: i64,
    /// One directory per replica (`MIGRATING` when unassigned).
    pub directories: Vec<Uuid>,
    pub eligible_leader_replicas: Vec<i32>,
    pub last_known_elr: Vec<i32>,
}

/// A topic and its partitions.
#[derive(Clone, Debug, PartialEq)]
pub struct Topic {
    pub name: String,
    pub id: Uuid,
    /// When the topic id entered the image: two topics with one name (a TopicRecord reusing a
    /// name without a RemoveTopicRecord) keep this order, as the Python image's dict does.
    pub seq: u64,
    pub partitions: HashMap<i64, Partition, WordHash>,
}

impl Topic {
    /// The partitions sorted by id.
    pub fn partitions_sorted(&self) -> Vec<(i64, &Partition)> {
        let mut v: Vec<(i64, &Partition)> = self.partitions.iter().map(|(k, p)| (*k, p)).collect();
        v.sort_unstable_by_key(|(k, _)| *k);
        v
    }
}

/// A client quota entity: (entity type, entity name) pairs, sorted.
pub type QuotaEntity = Vec<(String, Option<String>)>;

/// The quota values of one entity.
#[derive(Clone, Debug, PartialEq)]
pub struct Quotas {
    /// When the entity entered the image (orders entities whose sort keys tie).
    pub seq: u64,
    pub values: BTreeMap<String, f64>,
}

/// A record held back by an open metadata transaction.
#[derive(Clone, Debug, PartialEq)]
pub struct PendingRecord {
    pub api_key: i16,
    pub version: i16,
    pub data: Struct,
    pub offset: Option<i64>,
}

/// An in-memory metadata image (Kafka's `MetadataImage`, plus the KRaft control state a
/// snapshot carries and the provenance of the last record).
#[derive(Clone, Debug)]
pub struct Image {
    /// The metadata.version feature level; None before any FeatureLevelRecord for it.
    pub metadata_version: Option<i64>,
    /// Finalized feature levels other than metadata.version.
    pub features: BTreeMap<String, i64>,
    pub zk_migration_state: i64,
    pub brokers: BTreeMap<i64, Broker>,
    /// `RegisterControllerRecord` fields (endpoints and features sorted by name), by id.
    pub controllers: BTreeMap<i64, Struct>,
    pub topics: HashMap<Uuid, Topic, WordHash>,
    pub topic_ids: HashMap<String, Uuid>,
    next_seq: u64,
    /// (resource type, resource name) -> key -> value.
    pub configs: BTreeMap<(i64, String), BTreeMap<String, String>>,
    pub client_quotas: HashMap<QuotaEntity, Quotas>,
    pub next_producer_id: i64,
    /// `AccessControlEntryRecord` fields by ACL id.
    pub acls: BTreeMap<Uuid, Struct>,
    /// `UserScramCredentialRecord` fields by (mechanism, user).
    pub scram: BTreeMap<(i64, String), Struct>,
    /// `DelegationTokenRecord` fields by token id.
    pub delegation_tokens: BTreeMap<String, Struct>,
    pub provenance: Provenance,
    /// kraft.version from KRaftVersion control records (None: never seen, i.e. 0).
    pub kraft_version: Option<i64>,
    /// The last `VotersRecord` (None: none seen).
    pub voters: Option<Struct>,
    /// Records of an open metadata transaction (BeginTransactionRecord seen, no End yet).
    pub pending_transaction: Option<Vec<PendingRecord>>,
    /// Metadata records applied (transaction markers excluded).
    pub records_replayed: u64,
    /// The same, by record type (api key; the last slot counts any key past it): what a reader
    /// that follows some kinds of records checks to learn whether any of them was applied.
    pub replayed_by_type: [u64; REPLAY_COUNT_SLOTS],
}

/// Slots of [`Image::replayed_by_type`]: every metadata record api key known today fits.
pub const REPLAY_COUNT_SLOTS: usize = 64;

impl Default for Image {
    fn default() -> Self {
        Image {
            metadata_version: None,
            features: BTreeMap::new(),
            zk_migration_state: 0,
            brokers: BTreeMap::new(),
            controllers: BTreeMap::new(),
            topics: HashMap::default(),
            topic_ids: HashMap::new(),
            next_seq: 0,
            configs: BTreeMap::new(),
            client_quotas: HashMap::new(),
            next_producer_id: -1,
            acls: BTreeMap::new(),
            scram: BTreeMap::new(),
            delegation_tokens: BTreeMap::new(),
            provenance: Provenance::default(),
            kraft_version: None,
            voters: None,
            pending_transaction: None,
            records_replayed: 0,
            replayed_by_type: [0; REPLAY_COUNT_SLOTS],
        }
    }
}

impl Image {
    /// An empty image (`MetadataImage.EMPTY`).
    pub fn new() -> Self {
        Self::default()
    }

    /// The topic named `name` (through the name index).
    pub fn topic(&self, name: &str) -> Option<&Topic> {
        self.topic_ids.get(name).and_then(|id| self.topics.get(id))
    }

    /// Topics in the order they entered the image.
    pub fn topics_in_order(&self) -> Vec<&Topic> {
        let mut v: Vec<&Topic> = self.topics.values().collect();
        v.sort_by_key(|t| t.seq);
        v
    }

    /// Topics sorted by name; topics sharing a name stay in the order they entered the image.
    pub fn topics_by_name(&self) -> Vec<&Topic> {
        let mut v: Vec<&Topic> = self.topics.values().collect();
        v.sort_by(|a, b| a.name.cmp(&b.name).then(a.seq.cmp(&b.seq)));
        v
    }

    /// Client quota entities sorted as the Python image sorts them (type, then name with a
    /// null name as ""), ties in the order they entered the image.
    pub fn quotas_sorted(&self) -> Vec<(&QuotaEntity, &Quotas)> {
        let mut v: Vec<(&QuotaEntity, &Quotas)> = self.client_quotas.iter().collect();
        v.sort_by(|a, b| {
            let ka = a.0.iter().map(|(t, n)| (t.as_str(), n.as_deref().unwrap_or("")));
            let kb = b.0.iter().map(|(t, n)| (t.as_str(), n.as_deref().unwrap_or("")));
            ka.cmp(kb).then(a.1.seq.cmp(&b.1.seq))
        });
        v
    }

    /// The number of partitions of every topic.
    pub fn partition_count(&self) -> usize {
        self.topics.values().map(|t| t.partitions.len()).sum()
    }

    /// The metadata.version a snapshot of this image is written at by default
    /// (3.0-IV1, level 1, when none is set).
    pub fn effective_metadata_version(&self) -> i64 {
        self.metadata_version.unwrap_or(MINIMUM_KRAFT_MV)
    }

    fn take_seq(&mut self) -> u64 {
        self.next_seq += 1;
        self.next_seq
    }
}

/// An image without a metadata.version record is at 3.0-IV1 (`FeaturesImage.EMPTY`).
pub const MINIMUM_KRAFT_MV: i64 = crate::schema::metadata_versions::MV_3_0_IV1;

#[cfg(test)]
mod tests;
