//! A snapshot of the image: its records in Kafka's order (`MetadataImage.write`) at the record
//! versions a metadata.version calls for, with the losses Kafka reports
//! (`UnwritableMetadataException`) when that version cannot hold something, and the snapshot
//! file written as kraftkit's `SnapshotWriter` writes it (header batch, data batches of at most
//! 8 MiB filled by lists of `batch_records` records, footer batch; `.checkpoint.part`, fsync,
//! read-only, atomic rename).

use super::{zk_migration_state_name, Image, Partition, Uuid, ELR_FEATURE, MIGRATING, MV_FEATURE};
use crate::builder::{encode_batch, BatchParams, RecordInput};
use crate::fsutil;
use crate::schema::api_keys::*;
use crate::schema::{self, CodecError, Struct, Value};
use crate::snapshot::{control_key, footer_value, header_value, kraft_version_value, SNAPSHOT_FOOTER, SNAPSHOT_HEADER};
use crate::varint::write_uvarint;
use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};

// metadata.version levels that gate what a snapshot holds (Kafka's ``MetadataVersion`` gates used by the image writers)
use crate::schema::metadata_versions::{
    MV_3_3_IV0, MV_3_3_IV3, MV_3_4_IV0, MV_3_5_IV2, MV_3_6_IV2, MV_3_7_IV0, MV_3_7_IV2, MV_4_0_IV0, MV_4_0_IV1, MV_4_3_IV0,
};

/// The image holds something a metadata.version cannot represent: the version and what would
/// be lost, in Kafka's words (each once, in the order found).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unwritable {
    pub metadata_version: i64,
    pub losses: Vec<String>,
}

/// One record of a snapshot. Partitions are kept by reference and encoded directly.
#[derive(Debug, Clone)]
pub enum SnapshotRecord<'a> {
    Generic { api_key: i16, version: i16, data: Struct },
    Partition { version: i16, topic_id: Uuid, partition_id: i64, partition: &'a Partition, with_elr: bool },
}

fn ints(v: &[i32]) -> Value {
    Value::Array(v.iter().map(|x| Value::Int(*x as i64)).collect())
}

fn uuids(v: &[Uuid]) -> Value {
    Value::Array(v.iter().map(|x| Value::Uuid(*x)).collect())
}

fn st(fields: Vec<(&'static str, Value)>) -> Struct {
    Struct { fields, unknown_tags: Vec::new() }
}

impl SnapshotRecord<'_> {
    pub fn api_key(&self) -> i16 {
        match self {
            SnapshotRecord::Generic { api_key, .. } => *api_key,
            SnapshotRecord::Partition { .. } => PARTITION,
        }
    }

    pub fn version(&self) -> i16 {
        match self {
            SnapshotRecord::Generic { version, .. } | SnapshotRecord::Partition { version, .. } => *version,
        }
    }

    /// The record as the codec's value tree (the fields the Python image's dict has).
    pub fn to_struct(&self) -> Struct {
        match self {
            SnapshotRecord::Generic { data, .. } => data.clone(),
            SnapshotRecord::Partition { version, topic_id, partition_id, partition: p, with_elr } => {
                let mut f = vec![
                    ("PartitionId", Value::Int(*partition_id)),
                    ("TopicId", Value::Uuid(*topic_id)),
                    ("Replicas", ints(&p.replicas)),
                    ("Isr", ints(&p.isr)),
                    ("RemovingReplicas", ints(&p.removing_replicas)),
                    ("AddingReplicas", ints(&p.adding_replicas)),
                    ("Leader", Value::Int(p.leader)),
                    ("LeaderRecoveryState", Value::Int(p.leader_recovery_state)),
                    ("LeaderEpoch", Value::Int(p.leader_epoch)),
                    ("PartitionEpoch", Value::Int(p.partition_epoch)),
                ];
                if *version >= 1 {
                    f.push(("Directories", uuids(&p.directories)));
                }
                if *with_elr && *version >= 2 {
                    if !p.eligible_leader_replicas.is_empty() {
                        f.push(("EligibleLeaderReplicas", ints(&p.eligible_leader_replicas)));
                    }
                    if !p.last_known_elr.is_empty() {
                        f.push(("LastKnownElr", ints(&p.last_known_elr)));
                    }
                }
                st(f)
            }
        }
    }

    /// Appends the framed record value to `out`, byte for byte what the generic codec writes.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), CodecError> {
        if let SnapshotRecord::Partition { version, topic_id, partition_id, partition, with_elr } = self {
            if encode_partition(out, *version, topic_id, *partition_id, partition, *with_elr) {
                return Ok(());
            }
        }
        out.extend_from_slice(&schema::encode_metadata_record(self.api_key(), self.version(), &self.to_struct())?);
        Ok(())
    }
}

