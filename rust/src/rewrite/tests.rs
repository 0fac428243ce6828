//! The rewrite's unit tests: snapshots built here, rewritten, and read back.

use super::driver::{Batches, ReadBatches, READ_CHUNK};
use super::splice::{frame, quick_carries_nothing, reencode, semantic_default, splice_struct, struct_spliceable, Change, SplicePlan};
use super::*;
use crate::batch::{self, NextBatch};
use crate::builder::{self, BatchParams, RecordInput};
use crate::error::ErrorKind;
use crate::schema::codec::{self, is_default};
use crate::schema::types::*;
use crate::schema::{self, encode_metadata_record, metadata_schema_by_name};
use std::io::Read;

fn rec(name: &str, v: i16, fields: Vec<(&'static str, Value)>) -> Vec<u8> {
    let m = metadata_schema_by_name(name).unwrap();
    let mut st = codec::default_struct(m.body, v);
    for (n, val) in fields {
        let slot = st.fields.iter_mut().find(|(k, _)| *k == n).unwrap();
        slot.1 = val;
    }
    encode_metadata_record(m.api_key, v, &st).unwrap()
}

/// A snapshot: a SnapshotHeader batch, one data batch per group, a SnapshotFooter batch.
fn snapshot_of(groups: &[&[Vec<u8>]]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut offset = 0i64;
    let control = |out: &mut Vec<u8>, offset: i64, t: i16, value: Vec<u8>| {
        let key = crate::snapshot::control_key(t);
        let r = RecordInput { timestamp: 5, key: Some(&key), value: Some(&value), headers: vec![] };
        builder::encode_batch(&BatchParams { base_offset: offset, partition_leader_epoch: 3, control: true, ..Default::default() }, &[r], out).unwrap();
    };
    control(&mut out, offset, SNAPSHOT_HEADER, crate::snapshot::header_value(5));
    offset += 1;
    for g in groups {
        let inputs: Vec<RecordInput> = g.iter().map(|r| RecordInput { timestamp: 5, key: None, value: Some(r), headers: vec![] }).collect();
        builder::encode_batch(&BatchParams { base_offset: offset, partition_leader_epoch: 3, ..Default::default() }, &inputs, &mut out).unwrap();
        offset += g.len() as i64;
    }
    control(&mut out, offset, SNAPSHOT_FOOTER, crate::snapshot::footer_value());
    out
}

fn snapshot(records: &[Vec<u8>]) -> Vec<u8> {
    snapshot_of(&[records])
}

fn decode_all(buf: &[u8]) -> Vec<(i16, i16, Struct)> {
    let mut pos = 0;
    let mut out = vec![];
    let mut views = vec![];
    while let NextBatch::Batch(h, r) = batch::next_batch(buf, pos, 0).unwrap() {
        let b = &buf[r.clone()];
        batch::validate(&h, b, 0).unwrap();
        let d = batch::records_data(&h, b, 0).unwrap();
        views.clear();
        batch::parse_records(&h, d.bytes(), 0, &mut views).unwrap();
        for v in views.iter().filter(|_| !h.is_control()) {
            let val = &d.bytes()[v.value.clone().unwrap().start as usize..v.value.clone().unwrap().end as usize];
            let m = schema::decode_metadata_record(val).unwrap();
            out.push((m.schema.api_key, m.version, m.data));
        }
        pos = r.end;
    }
    out
}

fn plan_to(versions: &[(i16, Option<i16>)]) -> Plan {
    let mut p = Plan { versions: vec![Some(i16::MAX); 64], samples: 3, ..Default::default() };
    p.semantic_defaults.push(("PartitionRecord".into(), "Directories".into(), SemanticDefault::AllZeroUuids));
    for (k, v) in versions {
        p.versions[*k as usize] = *v;
    }
    p
}

#[test]
fn partition_record_v2_to_v0_splices_and_counts_losses() {
    let topic = rec("TopicRecord", 0, vec![("Name", Value::Str("orders".into())), ("TopicId", Value::Uuid([7; 16]))]);
    let zero_dirs = rec("PartitionRecord", 2, vec![
        ("PartitionId", Value::Int(0)), ("TopicId", Value::Uuid([7; 16])),
        ("Replicas", Value::Array(vec![Value::Int(1), Value::Int(2)])),
        ("Directories", Value::Array(vec![Value::Uuid([0; 16]), Value::Uuid([0; 16])])),
    ]);
    let real_dirs = rec("PartitionRecord", 2, vec![
        ("PartitionId", Value::Int(1)), ("TopicId", Value::Uuid([7; 16])),
        ("Replicas", Value::Array(vec![Value::Int(1)])),
        ("Directories", Value::Array(vec![Value::Uuid([9; 16])])),
        ("EligibleLeaderReplicas", Value::Array(vec![Value::Int(2)])),
    ]);
    let input = snapshot(&[topic.clone(), zero_dirs, real_dirs]);
    let rep = rewrite(&input, &plan_to(&[(3, Some(0))]), None).unwrap();
    assert_eq!(rep.records_rewritten, 2);
    let fields: Vec<(&str, u64, Vec<String>)> = rep.losses.iter().map(|l| (l.field.as_str(), l.count, l.samples.clone())).collect();
    assert_eq!(fields, vec![("Directories", 1, vec!["orders-1".to_string()]), ("EligibleLeaderReplicas", 1, vec!["orders-1".to_string()])]);

    let mut out = Vec::new();
    rewrite(&input, &plan_to(&[(3, Some(0))]), Some(&mut out)).unwrap();
    let recs = decode_all(&out);
    assert_eq!(recs.len(), 3);
    assert_eq!((recs[1].0, recs[1].1), (3, 0));
    // the spliced bytes equal what the encoder writes at v0 for the same surviving fields
    let mut expect = recs[2].2.clone();
    expect.fields.retain(|(n, _)| metadata_schema_by_name("PartitionRecord").unwrap().body.fields.iter().any(|f| f.name == *n && f.versions.contains(0)));
    assert_eq!(recs[2].2, expect);
    assert_eq!(recs[2].2.get("Replicas"), Some(&Value::Array(vec![Value::Int(1)])));
}

#[test]
fn quick_default_check_agrees_with_decoding() {
    let m = metadata_schema_by_name("PartitionRecord").unwrap();
    let dirs = m.body.fields.iter().find(|f| f.name == "Directories").unwrap();
    let elr = m.body.fields.iter().find(|f| f.name == "EligibleLeaderReplicas").unwrap();
    let with_rule = plan_to(&[]);
    let mut no_rule = plan_to(&[]);
    no_rule.semantic_defaults.clear();
    let uuids = |us: &[[u8; 16]]| Value::Array(us.iter().map(|u| Value::Uuid(*u)).collect());
    let cases = [
        (dirs, uuids(&[])), (dirs, uuids(&[[0; 16]])), (dirs, uuids(&[[0; 16], [0; 16]])),
        (dirs, uuids(&[[0; 16], [3; 16]])), (dirs, uuids(&[[5; 16]])),
        (elr, Value::Null), (elr, Value::Array(vec![])), (elr, Value::Array(vec![Value::Int(1)])),
    ];
    for plan in [&with_rule, &no_rule] {
        for (f, val) in &cases {
            let mut raw = Vec::new();
            codec::write_value_for_test(&mut raw, f, 2, val).unwrap();
            let rule = plan.semantic_defaults.iter().find(|(r, n, _)| r == "PartitionRecord" && n == f.name).map(|x| x.2);
            let quick = quick_carries_nothing(f, &raw, true, rule);
            let slow = is_default(f, val, 2) || semantic_default("PartitionRecord", f, val, plan);
            assert_eq!(quick, Some(slow), "{} = {val:?}", f.name);
        }
    }
}

#[test]
fn splice_equals_generic_reencode() {
    let r = rec("RegisterBrokerRecord", 4, vec![
        ("BrokerId", Value::Int(3)), ("Rack", Value::Str("r1".into())),
        ("LogDirs", Value::Array(vec![Value::Uuid([1; 16])])),
    ]);
    let m = metadata_schema_by_name("RegisterBrokerRecord").unwrap();
    let (_, v, at) = frame(&r).unwrap();
    for to in 0..v {
        let plan = plan_to(&[]);
        let (mut a, mut b) = (Vec::new(), Vec::new());
        let (mut la, mut lb) = (Vec::new(), Vec::new());
        if struct_spliceable(m.body, v, to, true) {
            let sp = SplicePlan::new(m.body, v, to, m.name, &plan);
            let mut steps = Vec::new();
            if splice_struct(&sp, &r[at..], &mut a, &mut steps).unwrap() {
                assert!(a.is_empty());
                a.extend_from_slice(&r[at..]); // unchanged: the same body
            }
            la.extend(steps.iter().map(|&i| sp.lost_field(i).name.to_string()));
            reencode(&mut Change { record: m.name, from: v, to, plan: &plan, lost: &mut lb }, m, &r[at..], &mut b).unwrap();
            assert_eq!(a, b, "version {v} -> {to}");
            assert_eq!(la, lb);
        }
    }
}

#[test]
fn dropped_types_features_and_untouched_batches() {
    let mv = rec("FeatureLevelRecord", 0, vec![("Name", Value::Str("metadata.version".into())), ("FeatureLevel", Value::Int(30))]);
    let gv = rec("FeatureLevelRecord", 0, vec![("Name", Value::Str("group.version".into())), ("FeatureLevel", Value::Int(1))]);
    let zk_none = rec("ZkMigrationStateRecord", 0, vec![]);
    let scram = rec("UserScramCredentialRecord", 0, vec![("Name", Value::Str("alice".into())), ("Mechanism", Value::Int(1))]);
    let cfg = rec("ConfigRecord", 0, vec![("ResourceType", Value::Int(2)), ("ResourceName", Value::Str("t".into())), ("Name", Value::Str("k".into())), ("Value", Value::Str("v".into()))]);
    let input = snapshot_of(&[&[mv, gv, zk_none, scram], std::slice::from_ref(&cfg)]);
    let untouched = {
        // the config batch as it sits in the input (the third batch)
        let mut pos = 0;
        let mut found = Vec::new();
        for i in 0..3 {
            if let NextBatch::Batch(_, r) = batch::next_batch(&input, pos, 0).unwrap() {
                if i == 2 {
                    found = input[r.clone()].to_vec();
                }
                pos = r.end;
            }
        }
        found
    };
    let mut plan = plan_to(&[(21, None), (11, None)]);
    plan.features.insert("metadata.version".into(), HashMap::from([(30, 7)]));
    plan.features.insert("group.version".into(), HashMap::from([(1, 0)]));
    let mut out = Vec::new();
    let rep = rewrite(&input, &plan, Some(&mut out)).unwrap();
    assert_eq!(rep.feature_changes, vec![
        FeatureChange { name: "metadata.version".into(), from: 30, to: 7 },
        FeatureChange { name: "group.version".into(), from: 1, to: 0 },
    ]);
    assert_eq!(rep.records_dropped_silently, 1);
    assert_eq!(rep.losses.len(), 1);
    assert_eq!((rep.losses[0].record, rep.losses[0].samples[0].as_str()), ("UserScramCredentialRecord", "alice"));
    let recs = decode_all(&out);
    assert_eq!(recs.len(), 2);
    assert_eq!(recs[0].2.get("FeatureLevel"), Some(&Value::Int(7)));
    // the config batch was copied verbatim, moved from offset 5 to offset 2: only the
    // header and the metadata.version record come before it now
    let at = out.windows(untouched.len() - 8).position(|w| w == &untouched[8..]).expect("config batch copied verbatim") - 8;
    assert_eq!(i64::from_be_bytes(out[at..at + 8].try_into().unwrap()), 2);
}

#[test]
fn corrupt_input_is_an_error_with_position() {
    let cfg = rec("ConfigRecord", 0, vec![("Name", Value::Str("k".into()))]);
    let mut input = snapshot(&[cfg]);
    let n = input.len();
    input[n - 3] ^= 0xff;
    let e = rewrite(&input, &plan_to(&[]), None).unwrap_err();
    assert!(e.reason.contains("CRC"), "{e:?}");
    assert!(e.position.is_some());
    let e = rewrite(&input[..n - 5], &plan_to(&[]), None).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Truncated);
    // whole batches, but no footer: incomplete
    let good = snapshot(&[rec("ConfigRecord", 0, vec![("Name", Value::Str("k".into()))])]);
    let mut pos = 0;
    for _ in 0..2 {
        if let NextBatch::Batch(_, r) = batch::next_batch(&good, pos, 0).unwrap() {
            pos = r.end;
        }
    }
    let e = rewrite(&good[..pos], &plan_to(&[]), None).unwrap_err();
    assert!(e.reason.contains("SnapshotFooter"), "{e:?}");
    assert_eq!(e.kind, ErrorKind::Truncated);
}

