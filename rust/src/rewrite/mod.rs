//! Rewriting a KRaft snapshot, record by record, to other record versions: the byte work of
//! metadata.version downgrades (and of upgrades, which only change feature levels).
//!
//! The caller decides the policy in a [`Plan`]: the version each record type is written at
//! (or that it cannot be written at all), what each finalized feature level becomes, and
//! whether the KRaft control records survive. This module streams the snapshot batch by
//! batch, keeps every record it can unchanged (a batch nobody touched is copied verbatim),
//! re-encodes the others, and accounts for everything it could not carry: a field that the
//! target version lacks is dropped silently only when it holds its default; otherwise the
//! loss is counted per record type and field, with sample keys (topic-partition, broker id,
//! name...). A record type the target cannot hold is dropped, silently only when all its
//! fields hold their defaults (a `ZkMigrationStateRecord` in state NONE carries nothing).
//! Unknown is never guessed: a record type or record version the schemas lack is refused, and
//! so, when the plan asks (`refuse_unknown`), are feature levels and control records the
//! caller's tables do not describe.
//!
//! Re-encoding splices bytes where it can (a metadata record's fields keep their encoding
//! across versions, so removing a field is cutting its bytes out and renumbering the tagged
//! section); records whose nested structs change shape between the versions go through the
//! generic decoder and encoder.
//!
//! The work is split along its seams: `driver` reads the batches and writes them out (copied,
//! patched or rebuilt), `record` decides each record's fate, `splice` re-encodes a record's bytes.

mod driver;
mod record;
mod splice;
#[cfg(test)]
mod tests;

use crate::error::Result;
use driver::{run, ReadBatches, SliceBatches};
use record::Rewriter;
use std::collections::HashMap;
use std::io::{Read, Write};

use crate::schema::api_keys::{ACCESS_CONTROL_ENTRY as ACL_RECORD, FEATURE_LEVEL as FEATURE_LEVEL_RECORD, TOPIC as TOPIC_RECORD};
use crate::schema::control_types::{KRAFT_VERSION, KRAFT_VOTERS, SNAPSHOT_FOOTER, SNAPSHOT_HEADER};
const KRAFT_VERSION_FEATURE: &str = "kraft.version";
/// The loss entry of an ACL whose host is a CIDR range.
pub const CIDR_HOST_LOSS: &str = "Host (CIDR range)";

/// What to do with every record (the policy, decided by the caller).
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// Indexed by api key: the highest version the target can write, or `None` when the target
    /// cannot hold the record type at all. Api keys past the end are kept as they are.
    pub versions: Vec<Option<i16>>,
    /// `FeatureLevelRecord`: feature name -> (old level -> new level); a new level of 0 drops
    /// the record (level 0 means "not finalized"). Levels not in the map are kept.
    pub features: HashMap<String, HashMap<i16, i16>>,
    /// Drop `KRaftVersion` and `KRaftVoters` control records (a target older than KIP-853).
    pub drop_kraft_control: bool,
    /// Drop the ACLs whose host is a CIDR range (`10.0.0.0/8`: a host holding `/`, which
    /// Kafka's `AclControlManager.validateHostPattern` accepts from 4.4-IV1 on) and report them
    /// lost: an older release compares the host literally, so such an ACL would silently never
    /// match again (a DENY would stop denying).
    pub drop_cidr_acls: bool,
    /// Values that carry no information although they differ from the schema default, per
    /// (record type name, top-level field name): e.g. a `Directories` list of only `MIGRATING`
    /// (zero) uuids, which Kafka's image writer drops without a loss.
    pub semantic_defaults: Vec<(String, String, SemanticDefault)>,
    /// How many sample keys to keep per loss.
    pub samples: usize,
    /// The snapshot's epoch (from its name): every batch must carry it. None: every batch
    /// must carry the first batch's.
    pub epoch: Option<i32>,
    /// Refuse what the caller's tables do not describe instead of keeping it as it is: a
    /// `FeatureLevelRecord` whose feature is not in `features` or whose level (other than 0)
    /// is not in its map, a `KRaftVersion` control record whose level is not in the map of
    /// `kraft.version`, a control record type without a schema. (A metadata record type or
    /// record version the schemas do not know is always refused.)
    pub refuse_unknown: bool,
    /// Per feature, how the caller names the newest level it knows (`4.3-IV0 = 31`), for the
    /// refusal; absent: the highest level of the feature's map.
    pub newest: HashMap<String, String>,
}