fn compact_ints(out: &mut Vec<u8>, v: &[i32]) {
    write_uvarint(out, v.len() as u32 + 1);
    for x in v {
        out.extend_from_slice(&x.to_be_bytes());
    }
}

fn compact_len_size(n: usize) -> usize {
    let mut tmp = Vec::with_capacity(5);
    write_uvarint(&mut tmp, n as u32 + 1);
    tmp.len()
}

/// `PartitionRecord` (versions 0-2, flexible) written directly. Returns false, writing
/// nothing, for values the generic codec must judge (out of range, oversized lists).
fn encode_partition(out: &mut Vec<u8>, version: i16, topic_id: &Uuid, pid: i64, p: &Partition, with_elr: bool) -> bool {
    let fits = |x: i64| i32::try_from(x).is_ok();
    let small = |n: usize| n < (i32::MAX as usize) / 16;
    if !(0..=2).contains(&version)
        || !fits(pid)
        || !fits(p.leader)
        || !fits(p.leader_epoch)
        || !fits(p.partition_epoch)
        || i8::try_from(p.leader_recovery_state).is_err()
        || ![&p.replicas, &p.isr, &p.removing_replicas, &p.adding_replicas, &p.eligible_leader_replicas, &p.last_known_elr].iter().all(|v| small(v.len()))
        || !small(p.directories.len())
    {
        return false;
    }
    write_uvarint(out, schema::FRAME_VERSION);
    write_uvarint(out, PARTITION as u32);
    write_uvarint(out, version as u32);
    out.extend_from_slice(&(pid as i32).to_be_bytes());
    out.extend_from_slice(topic_id);
    compact_ints(out, &p.replicas);
    compact_ints(out, &p.isr);
    compact_ints(out, &p.removing_replicas);
    compact_ints(out, &p.adding_replicas);
    out.extend_from_slice(&(p.leader as i32).to_be_bytes());
    out.extend_from_slice(&(p.leader_epoch as i32).to_be_bytes());
    out.extend_from_slice(&(p.partition_epoch as i32).to_be_bytes());
    if version >= 1 {
        write_uvarint(out, p.directories.len() as u32 + 1);
        for d in &p.directories {
            out.extend_from_slice(d);
        }
    }
    let lrs = p.leader_recovery_state != 0;
    let elr = with_elr && version >= 2 && !p.eligible_leader_replicas.is_empty();
    let lke = with_elr && version >= 2 && !p.last_known_elr.is_empty();
    write_uvarint(out, lrs as u32 + elr as u32 + lke as u32);
    if lrs {
        write_uvarint(out, 0);
        write_uvarint(out, 1);
        out.push(p.leader_recovery_state as i8 as u8);
    }
    for (tag, on, v) in [(1, elr, &p.eligible_leader_replicas), (2, lke, &p.last_known_elr)] {
        if on {
            write_uvarint(out, tag);
            write_uvarint(out, (compact_len_size(v.len()) + 4 * v.len()) as u32);
            compact_ints(out, v);
        }
    }
    true
}