/// A reader handing out at most a few bytes per call.
struct Trickle<'a>(&'a [u8], usize);

impl Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.1 = self.1 % 7 + 1;
        let n = self.1.min(buf.len()).min(self.0.len());
        buf[..n].copy_from_slice(&self.0[..n]);
        self.0 = &self.0[n..];
        Ok(n)
    }
}

#[test]
fn streamed_input_matches_in_memory_input_across_read_boundaries() {
    // ~1 MB: batches straddle the reader's chunks; some batches change size, some only
    // their version, some nothing
    let mut groups: Vec<Vec<Vec<u8>>> = Vec::new();
    for t in 0..400u32 {
        let tid = Value::Uuid([(t % 251) as u8 + 1; 16]);
        let mut g = vec![rec("TopicRecord", 0, vec![("Name", Value::Str(format!("t{t}"))), ("TopicId", tid.clone())])];
        for p in 0..20 {
            let dirs = if t % 3 == 0 { vec![Value::Uuid([0; 16]); 3] } else { vec![Value::Uuid([9; 16]); 3] };
            g.push(rec("PartitionRecord", 2, vec![("PartitionId", Value::Int(p)), ("TopicId", tid.clone()),
                ("Replicas", Value::Array(vec![Value::Int(1), Value::Int(2), Value::Int(3)])), ("Directories", Value::Array(dirs))]));
        }
        groups.push(g);
    }
    let refs: Vec<&[Vec<u8>]> = groups.iter().map(|g| &g[..]).collect();
    let input = snapshot_of(&refs);
    assert!(input.len() > 3 * READ_CHUNK);
    for plan in [plan_to(&[]), plan_to(&[(3, Some(1))]), plan_to(&[(3, Some(0))])] {
        let mut a = Vec::new();
        let ra = rewrite(&input, &plan, Some(&mut a)).unwrap();
        for chunked in [true, false] {
            let mut b = Vec::new();
            let rb = if chunked {
                rewrite_stream(&mut &input[..], &plan, Some(&mut b)).unwrap()
            } else {
                rewrite_stream(&mut Trickle(&input, 0), &plan, Some(&mut b)).unwrap()
            };
            assert_eq!(a, b);
            assert_eq!(ra.losses, rb.losses);
            assert_eq!((ra.bytes_out, ra.records_out), (rb.bytes_out, rb.records_out));
        }
        // the dry run counts the bytes it would write
        let dry = rewrite(&input, &plan, None).unwrap();
        assert_eq!(dry.bytes_out as usize, a.len());
        assert_eq!(dry.losses, ra.losses);
    }
    // cut anywhere: the same error either way
    for cut in [5usize, 16, 17, 100, READ_CHUNK - 3, READ_CHUNK + 61, input.len() - 1] {
        let e1 = rewrite(&input[..cut], &plan_to(&[]), None).unwrap_err();
        let e2 = rewrite_stream(&mut Trickle(&input[..cut], 0), &plan_to(&[]), None).unwrap_err();
        assert_eq!((e1.kind, e1.position, &e1.reason), (e2.kind, e2.position, &e2.reason), "cut at {cut}");
    }
}