/// A rule saying when a non-default value still carries nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SemanticDefault {
    /// An array whose elements are all the zero uuid (or that is empty or null).
    AllZeroUuids,
    /// An empty or null array.
    Empty,
}

/// Something the target could not carry.
#[derive(Debug, Clone, PartialEq)]
pub struct Loss {
    /// Record type (`PartitionRecord`) or control record label (`KRaftVoters`).
    pub record: &'static str,
    /// The field path (`Directories`, `EndPoints[].SecurityProtocol`), or "" when the whole
    /// record was dropped.
    pub field: String,
    pub count: u64,
    pub samples: Vec<String>,
}

/// A finalized feature level the rewrite changed.
#[derive(Debug, Clone, PartialEq)]
pub struct FeatureChange {
    pub name: String,
    pub from: i16,
    pub to: i16,
}

#[derive(Debug, Clone, Default)]
pub struct Report {
    pub batches_in: u64,
    pub batches_out: u64,
    pub records_in: u64,
    pub records_out: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    /// Records written with a new version (spliced or re-encoded).
    pub records_rewritten: u64,
    /// Records dropped without loss (every field at its default).
    pub records_dropped_silently: u64,
    pub losses: Vec<Loss>,
    pub feature_changes: Vec<FeatureChange>,
}

impl Report {
    fn lose(&mut self, record: &'static str, field: &str, sample: impl FnOnce() -> String, max: usize) {
        let i = match self.losses.iter().position(|l| l.record == record && l.field == field) {
            Some(i) => i,
            None => {
                self.losses.push(Loss { record, field: field.to_string(), count: 0, samples: Vec::new() });
                self.losses.len() - 1
            }
        };
        let l = &mut self.losses[i];
        l.count += 1;
        if l.samples.len() < max {
            let s = sample();
            if !s.is_empty() && !l.samples.contains(&s) {
                l.samples.push(s);
            }
        }
    }
}

/// Rewrites the snapshot in `input` into `out` (None: a dry run that only reports). The input
/// must be a whole snapshot; every batch's CRC is checked. Output batches keep the input's
/// boundaries, leader epochs and timestamps; offsets are renumbered from 0 when records are
/// dropped. Errors name the byte position and base offset of the batch at fault.
pub fn rewrite(input: &[u8], plan: &Plan, out: Option<&mut dyn Write>) -> Result<Report> {
    run(&mut SliceBatches { data: input, pos: 0 }, plan, out)
}

/// [`rewrite`] reading the snapshot from a stream, one batch at a time: memory holds one input
/// and one output batch, whatever the snapshot's size.
pub fn rewrite_stream(input: &mut dyn Read, plan: &Plan, out: Option<&mut dyn Write>) -> Result<Report> {
    run(&mut ReadBatches { input, buf: Vec::new(), start: 0, end: 0, eof: false }, plan, out)
}

/// What single records would lose under a plan, one at a time (the rewrite's judgement, without
/// a snapshot around them): for the Spark UDF over record values read anywhere.
pub struct RecordLosses<'p> {
    rw: Rewriter<'p>,
    /// Loss counts before the current record (the report accumulates: splice plans cache
    /// indexes into it, so it is never cleared; a record's losses are the counts that grew).
    before: Vec<u64>,
}

impl<'p> RecordLosses<'p> {
    pub fn new(plan: &'p Plan) -> Self {
        RecordLosses {
            rw: Rewriter::new(plan, true),
            before: Vec::new(),
        }
    }

    fn grown(&mut self) -> Vec<(&'static str, String)> {
        let before = &self.before;
        self.rw.report.losses.iter().enumerate().filter(|(i, l)| l.count > before.get(*i).copied().unwrap_or(0)).map(|(_, l)| (l.record, l.field.clone())).collect()
    }

    fn start(&mut self) {
        self.before.clear();
        self.before.extend(self.rw.report.losses.iter().map(|l| l.count));
        self.rw.arena.clear();
    }

    /// The losses of one metadata record value (frame + body): (record type, field) pairs,
    /// the field "" when the whole record would be dropped; empty when nothing is lost.
    pub fn data(&mut self, value: &[u8]) -> Result<Vec<(&'static str, String)>> {
        self.start();
        self.rw.data(Some(value), 0, 0)?;
        Ok(self.grown())
    }

    /// The losses of one control record (key and value).
    pub fn control(&mut self, key: Option<&[u8]>, value: Option<&[u8]>) -> Result<Vec<(&'static str, String)>> {
        self.start();
        self.rw.control(key, value, 0, 0)?;
        Ok(self.grown())
    }
}
