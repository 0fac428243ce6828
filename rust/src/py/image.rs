//! The metadata image engine (`crate::image`) from Python: `ImageState`, which
//! `kraftkit.metadata.image.MetadataImage` wraps. Conversions only: records in as dicts,
//! batches or files (replayed with the GIL released), views out as the dicts and tuples the
//! Python image has always exposed.
//!
//! Errors the image itself raises come out as `ImageError` with a `kind`: "replay" (`offset`,
//! `reason`), "unwritable" (`metadata_version`, `losses`) or "snapshot" (`reason`); the Python
//! face turns them into `ReplayError`, `UnwritableMetadataError` and `SnapshotError`. Errors in
//! the bytes are the usual `CorruptRecordError` family, naming file, offset and position.

use super::batch::RecordBatch;
use super::errors::{to_pyerr, KraftkitError};
use super::metadata::{codec_err, struct_from_py, struct_to_py, uuid_to_py};
use crate::image::{Broker, Image, ImageLoadError, Partition, ReplayError, SnapshotOptions, Unwritable, WriteError};
use crate::schema::{self, Struct};
use pyo3::create_exception;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};
use std::path::PathBuf;

create_exception!(kraftkit._core, ImageError, KraftkitError, "An error of the metadata image engine; `kind` says which (see kraftkit.metadata.image).");

fn image_error(py: Python<'_>, kind: &str, message: &str, set: impl FnOnce(&Bound<'_, PyAny>) -> PyResult<()>) -> PyErr {
    let err = ImageError::new_err(message.to_owned());
    let v = err.value(py);
    let _ = v.setattr("kind", kind);
    let _ = set(v.as_any());
    err
}

fn replay_err(py: Python<'_>, e: &ReplayError) -> PyErr {
    image_error(py, "replay", &e.to_string(), |v| {
        v.setattr("offset", e.offset)?;
        v.setattr("reason", e.reason.as_str())
    })
}

fn unwritable_err(py: Python<'_>, u: &Unwritable) -> PyErr {
    image_error(py, "unwritable", &u.losses.join("; "), |v| {
        v.setattr("metadata_version", u.metadata_version)?;
        v.setattr("losses", u.losses.clone())
    })
}

fn load_err(py: Python<'_>, e: &ImageLoadError) -> PyErr {
    match e {
        ImageLoadError::Batch { file, error } => to_pyerr(py, error, file.as_deref()),
        ImageLoadError::Record { file, offset, error } => {
            let err = codec_err(py, error, *offset);
            if let Some(f) = file {
                let _ = err.value(py).setattr("file", f.as_str());
            }
            err
        }
        ImageLoadError::Replay(r) => replay_err(py, r),
        ImageLoadError::Io { file, error } => {
            pyo3::exceptions::PyOSError::new_err(format!("{file}: {}", crate::py::errors::without_os_error(error)))
        }
    }
}

fn write_err(py: Python<'_>, e: &WriteError) -> PyErr {
    match e {
        WriteError::Unwritable(u) => unwritable_err(py, u),
        WriteError::Encode(c) => codec_err(py, c, None),
        WriteError::Refused(m) => image_error(py, "snapshot", m, |v| v.setattr("reason", m.as_str())),
        WriteError::Io(m) => pyo3::exceptions::PyOSError::new_err(crate::py::errors::without_os_error(m)),
    }
}

/// A dict record encoded as the codec writes it (missing fields take their defaults; types
/// and ranges are checked); a dict that does not encode is a malformed record. None for an
/// unknown record type.
fn encode_dict(py: Python<'_>, api_key: i16, version: i16, data: &Bound<'_, PyDict>, offset: Option<i64>) -> PyResult<Option<Vec<u8>>> {
    let Some(m) = schema::metadata_schema(api_key) else { return Ok(None) };
    let malformed = |msg: String| replay_err(py, &ReplayError { offset, reason: format!("malformed {api_key} record: {msg}") });
    let st = struct_from_py(data, m.body, m.name).map_err(|e| malformed(e.to_string()))?;
    Ok(Some(schema::encode_metadata_record(api_key, version, &st).map_err(|e| malformed(e.to_string()))?))
}

/// The state of a metadata image, replayed in Rust.
#[pyclass(module = "kraftkit._core")]
pub struct ImageState {
    inner: Image,
}

fn uuids<'py>(py: Python<'py>, v: &[[u8; 16]]) -> PyResult<Bound<'py, PyList>> {
    let l = PyList::empty(py);
    for u in v {
        l.append(uuid_to_py(py, u)?)?;
    }
    Ok(l)
}