#[test]
fn a_huge_declared_batch_length_allocates_only_what_the_stream_holds() {
    let mut input = snapshot(&[rec("ConfigRecord", 0, vec![("Name", Value::Str("k".into()))])]);
    input[8..12].copy_from_slice(&i32::MAX.to_be_bytes());
    let mut src = ReadBatches { input: &mut &input[..], buf: Vec::new(), start: 0, end: 0, eof: false };
    let e = src.next_batch(0).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Truncated, "{e:?}");
    assert!(src.buf.len() <= 2 * READ_CHUNK, "buffer grew to {}", src.buf.len());
}

#[test]
fn record_headers_survive_a_rebuilt_batch() {
    let pr = rec("PartitionRecord", 2, vec![("PartitionId", Value::Int(1)), ("Directories", Value::Array(vec![Value::Uuid([9; 16])]))]);
    let mut input = snapshot_of(&[]);
    // between the header and the footer, a data batch whose record has a header
    let NextBatch::Batch(_, first) = batch::next_batch(&input, 0, 0).unwrap() else { panic!() };
    let footer = input[first.end..].to_vec();
    input.truncate(first.end);
    let r = RecordInput { timestamp: 5, key: None, value: Some(&pr), headers: vec![(&b"h"[..], Some(&b"v"[..]))] };
    builder::encode_batch(&BatchParams { base_offset: 1, partition_leader_epoch: 3, ..Default::default() }, &[r], &mut input).unwrap();
    let mut footer = footer;
    builder::set_base_offset(&mut footer, 2);
    input.extend_from_slice(&footer);
    let mut out = Vec::new();
    let rep = rewrite(&input, &plan_to(&[(3, Some(0))]), Some(&mut out)).unwrap();
    assert_eq!(rep.records_rewritten, 1);
    let NextBatch::Batch(_, r0) = batch::next_batch(&out, 0, 0).unwrap() else { panic!() };
    let NextBatch::Batch(h, r1) = batch::next_batch(&out, r0.end, 0).unwrap() else { panic!() };
    let b = &out[r1];
    let data = batch::records_data(&h, b, 0).unwrap();
    let mut views = Vec::new();
    batch::parse_records(&h, data.bytes(), 0, &mut views).unwrap();
    let hv = batch::read_headers(data.bytes(), &views[0]);
    assert_eq!(hv.len(), 1);
    assert_eq!(&data.bytes()[hv[0].key.start as usize..hv[0].key.end as usize], b"h");
}

