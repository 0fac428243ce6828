//! Applying one metadata record to the image, as Kafka's image deltas do
//! (`org.apache.kafka.image.*Delta`), with Kafka's error messages.
//!
//! Records arrive as the schema codec decodes them: a [`Struct`] holding exactly the fields of
//! the record's version. A field a handler needs but the version lacks makes the record
//! "malformed" (the Python image's `KeyError`); the codec never gives a wrong type.

mod merge;

use merge::{default_to_migrating, length_mismatch, merge, MergeError};
pub(crate) use merge::Seq;

use super::{Broker, Image, Partition, PendingRecord, Quotas, Topic, Uuid, MV_FEATURE};
use crate::schema::getters::{boolean, bool_or, by_name, field, fields_only, int, int_or, nullable_string, opt_list, string, type_error, uuid, uuid_list, FieldError};
use crate::schema::api_keys::*;
use crate::schema::control_types::{KRAFT_VERSION, KRAFT_VOTERS};
use crate::schema::records::{NewPartition, PartitionChange};
use crate::schema::{Struct, Value};
use std::fmt;

/// A record that cannot be applied (Kafka would fail to load it too): the record's offset
/// (when known) and Kafka's message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplayError {
    pub offset: Option<i64>,
    pub reason: String,
}

impl fmt::Display for ReplayError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.offset {
            Some(o) => write!(f, "offset {o}: {}", self.reason),
            None => f.write_str(&self.reason),
        }
    }
}

impl std::error::Error for ReplayError {}

/// Why a handler refused a record.
pub(crate) enum Refusal {
    /// Kafka's message.
    Replay(String),
    /// A field the handler needs is missing or of the wrong type (Python's exception repr).
    Malformed(String),
}

type R<T = ()> = Result<T, Refusal>;

fn refuse<T>(msg: impl Into<String>) -> R<T> {
    Err(Refusal::Replay(msg.into()))
}

impl From<FieldError> for Refusal {
    fn from(e: FieldError) -> Self {
        Refusal::Malformed(e.0)
    }
}

// ---------------------------------------------------------------------------------------------
// Replay

/// The slot of [`Image::replayed_by_type`] counting `api_key`: its own, or the last one for a key
/// past the others or negative (no record is applied with such a key: it is refused as unknown).
fn count_slot(api_key: i16) -> usize {
    match usize::try_from(api_key) {
        Ok(k) if k < super::REPLAY_COUNT_SLOTS - 1 => k,
        _ => super::REPLAY_COUNT_SLOTS - 1,
    }
}

impl Image {
    /// Applies one metadata record (a decoded `Struct` of the record's version). Transaction
    /// markers open, commit or abort a metadata transaction; records inside one wait for its
    /// end. Errors carry `offset` and Kafka's message.
    pub fn replay(&mut self, api_key: i16, version: i16, data: Struct, offset: Option<i64>) -> Result<(), ReplayError> {
        let err = |reason: String| ReplayError { offset, reason };
        match api_key {
            BEGIN_TRANSACTION => {
                if self.pending_transaction.is_some() {
                    return Err(err("BeginTransactionRecord inside a metadata transaction".into()));
                }
                self.pending_transaction = Some(Vec::new());
                Ok(())
            }
            END_TRANSACTION | ABORT_TRANSACTION => {
                let Some(pending) = self.pending_transaction.take() else {
                    let which = if api_key == END_TRANSACTION { "End" } else { "Abort" };
                    return Err(err(format!("{which}TransactionRecord without a BeginTransactionRecord")));
                };
                if api_key == END_TRANSACTION {
                    for rec in pending {
                        self.apply(rec.api_key, rec.version, &rec.data, rec.offset)?;
                    }
                }
                Ok(())
            }
            _ => {
                if let Some(pending) = self.pending_transaction.as_mut() {
                    pending.push(PendingRecord { api_key, version, data, offset });
                    return Ok(());
                }
                self.apply(api_key, version, &data, offset)
            }
        }
    }

    fn count_replayed(&mut self, api_key: i16) {
        self.records_replayed += 1;
        self.replayed_by_type[count_slot(api_key)] += 1;
    }

    /// Records applied of the given types (api keys): how a reader that follows some kinds of
    /// records learns whether any was applied since it last looked.
    pub fn replayed_of(&self, api_keys: &[i16]) -> u64 {
        let mut slots: Vec<usize> = api_keys.iter().map(|&k| count_slot(k)).collect();
        slots.sort_unstable();
        slots.dedup();
        slots.into_iter().map(|i| self.replayed_by_type[i]).sum()
    }

