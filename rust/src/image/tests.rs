use super::fast::{self, decode_partition_change};
use crate::schema::records::PartitionChange;
use super::*;
use crate::schema::{decode_metadata_record, encode_metadata_record, Struct, Value};

const T1: Uuid = [0x11; 16];
const D1: Uuid = [0x33; 16];

fn st(fields: Vec<(&'static str, Value)>) -> Struct {
    Struct { fields, unknown_tags: Vec::new() }
}

fn ints(v: &[i64]) -> Value {
    Value::Array(v.iter().map(|x| Value::Int(*x)).collect())
}

/// Encodes then decodes, as records arrive from a log.
fn rec(api_key: i16, version: i16, fields: Vec<(&'static str, Value)>) -> (i16, i16, Struct) {
    let bytes = encode_metadata_record(api_key, version, &st(fields)).expect("encodable");
    let r = decode_metadata_record(&bytes).expect("decodable");
    (api_key, version, r.data)
}

fn replay_all(img: &mut Image, recs: Vec<(i16, i16, Struct)>) -> Result<(), ReplayError> {
    for (i, (k, v, d)) in recs.into_iter().enumerate() {
        img.replay(k, v, d, Some(i as i64))?;
    }
    Ok(())
}

fn base() -> Vec<(i16, i16, Struct)> {
    vec![
        rec(12, 0, vec![("Name", Value::Str("metadata.version".into())), ("FeatureLevel", Value::Int(17))]),
        rec(0, 3, vec![("BrokerId", Value::Int(1)), ("BrokerEpoch", Value::Int(10)), ("Fenced", Value::Bool(true))]),
        rec(2, 0, vec![("Name", Value::Str("a".into())), ("TopicId", Value::Uuid(T1))]),
        rec(3, 1, vec![("PartitionId", Value::Int(0)), ("TopicId", Value::Uuid(T1)), ("Replicas", ints(&[1, 2])), ("Isr", ints(&[1, 2])), ("Leader", Value::Int(1)), ("LeaderEpoch", Value::Int(0)), ("PartitionEpoch", Value::Int(0))]),
    ]
}

#[test]
fn partition_change_merges_and_bumps_epochs() {
    let mut img = Image::new();
    replay_all(&mut img, base()).unwrap();
    let p = &img.topic("a").unwrap().partitions[&0];
    assert_eq!(p.directories, vec![MIGRATING, MIGRATING]);
    img.replay(5, 0, rec(5, 0, vec![("PartitionId", Value::Int(0)), ("TopicId", Value::Uuid(T1)), ("Isr", ints(&[1]))]).2, Some(4)).unwrap();
    img.replay(5, 0, rec(5, 0, vec![("PartitionId", Value::Int(0)), ("TopicId", Value::Uuid(T1)), ("Leader", Value::Int(2))]).2, Some(5)).unwrap();
    let p = &img.topic("a").unwrap().partitions[&0];
    assert_eq!((p.isr.clone(), p.leader, p.leader_epoch, p.partition_epoch), (vec![1], 2, 1, 2));
    let e = img.replay(5, 0, rec(5, 0, vec![("PartitionId", Value::Int(7)), ("TopicId", Value::Uuid(T1))]).2, Some(6)).unwrap_err();
    assert_eq!(e.to_string(), "offset 6: Unable to find partition EREREREREREREREREREREQ:7");
    assert_eq!(img.records_replayed, 7);
}

#[test]
fn length_mismatch_quotes_the_record_as_python_prints_it() {
    let mut img = Image::new();
    replay_all(&mut img, base()).unwrap();
    let (_, _, d) = rec(5, 2, vec![("PartitionId", Value::Int(0)), ("TopicId", Value::Uuid(T1)), ("Replicas", ints(&[1, 2])), ("Directories", Value::Array(vec![Value::Uuid(D1)]))]);
    let e = img.replay(5, 2, d, None).unwrap_err();
    assert_eq!(
        e.reason,
        "The lengths for replicas and directories do not match: {'PartitionId': 0, 'TopicId': UUID('11111111-1111-1111-1111-111111111111'), \
         'Isr': None, 'Leader': -2, 'Replicas': [1, 2], 'RemovingReplicas': None, 'AddingReplicas': None, 'LeaderRecoveryState': -1, \
         'Directories': [UUID('33333333-3333-3333-3333-333333333333')], 'EligibleLeaderReplicas': None, 'LastKnownElr': None}"
    );
}

#[test]
fn transactions_apply_at_end_and_not_on_abort() {
    let mut img = Image::new();
    replay_all(&mut img, base()).unwrap();
    img.replay(23, 0, Struct::default(), Some(10)).unwrap();
    img.replay(9, 0, rec(9, 0, vec![("TopicId", Value::Uuid(T1))]).2, Some(11)).unwrap();
    assert!(img.topic("a").is_some());
    img.replay(25, 0, Struct::default(), Some(12)).unwrap();
    assert!(img.topic("a").is_some() && img.pending_transaction.is_none());
    let e = img.replay(24, 0, Struct::default(), Some(13)).unwrap_err();
    assert_eq!(e.reason, "EndTransactionRecord without a BeginTransactionRecord");
    let e = img.replay(99, 0, Struct::default(), Some(14)).unwrap_err();
    assert_eq!(e.to_string(), "offset 14: Unknown metadata id 99");
}

fn change_values() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let lists = [None, Some(vec![]), Some(vec![1, 2, 3])];
    for version in 0..=2i16 {
        for l in &lists {
            for leader in [-2i64, -1, 5] {
                for lrs in [-1i64, 0, 1, 7] {
                    let mut f = vec![("PartitionId", Value::Int(3)), ("TopicId", Value::Uuid(T1)), ("Leader", Value::Int(leader)), ("LeaderRecoveryState", Value::Int(lrs))];
                    if let Some(l) = l {
                        f.push(("Isr", ints(l)));
                        f.push(("Replicas", ints(l)));
                        f.push(("AddingReplicas", ints(l)));
                        if version >= 1 {
                            f.push(("Directories", Value::Array(l.iter().map(|_| Value::Uuid(D1)).collect())));
                        }
                        if version >= 2 {
                            f.push(("EligibleLeaderReplicas", ints(l)));
                            f.push(("LastKnownElr", ints(l)));
                        }
                    }
                    out.push(encode_metadata_record(5, version, &st(f)).unwrap());
                }
            }
        }
    }
    out
}

#[test]
fn typed_partition_change_decoder_agrees_with_the_codec() {
    for v in change_values() {
        let fast = decode_partition_change(&v).expect("common shapes are decoded").to_owned_change();
        let generic = PartitionChange::from_struct(&decode_metadata_record(&v).unwrap().data).ok().unwrap();
        assert_eq!(fast, generic);
        // every truncation and a trailing byte fall back to the codec
        for n in 0..v.len() {
            assert!(decode_partition_change(&v[..n]).is_none() || decode_metadata_record(&v[..n]).is_ok());
        }
        let mut longer = v.clone();
        longer.push(0);
        assert!(decode_partition_change(&longer).is_none());
    }
}

#[test]
fn typed_partition_encoder_agrees_with_the_codec() {
    let mut img = Image::new();
    replay_all(&mut img, base()).unwrap();
    img.features.insert(ELR_FEATURE.into(), 1);
    for (lrs, elr, dirs) in [(0, vec![], vec![MIGRATING, MIGRATING]), (1, vec![2], vec![D1, D1]), (-5, vec![1, 2], vec![D1, MIGRATING])] {
        if let Some(p) = img.topics.get_mut(&T1).and_then(|t| t.partitions.get_mut(&0)) {
            p.leader_recovery_state = lrs;
            p.eligible_leader_replicas = elr.clone();
            p.last_known_elr = elr;
            p.directories = dirs;
        }
        for mv in [4, 17, 23, 30] {
            // directories outside MIGRATING are lost at 3.3: nothing to compare there
            let Ok(recs) = img.snapshot_records(Some(mv)) else { continue };
            for r in recs {
                let mut fast = Vec::new();
                r.encode(&mut fast).unwrap();
                let generic = encode_metadata_record(r.api_key(), r.version(), &r.to_struct()).unwrap();
                assert_eq!(fast, generic);
            }
        }
    }
}

#[test]
fn snapshot_losses_at_old_metadata_versions() {
    let mut img = Image::new();
    replay_all(&mut img, base()).unwrap();
    let e = img.snapshot_records(Some(3)).unwrap_err();
    assert_eq!(e.losses, vec!["feature flag(s): metadata.version".to_string()]);
    img.zk_migration_state = 2;
    let e = img.snapshot_records(Some(3)).unwrap_err();
    assert_eq!(e.losses[1], "the ZK Migration state which was PRE_MIGRATION");
}

#[test]
fn typed_partition_decoder_agrees_with_the_codec() {
    let mut n = 0;
    for version in 0..=2i16 {
        for lrs in [0i64, 1, -3] {
            for elr in [None, Some(vec![]), Some(vec![2, 3])] {
                let mut f = vec![("PartitionId", Value::Int(4)), ("TopicId", Value::Uuid(T1)), ("Replicas", ints(&[1, 2])), ("Isr", ints(&[2])), ("RemovingReplicas", ints(&[])), ("AddingReplicas", ints(&[1])), ("Leader", Value::Int(2)), ("LeaderRecoveryState", Value::Int(lrs)), ("LeaderEpoch", Value::Int(7)), ("PartitionEpoch", Value::Int(9))];
                if version >= 1 {
                    f.push(("Directories", Value::Array(vec![Value::Uuid(D1), Value::Uuid(MIGRATING)])));
                }
                if let (2, Some(e)) = (version, &elr) {
                    f.push(("EligibleLeaderReplicas", ints(e)));
                    f.push(("LastKnownElr", ints(e)));
                }
                let v = encode_metadata_record(3, version, &st(f)).unwrap();
                let fast = fast::decode_partition(&v).expect("common shapes are decoded").to_owned_partition();
                let generic = crate::schema::records::NewPartition::from_struct(&decode_metadata_record(&v).unwrap().data).ok().unwrap();
                assert_eq!(fast, generic);
                let mut longer = v.clone();
                longer.push(0);
                assert!(fast::decode_partition(&longer).is_none());
                n += 1;
            }
        }
    }
    assert_eq!(n, 27);
}

/// A log of two-record batches of `base()` plus two changes: offsets 0..6.
fn log_bytes() -> Vec<u8> {
    use crate::builder::{encode_batch, BatchParams, RecordInput};
    let mut recs: Vec<Vec<u8>> = base().into_iter().map(|(k, v, d)| encode_metadata_record(k, v, &d).unwrap()).collect();
    for isr in [&[1i64][..], &[1, 2][..]] {
        recs.push(encode_metadata_record(5, 0, &st(vec![("PartitionId", Value::Int(0)), ("TopicId", Value::Uuid(T1)), ("Isr", ints(isr))])).unwrap());
    }
    let mut out = Vec::new();
    for (i, pair) in recs.chunks(2).enumerate() {
        let inputs: Vec<RecordInput> = pair.iter().map(|v| RecordInput { timestamp: 100 + i as i64, key: None, value: Some(v), headers: Vec::new() }).collect();
        encode_batch(&BatchParams { base_offset: 2 * i as i64, partition_leader_epoch: 1 + i as i32, ..Default::default() }, &inputs, &mut out).unwrap();
    }
    out
}

#[test]
fn segment_replay_stops_at_the_end_offset_and_applies_straddling_batches_record_by_record() {
    let buf = log_bytes();
    let mut img = Image::new();
    let mut end = 0;
    assert!(!img.replay_segment(&buf, None, 0, None, true, &mut end).unwrap());
    assert_eq!((end, img.provenance), (6, Provenance { offset: 5, epoch: 3, timestamp: 102 }));
    assert_eq!(img.topic("a").unwrap().partitions[&0].partition_epoch, 2);
    // at = 5: the last batch straddles the end, its first record only
    let mut img = Image::new();
    let mut end = 0;
    assert!(!img.replay_segment(&buf, None, 0, Some(5), true, &mut end).unwrap());
    assert_eq!((end, img.provenance.offset, img.records_replayed), (5, 4, 5));
    // at = 4: a batch starting at 4 stops the replay
    let mut img = Image::new();
    let mut end = 0;
    assert!(img.replay_segment(&buf, None, 0, Some(4), true, &mut end).unwrap());
    assert_eq!((end, img.records_replayed), (4, 4));
}

#[test]
fn corrupt_batches_name_file_offset_and_position() {
    let mut buf = log_bytes();
    let second = 12 + i32::from_be_bytes(buf[8..12].try_into().unwrap()) as usize;
    buf[second + 70] ^= 0xff;
    let mut img = Image::new();
    let mut end = 0;
    let e = img.replay_segment(&buf, Some("x.log"), 0, None, true, &mut end).unwrap_err();
    let ImageLoadError::Batch { file, error } = &e else { panic!("{e:?}") };
    assert_eq!((file.as_deref(), error.offset, error.position), (Some("x.log"), Some(2), Some(second as u64)));
    assert!(error.reason.contains("CRC mismatch"), "{e}");
    // the first batch was applied before the corrupt one was read
    assert_eq!((end, img.records_replayed), (2, 2));
}

#[test]
fn records_are_counted_by_type_and_a_transactions_when_it_ends() {
    let mut img = Image::new();
    replay_all(&mut img, base()).unwrap();
    assert_eq!((img.replayed_of(&[2]), img.replayed_of(&[3]), img.replayed_of(&[2, 3, 2])), (1, 1, 2));
    assert_eq!(img.replayed_of(&[9]), 0);
    // inside a transaction a record counts when it is applied: at the end, not on an abort
    img.replay(23, 0, Struct::default(), Some(10)).unwrap();
    img.replay(9, 0, rec(9, 0, vec![("TopicId", Value::Uuid(T1))]).2, Some(11)).unwrap();
    assert_eq!(img.replayed_of(&[9]), 0);
    img.replay(25, 0, Struct::default(), Some(12)).unwrap();
    assert_eq!(img.replayed_of(&[9]), 0);
    img.replay(23, 0, Struct::default(), Some(13)).unwrap();
    img.replay(9, 0, rec(9, 0, vec![("TopicId", Value::Uuid(T1))]).2, Some(14)).unwrap();
    img.replay(24, 0, Struct::default(), Some(15)).unwrap();
    assert_eq!((img.replayed_of(&[9]), img.records_replayed), (1, 5));
    // keys no record has count nothing (record 0, RegisterBrokerRecord, is not one of them)
    assert_eq!((img.replayed_of(&[-1, 500]), img.replayed_of(&[0])), (0, 1));
}