fn generic(api_key: i16, version: i16, fields: Vec<(&'static str, Value)>) -> SnapshotRecord<'static> {
    SnapshotRecord::Generic { api_key, version, data: st(fields) }
}

fn field_in(api_key: i16, name: &str, version: i16) -> bool {
    schema::metadata_schema(api_key).is_some_and(|m| m.body.fields.iter().any(|f| f.name == name && f.versions.contains(version)))
}

impl Image {
    /// The records of a snapshot of this image, in Kafka's order (`MetadataImage.write`), at
    /// the record versions of `metadata_version` (default: the image's), keys sorted within
    /// each section so equal images give equal records.
    pub fn snapshot_records(&self, metadata_version: Option<i64>) -> Result<Vec<SnapshotRecord<'_>>, Unwritable> {
        let mv = metadata_version.unwrap_or_else(|| self.effective_metadata_version());
        let mut losses: Vec<String> = Vec::new();
        let mut out: Vec<SnapshotRecord<'_>> = Vec::with_capacity(self.partition_count() + self.topics.len() + 64);
        // 1. features
        if mv < MV_3_3_IV0 {
            let mut names: Vec<&str> = self.features.keys().map(String::as_str).collect();
            if self.metadata_version.is_some() {
                names.push(MV_FEATURE);
            }
            if !names.is_empty() {
                names.sort_unstable();
                losses.push(format!("feature flag(s): {}", names.join(", ")));
            }
        } else {
            out.push(generic(FEATURE_LEVEL, 0, vec![("Name", Value::Str(MV_FEATURE.into())), ("FeatureLevel", Value::Int(mv))]));
            for (name, level) in &self.features {
                out.push(generic(FEATURE_LEVEL, 0, vec![("Name", Value::Str(name.clone())), ("FeatureLevel", Value::Int(*level))]));
            }
        }
        // ZkMigrationStateRecord: 3.x writes one at MV >= 3.4-IV0; 4.x (no ZooKeeper) never
        // does and ignores it on replay, so it is written for MV < 4.0 or a state that is not NONE.
        let zk = self.zk_migration_state;
        if mv >= MV_3_4_IV0 && (mv < MV_4_0_IV0 || zk != 0) {
            out.push(generic(ZK_MIGRATION_STATE, 0, vec![("ZkMigrationState", Value::Int(zk))]));
        } else if zk != 0 {
            losses.push(format!("the ZK Migration state which was {}", zk_migration_state_name(zk).unwrap_or("None")));
        }
        // 2. cluster
        let bver: i16 = if mv >= MV_4_3_IV0 {
            4
        } else if mv >= MV_3_7_IV2 {
            3
        } else if mv >= MV_3_4_IV0 {
            2
        } else if mv >= MV_3_3_IV3 {
            1
        } else {
            0
        };
        for b in self.brokers.values() {
            if bver < 1 && b.in_controlled_shutdown {
                losses.push("the inControlledShutdown state of one or more brokers".into());
            }
            if bver < 2 && b.is_migrating_zk_broker {
                losses.push("the isMigratingZkBroker state of one or more brokers".into());
            }
            if bver < 3 && !b.log_dirs.is_empty() {
                losses.push("the online log directories of one or more brokers".into());
            }
            if bver < 4 && b.cordoned_log_dirs.as_ref().is_some_and(|c| !c.is_empty()) {
                losses.push("the cordoned log directories of one or more brokers".into());
            }
            let fields: Vec<(&'static str, Value)> = vec![
                ("BrokerId", Value::Int(b.broker_id)),
                ("IsMigratingZkBroker", Value::Bool(b.is_migrating_zk_broker)),
                ("IncarnationId", Value::Uuid(b.incarnation_id)),
                ("BrokerEpoch", Value::Int(b.broker_epoch)),
                ("EndPoints", Value::Array(b.end_points.iter().cloned().map(Value::Struct).collect())),
                ("Features", Value::Array(b.features.iter().cloned().map(Value::Struct).collect())),
                ("Rack", b.rack.clone().map_or(Value::Null, Value::Str)),
                ("Fenced", Value::Bool(b.fenced)),
                ("InControlledShutdown", Value::Bool(b.in_controlled_shutdown)),
                ("LogDirs", uuids(&b.log_dirs)),
                ("CordonedLogDirs", b.cordoned_log_dirs.as_deref().map_or(Value::Null, uuids)),
            ];
            let fields = fields.into_iter().filter(|(k, _)| field_in(REGISTER_BROKER, k, bver)).collect();
            out.push(generic(REGISTER_BROKER, bver, fields));
        }
        if !self.controllers.is_empty() {
            if mv >= MV_3_7_IV0 {
                for c in self.controllers.values() {
                    out.push(SnapshotRecord::Generic { api_key: REGISTER_CONTROLLER, version: 0, data: c.clone() });
                }
            } else {
                losses.push("controller registration data".into());
            }
        }
        // 3. topics
        let pver: i16 = if mv >= MV_4_0_IV1 {
            2
        } else if mv >= MV_3_7_IV2 {
            1
        } else {
            0
        };
        let with_elr = mv >= MV_4_0_IV1 && self.features.get(ELR_FEATURE).copied().unwrap_or(0) >= 1;
        for t in self.topics_by_name() {
            out.push(generic(TOPIC, 0, vec![("Name", Value::Str(t.name.clone())), ("TopicId", Value::Uuid(t.id))]));
            for (pid, p) in t.partitions_sorted() {
                if pver < 1 && p.directories.iter().any(|d| *d != MIGRATING) {
                    losses.push("the directory assignment state of one or more replicas".into());
                }
                out.push(SnapshotRecord::Partition { version: pver, topic_id: t.id, partition_id: pid, partition: p, with_elr });
            }
        }
        // 4. configs
        for ((rtype, rname), cfg) in &self.configs {
            for (k, v) in cfg {
                out.push(generic(
                    CONFIG,
                    0,
                    vec![("ResourceType", Value::Int(*rtype)), ("ResourceName", Value::Str(rname.clone())), ("Name", Value::Str(k.clone())), ("Value", Value::Str(v.clone()))],
                ));
            }
        }
        // 5. client quotas
        for (entity, q) in self.quotas_sorted() {
            for (k, v) in &q.values {
                let ents = entity
                    .iter()
                    .map(|(t, n)| Value::Struct(st(vec![("EntityType", Value::Str(t.clone())), ("EntityName", n.clone().map_or(Value::Null, Value::Str))])))
                    .collect();
                out.push(generic(CLIENT_QUOTA, 0, vec![("Entity", Value::Array(ents)), ("Key", Value::Str(k.clone())), ("Value", Value::Float(*v)), ("Remove", Value::Bool(false))]));
            }
        }
        // 6. producer ids
        if self.next_producer_id >= 0 {
            out.push(generic(PRODUCER_IDS, 0, vec![("BrokerId", Value::Int(-1)), ("BrokerEpoch", Value::Int(-1)), ("NextProducerId", Value::Int(self.next_producer_id))]));
        }
        // 7. ACLs
        for acl in self.acls.values() {
            out.push(SnapshotRecord::Generic { api_key: ACCESS_CONTROL_ENTRY, version: 0, data: acl.clone() });
        }
        // 8. SCRAM
        if !self.scram.is_empty() {
            if mv >= MV_3_5_IV2 {
                for cred in self.scram.values() {
                    out.push(SnapshotRecord::Generic { api_key: USER_SCRAM_CREDENTIAL, version: 0, data: cred.clone() });
                }
            } else {
                let mut users: Vec<&str> = self.scram.keys().map(|(_, u)| u.as_str()).collect();
                users.sort_unstable();
                users.dedup();
                losses.push(format!("SCRAM credentials of {}", users.join(", ")));
            }
        }
        // 9. delegation tokens
        if !self.delegation_tokens.is_empty() {
            if mv >= MV_3_6_IV2 {
                for tok in self.delegation_tokens.values() {
                    out.push(SnapshotRecord::Generic { api_key: DELEGATION_TOKEN, version: 0, data: tok.clone() });
                }
            } else {
                let ids: Vec<&str> = self.delegation_tokens.keys().map(String::as_str).collect();
                losses.push(format!("DelegationTokenImage({})", ids.join(", ")));
            }
        }
        if !losses.is_empty() {
            let mut seen = std::collections::HashSet::new();
            losses.retain(|l| seen.insert(l.clone()));
            return Err(Unwritable { metadata_version: mv, losses });
        }
        Ok(out)
    }

    /// Writes a snapshot of this image as described by `opts`; returns the final path.
    pub fn write_snapshot(&self, opts: &SnapshotOptions) -> Result<PathBuf, WriteError> {
        let records = self.snapshot_records(opts.metadata_version).map_err(WriteError::Unwritable)?;
        let mut values: Vec<u8> = Vec::with_capacity(records.len() * 64);
        let mut ends: Vec<usize> = Vec::with_capacity(records.len());
        for r in &records {
            r.encode(&mut values).map_err(WriteError::Encode)?;
            ends.push(values.len());
        }
        drop(records);
        let final_path = opts.dir.join(&opts.file_name);
        if final_path.exists() {
            return Err(WriteError::Refused(format!("{}: already exists", final_path.display())));
        }
        if opts.kraft_version == 0 && opts.voters.is_some() {
            return Err(WriteError::Refused("a voter set needs kraft.version >= 1".into()));
        }
        let (mut file, part) = create_part(&opts.dir, &opts.part_prefix)?;
        let written = write_batches(&mut file, opts, &values, &ends).and_then(|()| file.into_inner().map_err(|e| io_error(e.into_error())));
        match written {
            // fsync, read-only, atomic rename, fsync of the directory
            Ok(f) => fsutil::commit_part(f, &part, &final_path, Some(0o444)).map_err(|e| WriteError::Io(e.to_string()))?,
            Err(e) => {
                let _ = std::fs::remove_file(&part);
                return Err(e);
            }
        }
        Ok(final_path)
    }
}

/// How to write a snapshot file.
#[derive(Debug, Clone)]
pub struct SnapshotOptions {
    pub dir: PathBuf,
    /// `<end offset>-<epoch>.checkpoint` (or another name, e.g. `bootstrap.checkpoint`).
    pub file_name: String,
    /// Prefix of the temporary `.checkpoint.part` file (`<end offset>-<epoch>-`).
    pub part_prefix: String,
    pub epoch: i32,
    pub last_contained_log_timestamp: i64,
    pub kraft_version: i16,
    /// An encoded `VotersRecord` value for the header batch.
    pub voters: Option<Vec<u8>>,
    /// Every batch's timestamp.
    pub time_ms: i64,
    /// The metadata.version to write at (None: the image's).
    pub metadata_version: Option<i64>,
    /// Records per append: a list never spans two batches.
    pub batch_records: usize,
    /// The largest batch (`KafkaRaftClient.MAX_BATCH_SIZE_BYTES`).
    pub max_batch_bytes: usize,
}

/// Why a snapshot was not written.
#[derive(Debug, Clone)]
pub enum WriteError {
    /// The metadata.version cannot represent the image.
    Unwritable(Unwritable),
    /// A value the codec cannot encode (e.g. an epoch past int32).
    Encode(CodecError),
    /// The snapshot writer refused (file exists, voters without kraft.version, list too large).
    Refused(String),
    Io(String),
}

impl fmt::Display for WriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WriteError::Unwritable(u) => write!(f, "metadata.version level {} cannot represent: {}", u.metadata_version, u.losses.join("; ")),
            WriteError::Encode(e) => write!(f, "{e}"),
            WriteError::Refused(m) | WriteError::Io(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for WriteError {}

fn io_error(e: std::io::Error) -> WriteError {
    WriteError::Io(e.to_string())
}

/// Creates `<prefix><random>.checkpoint.part` (mode 0600, never an existing file).
fn create_part(dir: &Path, prefix: &str) -> Result<(std::io::BufWriter<std::fs::File>, PathBuf), WriteError> {
    use std::hash::{BuildHasher, Hasher};
    for attempt in 0..100u32 {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(attempt);
        h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
        let path = dir.join(format!("{prefix}{:016x}.checkpoint.part", h.finish()));
        let mut o = std::fs::OpenOptions::new();
        o.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut o, 0o600);
        match o.open(&path) {
            Ok(f) => return Ok((std::io::BufWriter::with_capacity(1 << 20, f), path)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(WriteError::Io(format!("{}: {e}", path.display()))),
        }
    }
    Err(WriteError::Io(format!("{}: no free name for a .checkpoint.part file", dir.display())))
}

fn write_batches(w: &mut impl Write, opts: &SnapshotOptions, values: &[u8], ends: &[usize]) -> Result<(), WriteError> {
    let mut next_offset = 0i64;
    let mut buf = Vec::with_capacity(opts.max_batch_bytes.min(values.len() + 4096) + 256);
    let emit = |w: &mut dyn Write, recs: &[RecordInput], control: bool, next: &mut i64, buf: &mut Vec<u8>| -> Result<(), WriteError> {
        buf.clear();
        let p = BatchParams { base_offset: *next, partition_leader_epoch: opts.epoch, control, ..Default::default() };
        encode_batch(&p, recs, buf).map_err(|e| WriteError::Io(e.to_string()))?;
        w.write_all(buf).map_err(io_error)?;
        *next += recs.len() as i64;
        Ok(())
    };
    let ts = opts.time_ms;
    let mut header: Vec<([u8; 4], Vec<u8>)> = vec![(control_key(SNAPSHOT_HEADER), header_value(opts.last_contained_log_timestamp))];
    if opts.kraft_version >= 1 {
        header.push((control_key(crate::snapshot::KRAFT_VERSION), kraft_version_value(opts.kraft_version)));
        if let Some(v) = &opts.voters {
            header.push((control_key(crate::snapshot::KRAFT_VOTERS), v.clone()));
        }
    }
    let inputs: Vec<RecordInput> = header.iter().map(|(k, v)| RecordInput { timestamp: ts, key: Some(&k[..]), value: Some(v), headers: Vec::new() }).collect();
    emit(w, &inputs, true, &mut next_offset, &mut buf)?;

    // Data: lists of `batch_records` values, gathered into batches of at most max_batch_bytes
    // (per record at most 5 + 1 + 1 + 1 + 1 + 5 + 1 bytes of framing; 61 bytes of batch header).
    let value = |i: usize| &values[if i == 0 { 0 } else { ends[i - 1] }..ends[i]];
    let mut pending: Vec<RecordInput> = Vec::new();
    let mut pending_bytes = 0usize;
    let step = opts.batch_records.max(1);
    let mut start = 0;
    while start < ends.len() {
        let stop = (start + step).min(ends.len());
        let size: usize = (start..stop).map(|i| value(i).len() + 15).sum();
        if size + 61 > opts.max_batch_bytes {
            return Err(WriteError::Refused(format!("a list of {size} bytes does not fit one batch of {} bytes", opts.max_batch_bytes)));
        }
        if !pending.is_empty() && pending_bytes + size + 61 > opts.max_batch_bytes {
            emit(w, &pending, false, &mut next_offset, &mut buf)?;
            pending.clear();
            pending_bytes = 0;
        }
        pending.extend((start..stop).map(|i| RecordInput { timestamp: ts, key: None, value: Some(value(i)), headers: Vec::new() }));
        pending_bytes += size;
        start = stop;
    }
    if !pending.is_empty() {
        emit(w, &pending, false, &mut next_offset, &mut buf)?;
    }
    let fk = control_key(SNAPSHOT_FOOTER);
    let footer = footer_value();
    emit(w, &[RecordInput { timestamp: ts, key: Some(&fk), value: Some(&footer), headers: Vec::new() }], true, &mut next_offset, &mut buf)
}