    /// Applies a control record: KRaftVersion and KRaftVoters change the KRaft state; the
    /// others (and transaction markers, `None`) change nothing.
    pub fn replay_control(&mut self, control_type: i16, data: Option<&Struct>) -> Result<(), ReplayError> {
        let Some(d) = data else { return Ok(()) };
        if control_type == KRAFT_VERSION {
            let v = int(d, "KRaftVersion").map_err(|r| ReplayError { offset: None, reason: refusal_text(r.into(), "KRaftVersion") })?;
            self.kraft_version = Some(v);
        } else if control_type == KRAFT_VOTERS {
            self.voters = Some(d.clone());
        }
        Ok(())
    }

    fn apply(&mut self, api_key: i16, _version: i16, d: &Struct, offset: Option<i64>) -> Result<(), ReplayError> {
        let handler: fn(&mut Image, &Struct) -> R = match api_key {
            REGISTER_BROKER => Image::register_broker,
            UNREGISTER_BROKER => Image::unregister_broker,
            TOPIC => Image::topic_record,
            PARTITION => Image::partition_record,
            CONFIG => Image::config,
            PARTITION_CHANGE => Image::partition_change,
            FENCE_BROKER => Image::fence,
            UNFENCE_BROKER => Image::unfence,
            REMOVE_TOPIC => Image::remove_topic,
            DELEGATION_TOKEN => Image::token,
            USER_SCRAM_CREDENTIAL => Image::scram_record,
            FEATURE_LEVEL => Image::feature_level,
            CLIENT_QUOTA => Image::client_quota,
            PRODUCER_IDS => Image::producer_ids,
            BROKER_REGISTRATION_CHANGE => Image::broker_change,
            ACCESS_CONTROL_ENTRY => Image::acl,
            REMOVE_ACCESS_CONTROL_ENTRY => Image::remove_acl,
            NO_OP => |_, _| Ok(()),
            ZK_MIGRATION_STATE => Image::zk_migration,
            REMOVE_USER_SCRAM_CREDENTIAL => Image::remove_scram,
            REMOVE_DELEGATION_TOKEN => Image::remove_token,
            REGISTER_CONTROLLER => Image::register_controller,
            CLEAR_ELR => Image::clear_elr,
            UNREGISTER_CONTROLLER => Image::unregister_controller,
            _ => return Err(ReplayError { offset, reason: format!("Unknown metadata id {api_key}") }),
        };
        self.count_replayed(api_key);
        handler(self, d).map_err(|r| ReplayError { offset, reason: refusal_text(r, &api_key.to_string()) })
    }

    /// Applies a `PartitionChangeRecord` decoded by the typed decoder; `record` gives the
    /// decoded struct for the one message that quotes the whole record.
    pub(crate) fn apply_partition_change<I: Seq<i32>, U: Seq<Uuid>>(&mut self, c: &PartitionChange<I, U>, offset: Option<i64>, record: impl FnOnce() -> Option<Struct>) -> Result<(), ReplayError> {
        self.count_replayed(PARTITION_CHANGE);
        self.merge_change(c, || record().map(|d| length_mismatch(&d)).unwrap_or_else(|| "The lengths for replicas and directories do not match".into()))
            .map_err(|r| ReplayError { offset, reason: refusal_text(r, "5") })
    }

    fn merge_change<I: Seq<i32>, U: Seq<Uuid>>(&mut self, c: &PartitionChange<I, U>, mismatch: impl FnOnce() -> String) -> R {
        let Some(t) = self.topics.get_mut(&c.topic_id) else {
            return refuse(format!("Unable to find topic with id {}", uuid_text(&c.topic_id)));
        };
        let pid = c.partition_id;
        let Some(p) = t.partitions.get_mut(&pid) else {
            return refuse(format!("Unable to find partition {}:{pid}", uuid_text(&c.topic_id)));
        };
        merge(p, c).map_err(|e| match e {
            MergeError::LengthMismatch => Refusal::Replay(mismatch()),
            MergeError::UnknownLeaderRecoveryState(s) => Refusal::Replay(format!("Unknown leader recovery state {s}")),
        })
    }

    // features
    fn feature_level(&mut self, d: &Struct) -> R {
        let name = string(d, "Name")?;
        let level = int(d, "FeatureLevel")?;
        if name == MV_FEATURE {
            self.metadata_version = Some(level);
        } else if level == 0 {
            self.features.remove(&name);
        } else {
            self.features.insert(name, level);
        }
        Ok(())
    }

    fn zk_migration(&mut self, d: &Struct) -> R {
        self.zk_migration_state = int(d, "ZkMigrationState")?;
        Ok(())
    }