#[test]
fn dry_run_sizes_rebuilt_batches_exactly() {
    // the first record dropped (the base timestamp moves), timestamps far apart, a header
    let topic = rec("TopicRecord", 0, vec![("Name", Value::Str("t".into())), ("TopicId", Value::Uuid([4; 16]))]);
    let pr = rec("PartitionRecord", 2, vec![("PartitionId", Value::Int(1)), ("Directories", Value::Array(vec![Value::Uuid([9; 16])]))]);
    let mut input = snapshot_of(&[]);
    let NextBatch::Batch(_, first) = batch::next_batch(&input, 0, 0).unwrap() else { panic!() };
    let mut footer = input[first.end..].to_vec();
    input.truncate(first.end);
    let recs = [
        RecordInput { timestamp: 100, key: None, value: Some(&topic), headers: vec![] },
        RecordInput { timestamp: 5, key: Some(&b"k"[..]), value: Some(&pr), headers: vec![(&b"h"[..], None)] },
        RecordInput { timestamp: 1_000_000_000_000, key: None, value: Some(&pr), headers: vec![] },
    ];
    builder::encode_batch(&BatchParams { base_offset: 1, partition_leader_epoch: 3, ..Default::default() }, &recs, &mut input).unwrap();
    builder::set_base_offset(&mut footer, 4);
    input.extend_from_slice(&footer);
    for (plan, pr_version) in [(plan_to(&[(2, None), (3, Some(0))]), 0), (plan_to(&[(2, None)]), 2), (plan_to(&[(3, Some(1))]), 1), (plan_to(&[(2, None), (3, Some(1))]), 1)] {
        let mut out = Vec::new();
        let written = rewrite(&input, &plan, Some(&mut out)).unwrap();
        let dry = rewrite(&input, &plan, None).unwrap();
        assert_eq!(dry.bytes_out as usize, out.len());
        assert_eq!(written.bytes_out as usize, out.len());
        assert_eq!((dry.records_out, dry.losses.len()), (written.records_out, written.losses.len()));
        let versions: Vec<(i16, i16)> = decode_all(&out).into_iter().map(|(k, v, _)| (k, v)).collect();
        assert!(versions.iter().all(|&(k, v)| k != 3 || v == pr_version), "{versions:?}");
        assert_eq!(versions.iter().filter(|(k, _)| *k == 3).count(), 2);
    }
}