fn structs<'py>(py: Python<'py>, v: &[Struct]) -> PyResult<Bound<'py, PyList>> {
    let l = PyList::empty(py);
    for s in v {
        l.append(struct_to_py(py, s)?)?;
    }
    Ok(l)
}

fn broker_py<'py>(py: Python<'py>, b: &Broker) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("BrokerId", b.broker_id)?;
    d.set_item("IsMigratingZkBroker", b.is_migrating_zk_broker)?;
    d.set_item("IncarnationId", uuid_to_py(py, &b.incarnation_id)?)?;
    d.set_item("BrokerEpoch", b.broker_epoch)?;
    d.set_item("EndPoints", structs(py, &b.end_points)?)?;
    d.set_item("Features", structs(py, &b.features)?)?;
    d.set_item("Rack", b.rack.as_deref())?;
    d.set_item("Fenced", b.fenced)?;
    d.set_item("InControlledShutdown", b.in_controlled_shutdown)?;
    d.set_item("LogDirs", uuids(py, &b.log_dirs)?)?;
    match &b.cordoned_log_dirs {
        Some(c) => d.set_item("CordonedLogDirs", uuids(py, c)?)?,
        None => d.set_item("CordonedLogDirs", py.None())?,
    }
    Ok(d)
}

fn partition_py<'py>(py: Python<'py>, p: &Partition) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("Replicas", p.replicas.clone())?;
    d.set_item("Isr", p.isr.clone())?;
    d.set_item("RemovingReplicas", p.removing_replicas.clone())?;
    d.set_item("AddingReplicas", p.adding_replicas.clone())?;
    d.set_item("Leader", p.leader)?;
    d.set_item("LeaderRecoveryState", p.leader_recovery_state)?;
    d.set_item("LeaderEpoch", p.leader_epoch)?;
    d.set_item("PartitionEpoch", p.partition_epoch)?;
    d.set_item("Directories", uuids(py, &p.directories)?)?;
    d.set_item("EligibleLeaderReplicas", p.eligible_leader_replicas.clone())?;
    d.set_item("LastKnownElr", p.last_known_elr.clone())?;
    Ok(d)
}

#[pymethods]
impl ImageState {
    #[new]
    fn new() -> Self {
        ImageState { inner: Image::new() }
    }

    /// An independent copy.
    fn copy(&self) -> Self {
        ImageState { inner: self.inner.clone() }
    }

    /// Applies one metadata record given as a dict of its version (missing fields take their
    /// defaults, as if the record had been encoded and read back).
    #[pyo3(signature = (api_key, version, data, offset = None))]
    fn replay(&mut self, py: Python<'_>, api_key: i16, version: i16, data: &Bound<'_, PyDict>, offset: Option<i64>) -> PyResult<()> {
        match encode_dict(py, api_key, version, data, offset)? {
            Some(value) => self.inner.replay_value(&value, offset).map_err(|e| load_err(py, &e)),
            // Unknown types fail when applied (inside a transaction: when it ends), as Kafka does.
            None => self.inner.replay(api_key, version, Struct::default(), offset).map_err(|e| replay_err(py, &e)),
        }
    }

    /// Applies a control record (`data` None: a transaction marker or a type without a schema).
    #[pyo3(signature = (control_type, data = None))]
    fn replay_control(&mut self, py: Python<'_>, control_type: i16, data: Option<&Bound<'_, PyDict>>) -> PyResult<()> {
        let st = match (data, schema::control_schema(control_type)) {
            (Some(d), Some(c)) => {
                let st = struct_from_py(d, c.schema.body, c.schema.name)?;
                let bytes = schema::encode_control_record(control_type, &st).map_err(|e| codec_err(py, &e, None))?;
                Some(schema::decode_control_record(control_type, &bytes).map_err(|e| codec_err(py, &e, None))?.2)
            }
            _ => None,
        };
        self.inner.replay_control(control_type, st.as_ref()).map_err(|e| replay_err(py, &e))
    }

    /// Applies every record of a batch and moves the provenance to its last offset.
    fn replay_batch(&mut self, py: Python<'_>, batch: &Bound<'_, RecordBatch>) -> PyResult<()> {
        let b = batch.get();
        let bytes = &b.data.bytes()[b.start..b.end];
        let (h, pos, file) = (b.h, b.position, b.file.clone());
        let inner = &mut self.inner;
        py.allow_threads(|| inner.replay_batch(&h, bytes, pos, file.as_deref())).map_err(|e| load_err(py, &e))
    }

