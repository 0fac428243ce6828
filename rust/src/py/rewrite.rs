//! Snapshot rewriting from Python: the plan is compiled once from plain data (`RewritePlan`),
//! the report goes out as a dict. The rewrite runs with the GIL released; the output is written atomically.

use super::errors::{io_err, to_pyerr};
use crate::fsutil;
use crate::rewrite::{self, Plan, SemanticDefault};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use std::collections::HashMap;
use std::io::{BufWriter, Write};
use std::path::PathBuf;

/// A rewrite plan, compiled once from plain data and used by `rewrite_snapshot` and
/// `record_losses` (see `kraftkit.features.rewrite` for the policy that makes it).
///
/// `versions`: api key -> highest version to write, or None when the target cannot hold the
/// record type; api keys absent from the dict are kept as they are. `features`: feature name ->
/// {old level: new level} (0 drops the FeatureLevelRecord). `drop_kraft_control`: drop the
/// KRaftVersion and KRaftVoters control records. `semantic_defaults`: (record type, field, rule)
/// triples naming values that carry nothing although not the schema default (rules:
/// "all-zero-uuids", "empty"). `refuse_unknown`: refuse (UnsupportedFormatError, nothing
/// written) a FeatureLevelRecord whose feature or level `features` does not map (level 0
/// aside), a KRaftVersion control record whose level `features["kraft.version"]` does not map,
/// and a control record type without a schema, instead of keeping them; `newest`: feature name
/// -> how the refusal names the newest level known (`4.3-IV0 = 31`). `drop_cidr_acls`: drop
/// (and report lost) the ACLs whose host is a CIDR range, for a target below 4.4-IV1. A
/// metadata record type or version the schemas do not know is always refused.
#[pyclass(module = "kraftkit._core", frozen)]
pub struct RewritePlan {
    pub plan: Plan,
}

#[pymethods]
impl RewritePlan {
    #[new]
    #[pyo3(signature = (versions, features, *, drop_kraft_control = false, semantic_defaults = Vec::new(), refuse_unknown = false, newest = HashMap::new(), drop_cidr_acls = false))]
    fn new(
        versions: HashMap<i16, Option<i16>>,
        features: HashMap<String, HashMap<i16, i16>>,
        drop_kraft_control: bool,
        semantic_defaults: Vec<(String, String, String)>,
        refuse_unknown: bool,
        newest: HashMap<String, String>,
        drop_cidr_acls: bool,
    ) -> PyResult<Self> {
        let mut rules = Vec::with_capacity(semantic_defaults.len());
        for (record, field, rule) in semantic_defaults {
            let rule = match rule.as_str() {
                "all-zero-uuids" => SemanticDefault::AllZeroUuids,
                "empty" => SemanticDefault::Empty,
                other => return Err(PyValueError::new_err(format!("unknown semantic default rule {other:?} (all-zero-uuids, empty)"))),
            };
            rules.push((record, field, rule));
        }
        if versions.keys().any(|k| *k < 0) {
            return Err(PyValueError::new_err("api keys are non-negative"));
        }
        let top = versions.keys().copied().max().unwrap_or(-1);
        let versions = (0..=top).map(|k| versions.get(&k).copied().unwrap_or(Some(i16::MAX))).collect();
        Ok(RewritePlan { plan: Plan { versions, features, drop_kraft_control, drop_cidr_acls, semantic_defaults: rules, samples: 0, epoch: None, refuse_unknown, newest } })
    }

    fn __repr__(&self) -> String {
        let p = &self.plan;
        format!(
            "RewritePlan({} record types, {} features, drop_kraft_control={}, {} semantic defaults, refuse_unknown={})",
            p.versions.len(),
            p.features.len(),
            if p.drop_kraft_control { "True" } else { "False" },
            p.semantic_defaults.len(),
            if p.refuse_unknown { "True" } else { "False" }
        )
    }
}