#[test]
fn a_record_version_above_the_schema_is_refused_never_spliced() {
    // PartitionRecord at the version above the newest its schema knows, body of the newest
    let m = metadata_schema_by_name("PartitionRecord").unwrap();
    let top = m.valid_versions.max;
    let mut newer = rec("PartitionRecord", top, vec![("PartitionId", Value::Int(1))]);
    assert_eq!(&newer[..3], &[1, m.api_key as u8, top as u8]);
    newer[2] = (top + 1) as u8;
    let input = snapshot(&[newer.clone()]);
    for plan in [plan_to(&[(m.api_key, Some(0))]), plan_to(&[])] {
        let e = rewrite(&input, &plan, None).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Unsupported);
        assert!(e.reason.contains(&format!("PartitionRecord version {} is newer than kraftkit knows (newest: {top}); refusing to rewrite", top + 1)), "{}", e.reason);
        assert_eq!(e.offset, Some(1));
    }
    // the Spark judgement of single records refuses it the same way
    let plan = plan_to(&[(m.api_key, Some(0))]);
    assert!(RecordLosses::new(&plan).data(&newer).is_err());
}

#[test]
fn unknown_feature_levels_are_refused_when_asked_kept_otherwise() {
    let lvl = |name: &str, l: i64| rec("FeatureLevelRecord", 0, vec![("Name", Value::Str(name.into())), ("FeatureLevel", Value::Int(l))]);
    let mut plan = plan_to(&[]);
    plan.features.insert("metadata.version".into(), HashMap::from([(30, 7), (31, 7)]));
    plan.newest.insert("metadata.version".into(), "4.4-IV0 = 31".into());
    plan.features.insert("group.version".into(), HashMap::from([(1, 1)]));
    for (input, want) in [
        (snapshot(&[lvl("metadata.version", 32)]), "metadata.version level 32 is newer than kraftkit knows (newest: 4.4-IV0 = 31); refusing to rewrite"),
        (snapshot(&[lvl("metadata.version", 31), lvl("group.version", 2)]), "group.version level 2 is newer than kraftkit knows (newest: 1); refusing to rewrite"),
        (snapshot(&[lvl("metadata.version", 31), lvl("nova.version", 1)]), "feature nova.version (level 1) is unknown to kraftkit; refusing to rewrite"),
    ] {
        plan.refuse_unknown = false;
        rewrite(&input, &plan, None).unwrap();
        plan.refuse_unknown = true;
        let e = rewrite(&input, &plan, None).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Unsupported);
        assert!(e.reason.contains(want), "{}", e.reason);
    }
    // level 0 (not finalized) is not a level to know
    let rep = rewrite(&snapshot(&[lvl("metadata.version", 31), lvl("group.version", 0)]), &plan, None).unwrap();
    assert_eq!(rep.feature_changes, vec![FeatureChange { name: "metadata.version".into(), from: 31, to: 7 }]);
}