    /// Replays log segment files (in offset order) from `start` up to `at` (exclusive), CRC
    /// checking every batch read, with the GIL released. Returns (end offset reached, whether
    /// a batch at or past `at` was reached).
    #[pyo3(signature = (files, start = 0, at = None, skip_below_start = true))]
    fn replay_log(&mut self, py: Python<'_>, files: Vec<String>, start: i64, at: Option<i64>, skip_below_start: bool) -> PyResult<(i64, bool)> {
        let inner = &mut self.inner;
        let r = py.allow_threads(|| inner.replay_log_files(&files, start, at, skip_below_start)).map_err(|e| load_err(py, &e))?;
        Ok((r.end, r.reached_end))
    }

    /// Replays a snapshot file's records with the GIL released; returns its SnapshotHeader's
    /// LastContainedLogTimestamp (-1 without one).
    fn replay_snapshot(&mut self, py: Python<'_>, path: String) -> PyResult<i64> {
        let inner = &mut self.inner;
        py.allow_threads(|| {
            let map = crate::image::read_file(&path)?;
            inner.replay_snapshot(map.as_ref().map_or(&[][..], |m| &m[..]), Some(&path))
        })
        .map_err(|e| load_err(py, &e))
    }

    #[getter]
    fn metadata_version(&self) -> Option<i64> {
        self.inner.metadata_version
    }
    #[getter]
    fn zk_migration_state(&self) -> i64 {
        self.inner.zk_migration_state
    }
    #[getter]
    fn next_producer_id(&self) -> i64 {
        self.inner.next_producer_id
    }
    #[getter]
    fn kraft_version(&self) -> Option<i64> {
        self.inner.kraft_version
    }
    #[getter]
    fn records_replayed(&self) -> u64 {
        self.inner.records_replayed
    }
    /// Records applied of the given types (api keys).
    fn replayed_of(&self, api_keys: Vec<i16>) -> u64 {
        self.inner.replayed_of(&api_keys)
    }
    /// (offset, epoch, timestamp) of the last record.
    #[getter]
    fn provenance(&self) -> (i64, i64, i64) {
        let p = self.inner.provenance;
        (p.offset, p.epoch, p.timestamp)
    }
    fn set_provenance(&mut self, offset: i64, epoch: i64, timestamp: i64) {
        self.inner.provenance = crate::image::Provenance { offset, epoch, timestamp };
    }
    #[getter]
    fn in_transaction(&self) -> bool {
        self.inner.pending_transaction.is_some()
    }
    #[getter]
    fn topic_count(&self) -> usize {
        self.inner.topics.len()
    }
    #[getter]
    fn partition_count(&self) -> usize {
        self.inner.partition_count()
    }