/// Rewrites the snapshot `src` per `plan` and writes it to `dst` (None: a dry run).
///
/// `samples`: how many sample keys to keep per loss. `epoch`: the epoch in the snapshot's name,
/// which every batch must carry (None: the first batch's). The output goes to `<dst>.part`,
/// is fsynced, then renamed over `dst`; on error nothing is left behind and `dst` is untouched.
/// Returns the report: batch/record/byte counts, `losses` (record, field, count, samples),
/// `feature_changes` (name, from, to) and `records_dropped_silently`.
#[pyfunction]
#[pyo3(signature = (src, dst, plan, *, samples = 5, epoch = None))]
fn rewrite_snapshot<'py>(py: Python<'py>, src: PathBuf, dst: Option<PathBuf>, plan: &RewritePlan, samples: usize, epoch: Option<i32>) -> PyResult<Bound<'py, PyDict>> {
    let plan = Plan { samples, epoch, ..plan.plan.clone() };
    let name = src.to_string_lossy().into_owned();
    // a regular file only, never blocking on a FIFO (see fsutil)
    let (f, _) = fsutil::open_input(&src).map_err(|e| io_err(&name, e))?;
    // streamed, one batch at a time (read in chunks straight into one buffer): memory does
    // not grow with the snapshot
    let mut input = f;
    let mut go = |out: Option<&mut dyn Write>| rewrite::rewrite_stream(&mut input, &plan, out);
    let result = py.allow_threads(|| -> Result<rewrite::Report, Result<crate::error::Error, (PathBuf, std::io::Error)>> {
        match &dst {
            None => go(None).map_err(Ok),
            Some(dst) => {
                let part = part_path(dst);
                let out = fsutil::create_output(&part).map_err(|e| Err((part.clone(), e)))?;
                let mut w = BufWriter::with_capacity(1 << 20, out);
                match go(Some(&mut w)) {
                    // fsync, rename over dst, fsync of the directory; an error names dst (or the directory)
                    Ok(rep) => match w.into_inner().map_err(|e| e.into_error()) {
                        Ok(f) => fsutil::commit_part(f, &part, dst, None)
                            .map(|()| rep)
                            .map_err(|e| Err((if e.path == part { dst.clone() } else { e.path }, e.error))),
                        Err(e) => {
                            let _ = std::fs::remove_file(&part);
                            Err(Err((dst.clone(), e)))
                        }
                    },
                    Err(e) => {
                        drop(w);
                        let _ = std::fs::remove_file(&part);
                        Err(Ok(e))
                    }
                }
            }
        }
    });
    let rep = match result {
        Ok(r) => r,
        Err(Ok(e)) => return Err(to_pyerr(py, &e, Some(&name))),
        Err(Err((path, e))) => return Err(io_err(&path.to_string_lossy(), e)),
    };
    let d = PyDict::new(py);
    d.set_item("file", &name)?;
    for (k, v) in [
        ("batches_in", rep.batches_in),
        ("batches_out", rep.batches_out),
        ("records_in", rep.records_in),
        ("records_out", rep.records_out),
        ("bytes_in", rep.bytes_in),
        ("bytes_out", rep.bytes_out),
        ("records_rewritten", rep.records_rewritten),
        ("records_dropped_silently", rep.records_dropped_silently),
    ] {
        d.set_item(k, v)?;
    }
    let losses = PyList::empty(py);
    for l in &rep.losses {
        let x = PyDict::new(py);
        x.set_item("record", l.record)?;
        x.set_item("field", &l.field)?;
        x.set_item("count", l.count)?;
        x.set_item("samples", &l.samples)?;
        losses.append(x)?;
    }
    d.set_item("losses", losses)?;
    let changes = PyList::empty(py);
    for c in &rep.feature_changes {
        let x = PyDict::new(py);
        x.set_item("name", &c.name)?;
        x.set_item("from", c.from)?;
        x.set_item("to", c.to)?;
        changes.append(x)?;
    }
    d.set_item("feature_changes", changes)?;
    Ok(d)
}

fn part_path(dst: &std::path::Path) -> PathBuf {
    let mut s = dst.as_os_str().to_owned();
    s.push(".part");
    PathBuf::from(s)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<RewritePlan>()?;
    m.add_function(wrap_pyfunction!(rewrite_snapshot, m)?)?;
    Ok(())
}