#[test]
fn unknown_control_records_are_refused_when_asked() {
    let mut plan = plan_to(&[]);
    plan.refuse_unknown = true;
    plan.features.insert(KRAFT_VERSION_FEATURE.into(), HashMap::from([(1, 1)]));
    let with_control = |t: i16, value: Vec<u8>| {
        let mut input = snapshot_of(&[]);
        let NextBatch::Batch(_, first) = batch::next_batch(&input, 0, 0).unwrap() else { panic!() };
        let mut footer = input[first.end..].to_vec();
        input.truncate(first.end);
        let key = crate::snapshot::control_key(t);
        let r = RecordInput { timestamp: 5, key: Some(&key), value: Some(&value), headers: vec![] };
        builder::encode_batch(&BatchParams { base_offset: 1, partition_leader_epoch: 3, control: true, ..Default::default() }, &[r], &mut input).unwrap();
        builder::set_base_offset(&mut footer, 2);
        input.extend_from_slice(&footer);
        input
    };
    let kv = |level: i64| {
        let st = Struct { fields: vec![("Version", Value::Int(0)), ("KRaftVersion", Value::Int(level))], unknown_tags: vec![] };
        schema::encode_control_record(KRAFT_VERSION, &st).unwrap()
    };
    rewrite(&with_control(KRAFT_VERSION, kv(1)), &plan, None).unwrap();
    let e = rewrite(&with_control(KRAFT_VERSION, kv(2)), &plan, None).unwrap_err();
    assert!(e.reason.contains("kraft.version level 2 is newer than kraftkit knows (newest: 1)"), "{}", e.reason);
    let top = schema::control_schema(KRAFT_VERSION).unwrap().schema.valid_versions.max;
    let mut newer = kv(1);
    newer[..2].copy_from_slice(&(top + 1).to_be_bytes());
    let e = rewrite(&with_control(KRAFT_VERSION, newer), &plan, None).unwrap_err();
    assert!(e.reason.contains(&format!("version {} is newer than kraftkit knows (newest: {top})", top + 1)), "{}", e.reason);
    let unknown_type = schema::CONTROL_RECORDS.iter().map(|c| c.control_type).max().unwrap() + 1;
    let e = rewrite(&with_control(unknown_type, vec![0, 0]), &plan, None).unwrap_err();
    assert!(e.reason.contains(&format!("control record type {unknown_type} is unknown to kraftkit")), "{}", e.reason);
    plan.refuse_unknown = false;
    rewrite(&with_control(unknown_type, vec![0, 0]), &plan, None).unwrap();
}