    // cluster
    fn register_broker(&mut self, d: &Struct) -> R {
        let id = int(d, "BrokerId")?;
        let b = Broker {
            broker_id: id,
            is_migrating_zk_broker: bool_or(d, "IsMigratingZkBroker", false)?,
            incarnation_id: uuid(d, "IncarnationId")?,
            broker_epoch: int(d, "BrokerEpoch")?,
            end_points: by_name(field(d, "EndPoints")?, "EndPoints")?,
            features: by_name(field(d, "Features")?, "Features")?,
            rack: nullable_string(d, "Rack")?,
            fenced: boolean(d, "Fenced")?,
            in_controlled_shutdown: bool_or(d, "InControlledShutdown", false)?,
            log_dirs: match d.get("LogDirs") {
                None => Vec::new(),
                Some(v) => uuid_list(v, "LogDirs")?,
            },
            cordoned_log_dirs: opt_list(d, "CordonedLogDirs", uuid_list)?,
        };
        self.brokers.insert(id, b);
        Ok(())
    }

    fn unregister_broker(&mut self, d: &Struct) -> R {
        self.brokers.remove(&int(d, "BrokerId")?);
        Ok(())
    }

    fn broker_or_throw(&mut self, id: i64, epoch: i64, action: &str) -> R<&mut Broker> {
        let Some(b) = self.brokers.get_mut(&id) else {
            return refuse(format!("Tried to {action} broker {id}, but that broker was not registered."));
        };
        if b.broker_epoch != epoch {
            return refuse(format!(
                "Tried to {action} broker {id}, but the given epoch, {epoch}, did not match the current broker epoch, {}",
                b.broker_epoch
            ));
        }
        Ok(b)
    }

    fn fence(&mut self, d: &Struct) -> R {
        let (id, epoch) = (int(d, "Id")?, int(d, "Epoch")?);
        self.broker_or_throw(id, epoch, "fence")?.fenced = true;
        Ok(())
    }

    fn unfence(&mut self, d: &Struct) -> R {
        let (id, epoch) = (int(d, "Id")?, int(d, "Epoch")?);
        self.broker_or_throw(id, epoch, "unfence")?.fenced = false;
        Ok(())
    }

    fn broker_change(&mut self, d: &Struct) -> R {
        let (id, epoch) = (int(d, "BrokerId")?, int(d, "BrokerEpoch")?);
        let b = self.broker_or_throw(id, epoch, "change")?;
        let fenced = int_or(d, "Fenced", 0)?;
        if !(-1..=1).contains(&fenced) {
            return refuse(format!("Unable to replay BrokerRegistrationChangeRecord: unknown value for fenced field: {fenced}"));
        }
        let shutdown = int_or(d, "InControlledShutdown", 0)?;
        if shutdown != 0 && shutdown != 1 {
            return refuse(format!("Unable to replay BrokerRegistrationChangeRecord: unknown value for inControlledShutdown field: {shutdown}"));
        }
        let log_dirs = match d.get("LogDirs") {
            Some(v @ Value::Array(a)) if !a.is_empty() => Some(uuid_list(v, "LogDirs")?),
            _ => None,
        };
        let cordoned = opt_list(d, "CordonedLogDirs", uuid_list)?;
        if fenced != 0 {
            b.fenced = fenced == 1;
        }
        if shutdown == 1 {
            b.in_controlled_shutdown = true;
        }
        if let Some(v) = log_dirs {
            b.log_dirs = v;
        }
        if let Some(v) = cordoned {
            b.cordoned_log_dirs = Some(v);
        }
        Ok(())
    }

    fn register_controller(&mut self, d: &Struct) -> R {
        let id = int(d, "ControllerId")?;
        let mut c = fields_only(d, &["ControllerId", "IncarnationId", "ZkMigrationReady"])?;
        c.fields.push(("EndPoints", Value::Array(by_name(field(d, "EndPoints")?, "EndPoints")?.into_iter().map(Value::Struct).collect())));
        c.fields.push(("Features", Value::Array(by_name(field(d, "Features")?, "Features")?.into_iter().map(Value::Struct).collect())));
        self.controllers.insert(id, c);
        Ok(())
    }

    /// `ClusterDelta.replay(UnregisterControllerRecord)` (4.4-IV2): the registration goes; an
    /// unknown id is no error.
    fn unregister_controller(&mut self, d: &Struct) -> R {
        self.controllers.remove(&int(d, "ControllerId")?);
        Ok(())
    }