    // ------------------------------------------------------------------ views
    /// {feature: level} (metadata.version excluded).
    fn features<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (k, v) in &self.inner.features {
            d.set_item(k, v)?;
        }
        Ok(d)
    }
    /// {broker id: registration dict}.
    fn brokers<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (k, b) in &self.inner.brokers {
            d.set_item(k, broker_py(py, b)?)?;
        }
        Ok(d)
    }
    /// {controller id: registration dict}.
    fn controllers<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (k, c) in &self.inner.controllers {
            d.set_item(k, struct_to_py(py, c)?)?;
        }
        Ok(d)
    }
    /// [(name, topic id, {partition id: partition dict})] in the order topics entered the image.
    fn topics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let l = PyList::empty(py);
        for t in self.inner.topics_in_order() {
            let parts = PyDict::new(py);
            for (pid, p) in t.partitions_sorted() {
                parts.set_item(pid, partition_py(py, p)?)?;
            }
            l.append((t.name.as_str(), uuid_to_py(py, &t.id)?, parts))?;
        }
        Ok(l)
    }
    /// {topic name: topic id}.
    fn topic_ids<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (k, v) in &self.inner.topic_ids {
            d.set_item(k, uuid_to_py(py, v)?)?;
        }
        Ok(d)
    }
    /// {(resource type, resource name): {key: value}}.
    fn configs<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for ((t, n), cfg) in &self.inner.configs {
            let c = PyDict::new(py);
            for (k, v) in cfg {
                c.set_item(k, v)?;
            }
            d.set_item((t, n.as_str()), c)?;
        }
        Ok(d)
    }
    /// {((entity type, entity name), ...): {key: value}} in the order entities entered the image.
    fn client_quotas<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let mut v: Vec<_> = self.inner.client_quotas.iter().collect();
        v.sort_by_key(|(_, q)| q.seq);
        let d = PyDict::new(py);
        for (entity, q) in v {
            let key = PyTuple::new(py, entity.iter().map(|(t, n)| (t.as_str(), n.as_deref())))?;
            let c = PyDict::new(py);
            for (k, x) in &q.values {
                c.set_item(k, x)?;
            }
            d.set_item(key, c)?;
        }
        Ok(d)
    }
    /// {ACL id: AccessControlEntryRecord dict}.
    fn acls<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (k, a) in &self.inner.acls {
            d.set_item(uuid_to_py(py, k)?, struct_to_py(py, a)?)?;
        }
        Ok(d)
    }
    /// {(mechanism, user): UserScramCredentialRecord dict}.
    fn scram<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for ((m, u), c) in &self.inner.scram {
            d.set_item((m, u.as_str()), struct_to_py(py, c)?)?;
        }
        Ok(d)
    }
    /// {token id: DelegationTokenRecord dict}.
    fn delegation_tokens<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (k, t) in &self.inner.delegation_tokens {
            d.set_item(k, struct_to_py(py, t)?)?;
        }
        Ok(d)
    }
    /// The last VotersRecord as a dict, or None.
    fn voters<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        self.inner.voters.as_ref().map(|v| struct_to_py(py, v)).transpose()
    }
    /// [(api_key, version, dict, offset)] of an open metadata transaction, or None.
    fn pending_transaction<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyList>>> {
        let Some(p) = &self.inner.pending_transaction else { return Ok(None) };
        let l = PyList::empty(py);
        for r in p {
            l.append((r.api_key, r.version, struct_to_py(py, &r.data)?, r.offset))?;
        }
        Ok(Some(l))
    }

    // ------------------------------------------------------------------ snapshots
    /// [(api_key, version, dict)] of a snapshot at `metadata_version` (None: the image's).
    #[pyo3(signature = (metadata_version = None))]
    fn snapshot_records<'py>(&self, py: Python<'py>, metadata_version: Option<i64>) -> PyResult<Bound<'py, PyList>> {
        let recs = self.inner.snapshot_records(metadata_version).map_err(|u| unwritable_err(py, &u))?;
        let l = PyList::empty(py);
        for r in &recs {
            l.append((r.api_key(), r.version(), struct_to_py(py, &r.to_struct())?))?;
        }
        Ok(l)
    }

    /// Writes a snapshot file `directory/file_name` through `<part_prefix><random>.checkpoint.part`
    /// with the GIL released; returns the final path. `voters`: an encoded VotersRecord value,
    /// or True for the image's own voter set.
    #[pyo3(signature = (directory, file_name, part_prefix, *, epoch, last_contained_log_timestamp, kraft_version, voters, time_ms, metadata_version = None, batch_records = 1024, max_batch_bytes = crate::snapshot::MAX_BATCH_SIZE))]
    #[allow(clippy::too_many_arguments)]
    fn write_snapshot(
        &self,
        py: Python<'_>,
        directory: PathBuf,
        file_name: String,
        part_prefix: String,
        epoch: i32,
        last_contained_log_timestamp: i64,
        kraft_version: i16,
        voters: &Bound<'_, PyAny>,
        time_ms: i64,
        metadata_version: Option<i64>,
        batch_records: usize,
        max_batch_bytes: usize,
    ) -> PyResult<String> {
        let voters = if voters.is_none() {
            None
        } else if let Ok(b) = voters.downcast::<PyBytes>() {
            Some(b.as_bytes().to_vec())
        } else if voters.is_truthy()? {
            match &self.inner.voters {
                Some(v) => Some(schema::encode_control_record(crate::snapshot::KRAFT_VOTERS, v).map_err(|e| codec_err(py, &e, None))?),
                None => None,
            }
        } else {
            None
        };
        let opts = SnapshotOptions { dir: directory, file_name, part_prefix, epoch, last_contained_log_timestamp, kraft_version, voters, time_ms, metadata_version, batch_records, max_batch_bytes };
        let inner = &self.inner;
        let path = py.allow_threads(|| inner.write_snapshot(&opts)).map_err(|e| write_err(py, &e))?;
        Ok(path.to_string_lossy().into_owned())
    }

    fn __repr__(&self) -> String {
        format!("ImageState(topics={}, brokers={}, offset={})", self.inner.topics.len(), self.inner.brokers.len(), self.inner.provenance.offset)
    }
}

/// Names of the ZK migration states by id (`ZkMigrationState`).
#[pyfunction]
fn zk_migration_states() -> Vec<(i64, &'static str)> {
    crate::image::ZK_MIGRATION_STATES.to_vec()
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("ImageError", m.py().get_type::<ImageError>())?;
    m.add_class::<ImageState>()?;
    m.add_function(wrap_pyfunction!(zk_migration_states, m)?)?;
    Ok(())
}