#[test]
fn cidr_acls_are_dropped_and_reported_below_their_metadata_version() {
    let acl = |id: u8, host: &str| rec("AccessControlEntryRecord", 0, vec![
        ("Id", Value::Uuid([id; 16])), ("ResourceType", Value::Int(2)), ("ResourceName", Value::Str("orders".into())),
        ("PatternType", Value::Int(3)), ("Principal", Value::Str("User:eve".into())), ("Host", Value::Str(host.into())),
        ("Operation", Value::Int(3)), ("PermissionType", Value::Int(2)),
    ]);
    let input = snapshot(&[acl(1, "*"), acl(2, "10.0.0.0/8"), acl(3, "192.168.1.7"), acl(4, "fd00::/8")]);
    // a target that holds CIDR hosts keeps everything
    let keep = rewrite(&input, &plan_to(&[]), None).unwrap();
    assert!(keep.losses.is_empty() && keep.records_out == keep.records_in);
    let mut plan = plan_to(&[]);
    plan.drop_cidr_acls = true;
    let mut out = Vec::new();
    let rep = rewrite(&input, &plan, Some(&mut out)).unwrap();
    assert_eq!(rep.losses.len(), 1);
    let l = &rep.losses[0];
    assert_eq!((l.record, l.field.as_str(), l.count), ("AccessControlEntryRecord", CIDR_HOST_LOSS, 2));
    assert_eq!(l.samples, vec!["User:eve from 10.0.0.0/8 on orders".to_string(), "User:eve from fd00::/8 on orders".to_string()]);
    let hosts: Vec<Value> = decode_all(&out).into_iter().map(|(_, _, st)| st.get("Host").cloned().unwrap()).collect();
    assert_eq!(hosts, vec![Value::Str("*".into()), Value::Str("192.168.1.7".into())]);
}