    // topics
    fn topic_record(&mut self, d: &Struct) -> R {
        let id = uuid(d, "TopicId")?;
        let name = string(d, "Name")?;
        let seq = match self.topics.get(&id) {
            Some(old) => {
                if old.name != name {
                    let old_name = old.name.clone();
                    self.topic_ids.remove(&old_name);
                }
                old.seq
            }
            None => self.take_seq(),
        };
        self.topics.insert(id, Topic { name: name.clone(), id, seq, partitions: Default::default() });
        self.topic_ids.insert(name, id);
        Ok(())
    }

    fn partition_record(&mut self, d: &Struct) -> R {
        let np = NewPartition::from_struct(d)?;
        self.insert_partition(&np, || length_mismatch(d))
    }

    /// Applies a `PartitionRecord` read by the typed decoder; `record` gives the decoded struct
    /// for the one message that quotes the whole record.
    pub(crate) fn apply_partition_record<I: Seq<i32>, U: Seq<Uuid>>(&mut self, np: &NewPartition<I, U>, offset: Option<i64>, record: impl FnOnce() -> Option<Struct>) -> Result<(), ReplayError> {
        self.count_replayed(PARTITION);
        self.insert_partition(np, || record().map(|d| length_mismatch(&d)).unwrap_or_else(|| "The lengths for replicas and directories do not match".into()))
            .map_err(|r| ReplayError { offset, reason: refusal_text(r, "3") })
    }

    fn insert_partition<I: Seq<i32>, U: Seq<Uuid>>(&mut self, np: &NewPartition<I, U>, mismatch: impl FnOnce() -> String) -> R {
        let Some(t) = self.topics.get_mut(&np.topic_id) else {
            return refuse(format!("Unable to find topic with id {}", uuid_text(&np.topic_id)));
        };
        let n = np.replicas.count();
        if let Some(dd) = &np.directories {
            if dd.count() != 0 && dd.count() != n {
                return refuse(mismatch());
            }
        }
        let vec = |s: &I| {
            let mut v = Vec::with_capacity(s.count());
            s.assign_to(&mut v);
            v
        };
        let opt_vec = |s: &Option<I>| s.as_ref().map(vec).unwrap_or_default();
        let mut directories = Vec::new();
        if let Some(dd) = &np.directories {
            dd.assign_to(&mut directories);
        }
        let p = Partition {
            replicas: vec(&np.replicas),
            isr: vec(&np.isr),
            removing_replicas: vec(&np.removing_replicas),
            adding_replicas: vec(&np.adding_replicas),
            leader: np.leader,
            leader_recovery_state: np.leader_recovery_state,
            leader_epoch: np.leader_epoch,
            partition_epoch: np.partition_epoch,
            directories: default_to_migrating(Some(directories), n),
            eligible_leader_replicas: opt_vec(&np.eligible_leader_replicas),
            last_known_elr: opt_vec(&np.last_known_elr),
        };
        t.partitions.insert(np.partition_id, p);
        Ok(())
    }

    fn partition_change(&mut self, d: &Struct) -> R {
        let c = PartitionChange::from_struct(d)?;
        self.merge_change(&c, || length_mismatch(d))
    }

    fn remove_topic(&mut self, d: &Struct) -> R {
        let id = uuid(d, "TopicId")?;
        let Some(t) = self.topics.remove(&id) else {
            return refuse(format!("Unable to delete topic with id {}: no such topic found.", uuid_text(&id)));
        };
        if self.topic_ids.get(&t.name) == Some(&id) {
            self.topic_ids.remove(&t.name);
        }
        self.configs.remove(&(2, t.name));
        Ok(())
    }

    fn clear_elr(&mut self, d: &Struct) -> R {
        let name = string(d, "TopicName")?;
        let clear = |t: &mut Topic| {
            for p in t.partitions.values_mut() {
                if !p.eligible_leader_replicas.is_empty() || !p.last_known_elr.is_empty() {
                    let c: PartitionChange = PartitionChange {
                        leader: -2,
                        leader_recovery_state: -1,
                        eligible_leader_replicas: Some(Vec::new()),
                        last_known_elr: Some(Vec::new()),
                        ..Default::default()
                    };
                    // Clearing lists cannot fail.
                    let _ = merge(p, &c);
                }
            }
        };
        if name.is_empty() {
            self.topics.values_mut().for_each(clear);
        } else {
            let Some(t) = self.topic_ids.get(&name).copied().and_then(|id| self.topics.get_mut(&id)) else {
                return refuse(format!("Topic {name} not found."));
            };
            clear(t);
        }
        Ok(())
    }

    // configs, quotas, producer ids
    fn config(&mut self, d: &Struct) -> R {
        let owner = (int(d, "ResourceType")?, string(d, "ResourceName")?);
        let key = string(d, "Name")?;
        match nullable_string(d, "Value")? {
            Some(v) => {
                self.configs.entry(owner).or_default().insert(key, v);
            }
            None => {
                if let Some(entries) = self.configs.get_mut(&owner) {
                    entries.remove(&key);
                    if entries.is_empty() {
                        self.configs.remove(&owner);
                    }
                }
            }
        }
        Ok(())
    }

    fn client_quota(&mut self, d: &Struct) -> R {
        let Value::Array(items) = field(d, "Entity")? else { return Err(type_error("Entity", "a list").into()) };
        let mut entity = Vec::with_capacity(items.len());
        for it in items {
            let Value::Struct(e) = it else { return Err(type_error("Entity", "structs").into()) };
            entity.push((string(e, "EntityType")?, nullable_string(e, "EntityName")?));
        }
        sort_entity(&mut entity)?;
        let key = string(d, "Key")?;
        let value = match field(d, "Value")? {
            Value::Float(x) => *x,
            Value::Int(i) => *i as f64,
            _ => return Err(type_error("Value", "a float").into()),
        };
        if boolean(d, "Remove")? {
            if let Some(q) = self.client_quotas.get_mut(&entity) {
                q.values.remove(&key);
                if q.values.is_empty() {
                    self.client_quotas.remove(&entity);
                }
            }
        } else {
            if !self.client_quotas.contains_key(&entity) {
                let seq = self.take_seq();
                self.client_quotas.insert(entity.clone(), Quotas { seq, values: Default::default() });
            }
            if let Some(q) = self.client_quotas.get_mut(&entity) {
                q.values.insert(key, value);
            }
        }
        Ok(())
    }

    fn producer_ids(&mut self, d: &Struct) -> R {
        self.next_producer_id = int(d, "NextProducerId")?;
        Ok(())
    }

    // security
    fn acl(&mut self, d: &Struct) -> R {
        let id = uuid(d, "Id")?;
        let acl = fields_only(d, &["Id", "ResourceType", "ResourceName", "PatternType", "Principal", "Host", "Operation", "PermissionType"])?;
        self.acls.insert(id, acl);
        Ok(())
    }

    fn remove_acl(&mut self, d: &Struct) -> R {
        let id = uuid(d, "Id")?;
        if self.acls.remove(&id).is_none() {
            return refuse(format!("Failed to find existing ACL with ID {} in either image or changes", uuid_text(&id)));
        }
        Ok(())
    }

    fn scram_record(&mut self, d: &Struct) -> R {
        let key = (int(d, "Mechanism")?, string(d, "Name")?);
        let cred = fields_only(d, &["Name", "Mechanism", "Salt", "StoredKey", "ServerKey", "Iterations"])?;
        self.scram.insert(key, cred);
        Ok(())
    }

    fn remove_scram(&mut self, d: &Struct) -> R {
        let key = (int(d, "Mechanism")?, string(d, "Name")?);
        self.scram.remove(&key);
        Ok(())
    }

    fn token(&mut self, d: &Struct) -> R {
        let id = string(d, "TokenId")?;
        let tok = fields_only(d, &["Owner", "Requester", "Renewers", "IssueTimestamp", "MaxTimestamp", "ExpirationTimestamp", "TokenId"])?;
        self.delegation_tokens.insert(id, tok);
        Ok(())
    }

    fn remove_token(&mut self, d: &Struct) -> R {
        self.delegation_tokens.remove(&string(d, "TokenId")?);
        Ok(())
    }
}

/// Sorts an entity's (type, name) pairs as Python sorts tuples: a null name and a string
/// name under one entity type cannot be ordered (Python raises `TypeError`).
fn sort_entity(entity: &mut [(String, Option<String>)]) -> R {
    for (i, a) in entity.iter().enumerate() {
        for b in &entity[i + 1..] {
            if a.0 == b.0 && a.1.is_some() != b.1.is_some() {
                let (x, y) = if b.1.is_none() { ("NoneType", "str") } else { ("str", "NoneType") };
                return Err(Refusal::Malformed(format!("TypeError(\"'<' not supported between instances of '{x}' and '{y}'\")")));
            }
        }
    }
    entity.sort();
    Ok(())
}

fn refusal_text(r: Refusal, api_key: &str) -> String {
    match r {
        Refusal::Replay(m) => m,
        Refusal::Malformed(m) => format!("malformed {api_key} record: {m}"),
    }
}

/// Kafka's `Uuid.toString()`: URL-safe base64 of the 16 bytes, without padding.
pub fn uuid_text(u: &Uuid) -> String {
    crate::schema::json::uuid_text(u)
}
