use super::*;

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

/// Worked out by hand from Kafka's schema: the record value of FeatureLevelRecord v0
/// {Name="metadata.version", FeatureLevel=22} in its ApiMessageAndVersion frame.
const FEATURE_LEVEL: &str = "01 0c 00 11 6d657461646174612e76657273696f6e 0016 00";

#[test]
fn feature_level_worked_example() {
    let b = hex(FEATURE_LEVEL);
    assert_eq!(b.len(), 23);
    let r = decode_metadata_record(&b).unwrap();
    assert_eq!(r.schema.name, "FeatureLevelRecord");
    assert_eq!(r.version, 0);
    assert_eq!(r.data.get("Name"), Some(&Value::Str("metadata.version".into())));
    assert_eq!(r.data.get("FeatureLevel"), Some(&Value::Int(22)));
    assert_eq!(
        json::metadata_record_json(r.schema, r.version, &r.data),
        r#"{"type":"FEATURE_LEVEL_RECORD","version":0,"data":{"name":"metadata.version","featureLevel":22}}"#
    );
    let data = Struct { fields: vec![("Name", Value::Str("metadata.version".into())), ("FeatureLevel", Value::Int(22))], unknown_tags: vec![] };
    assert_eq!(encode_metadata_record(12, 0, &data).unwrap(), b);
    // Missing fields take their defaults.
    let empty = encode_metadata_record(12, 0, &Struct::default()).unwrap();
    assert_eq!(empty, hex("01 0c 00 01 0000 00"));
}

#[test]
fn control_worked_examples() {
    // A SnapshotHeader value and a LeaderChange v0 value, laid out by hand.
    let (c, v, st) = decode_control_record(3, &hex("0000 0000018bcfe56800 00")).unwrap();
    assert_eq!((c.label, v), ("SnapshotHeader", 0));
    assert_eq!(json::message_json(c.schema, v, &st), r#"{"version":0,"lastContainedLogTimestamp":1700000000000}"#);
    let lc = hex("0000 00000001 04 00000001 00 00000002 00 00000003 00 03 00000001 00 00000002 00 00");
    let (c, v, st) = decode_control_record(2, &lc).unwrap();
    assert_eq!(
        json::message_json(c.schema, v, &st),
        r#"{"version":0,"leaderId":1,"voters":[{"voterId":1},{"voterId":2},{"voterId":3}],"grantingVoters":[{"voterId":1},{"voterId":2}]}"#
    );
    assert_eq!(encode_control_record(2, &st).unwrap(), lc);
    let e = decode_control_record(2, &lc[..lc.len() - 2]).unwrap_err();
    assert_eq!(e.kind, CodecErrorKind::Truncated);
}

#[test]
fn frame_errors() {
    let e = decode_metadata_record(&hex("00 0c 00")).unwrap_err();
    assert!(e.reason.starts_with("Could not deserialize metadata record with frame version 0."), "{e}");
    let e = decode_metadata_record(&hex("02 0c 00")).unwrap_err();
    assert_eq!(e.reason, "Could not deserialize metadata record due to unknown frame version 2(only frame version 1 is supported)");
    let e = decode_metadata_record(&hex("01 80 80 02 00")).unwrap_err();
    assert_eq!(e.reason, "Value for type was too large.");
    assert_eq!(e.position, Some(1));
    let e = decode_metadata_record(&hex("01 0c 80 80 02")).unwrap_err();
    assert_eq!(e.reason, "Value for version was too large.");
    let e = decode_metadata_record(&hex("01 0d 00")).unwrap_err();
    assert_eq!(e.reason, "Unknown metadata id 13");
    let mut b = hex(FEATURE_LEVEL);
    b.extend_from_slice(&[1, 2, 3]);
    let e = decode_metadata_record(&b).unwrap_err();
    assert_eq!(e.reason, "Found 3 byte(s) of garbage after 12");
    assert_eq!(e.position, Some(23));
    let e = decode_metadata_record(&hex("01 0c 01 00")).unwrap_err();
    assert_eq!(e.kind, CodecErrorKind::Unsupported);
    assert_eq!(e.reason, "Can't read version 1 of FeatureLevelRecord");
    let e = decode_metadata_record(&hex("01 0c")).unwrap_err();
    assert_eq!(e.kind, CodecErrorKind::Truncated);
    let e = decode_metadata_record(&hex("01 0c 00 11 6d65")).unwrap_err();
    assert_eq!(e.kind, CodecErrorKind::Truncated);
    assert_eq!(e.path, "FeatureLevelRecord.Name");
    assert_eq!(e.position, Some(4));
    let e = decode_metadata_record(&hex("01 0c 00 ff ff ff ff ff")).unwrap_err();
    assert_eq!(e.kind, CodecErrorKind::Corrupt);
    assert_eq!(e.path, "FeatureLevelRecord.Name");
}

#[test]
fn unknown_tags_survive() {
    // FeatureLevelRecord with two unknown tagged fields (5 and 9).
    let b = hex("01 0c 00 02 61 0003 02 05 02 abcd 09 00");
    let r = decode_metadata_record(&b).unwrap();
    assert_eq!(r.data.unknown_tags, vec![(5, vec![0xab, 0xcd]), (9, vec![])]);
    assert_eq!(encode_metadata_record(12, 0, &r.data).unwrap(), b);
}

#[test]
fn tagged_fields_known() {
    // PartitionChangeRecord v0: PartitionId 1, zero TopicId, Leader (tag 1) = 3, Isr (tag 0) = [3].
    let b = hex("01 05 00 00000001 00000000000000000000000000000000 02 00 05 02 00000003 01 04 00000003");
    let r = decode_metadata_record(&b).unwrap();
    assert_eq!(r.data.get("Leader"), Some(&Value::Int(3)));
    assert_eq!(r.data.get("Isr"), Some(&Value::Array(vec![Value::Int(3)])));
    assert_eq!(r.data.get("Replicas"), Some(&Value::Null));
    assert_eq!(encode_metadata_record(5, 0, &r.data).unwrap(), b);
    assert_eq!(
        json::metadata_record_json(r.schema, r.version, &r.data),
        r#"{"type":"PARTITION_CHANGE_RECORD","version":0,"data":{"partitionId":1,"topicId":"AAAAAAAAAAAAAAAAAAAAAA","isr":[3],"leader":3}}"#
    );
    // A tagged field whose declared size disagrees with its value.
    let bad = hex("01 05 00 00000001 00000000000000000000000000000000 01 01 05 00000003 00");
    let e = decode_metadata_record(&bad).unwrap_err();
    assert_eq!(e.path, "PartitionChangeRecord.Leader");
    assert_eq!(e.reason, "tagged field 1 declares 5 bytes but its value took 4");
    let bad = hex("01 05 00 00000001 00000000000000000000000000000000 01 01 03 000000");
    let e = decode_metadata_record(&bad).unwrap_err();
    assert_eq!((e.kind, e.path.as_str()), (CodecErrorKind::Truncated, "PartitionChangeRecord.Leader"));
    let bad = hex("01 05 00 00000001 00000000000000000000000000000000 01 01 05 00000003");
    let e = decode_metadata_record(&bad).unwrap_err();
    assert_eq!((e.kind, e.path.as_str()), (CodecErrorKind::Truncated, "PartitionChangeRecord"));
}

#[test]
fn encode_rules() {
    // Non-default field absent from the version.
    let st = Struct { fields: vec![("Directories", Value::Array(vec![Value::Uuid([1; 16])]))], unknown_tags: vec![] };
    let e = encode_metadata_record(3, 0, &st).unwrap_err();
    assert_eq!(e.reason, "Attempted to write a non-default Directories at version 0");
    let st = Struct { fields: vec![("Nope", Value::Int(1))], unknown_tags: vec![] };
    assert!(encode_metadata_record(12, 0, &st).unwrap_err().reason.contains("no field \"Nope\""));
    let st = Struct { fields: vec![("FeatureLevel", Value::Int(40000))], unknown_tags: vec![] };
    let e = encode_metadata_record(12, 0, &st).unwrap_err();
    assert_eq!(e.path, "FeatureLevelRecord.FeatureLevel");
    let st = Struct { fields: vec![("Name", Value::Null)], unknown_tags: vec![] };
    assert!(encode_metadata_record(12, 0, &st).is_err());
    // An unknown tag that collides with a known one.
    let st = Struct { fields: vec![], unknown_tags: vec![(1, vec![0, 0, 0, 1])] };
    assert!(encode_metadata_record(5, 0, &st).unwrap_err().reason.contains("collides"));
}

#[test]
fn every_type_defaults_roundtrip() {
    for m in METADATA_RECORDS {
        for v in m.valid_versions.min..=m.valid_versions.max {
            let b = encode_metadata_record(m.api_key, v, &Struct::default()).unwrap();
            let r = decode_metadata_record(&b).unwrap();
            assert_eq!(r.data, codec::default_struct(m.body, v), "{} v{v}", m.name);
            assert_eq!(encode_metadata_record(m.api_key, v, &r.data).unwrap(), b);
        }
    }
    for c in CONTROL_RECORDS {
        for v in c.schema.valid_versions.min..=c.schema.valid_versions.max {
            let st = Struct { fields: vec![("Version", Value::Int(v as i64))], unknown_tags: vec![] };
            let b = encode_control_record(c.control_type, &st).unwrap();
            let (_, dv, d) = decode_control_record(c.control_type, &b).unwrap();
            assert_eq!(dv, v);
            assert_eq!(encode_control_record(c.control_type, &d).unwrap(), b);
        }
    }
}

#[test]
fn tables_are_sane() {
    let mut keys: Vec<i16> = METADATA_RECORDS.iter().map(|m| m.api_key).collect();
    let n = keys.len();
    keys.dedup();
    assert_eq!(keys.len(), n);
    assert!(keys.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(metadata_schema(12).unwrap().name, "FeatureLevelRecord");
    assert_eq!(metadata_schema_by_name("REGISTER_BROKER_RECORD").unwrap().api_key, 0);
    assert!(metadata_schema(6).is_none());
    assert_eq!(CONTROL_RECORDS.iter().map(|c| c.control_type).collect::<Vec<_>>(), vec![2, 3, 4, 5, 6]);
}

#[test]
fn java_double_format() {
    assert_eq!(json::java_double(1.0), "1.0");
    assert_eq!(json::java_double(1024.5), "1024.5");
    assert_eq!(json::java_double(1e7), "1.0E7");
    assert_eq!(json::java_double(1.5e-4), "1.5E-4");
    assert_eq!(json::java_double(0.001), "0.001");
    assert_eq!(json::java_double(-0.0), "-0.0");
    assert_eq!(json::java_double(123456789.0), "1.23456789E8");
}

#[test]
fn json_string_escapes() {
    let mut s = String::new();
    json::push_string(&mut s, "a\"b\\c\n\u{1}é");
    assert_eq!(s, "\"a\\\"b\\\\c\\n\\u0001é\"");
}

/// Random bytes, and every prefix and single-byte mutation of valid records, never panic.
#[test]
fn fuzz_no_panic() {
    let mut seed: u64 = 0x9e3779b97f4a7c15;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for _ in 0..200_000 {
        let len = (next() % 48) as usize;
        let mut b: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        if len >= 3 && next() % 2 == 0 {
            b[0] = 1;
            b[1] = (next() % 30) as u8;
            b[2] = (next() % 5) as u8;
        }
        if let Ok(r) = decode_metadata_record(&b) {
            let _ = json::metadata_record_json(r.schema, r.version, &r.data);
            let _ = encode_metadata_record(r.schema.api_key, r.version, &r.data);
        }
        let _ = decode_control_record((next() % 8) as i16, &b);
    }
    for m in METADATA_RECORDS {
        for v in m.valid_versions.min..=m.valid_versions.max {
            let b = encode_metadata_record(m.api_key, v, &Struct::default()).unwrap();
            for cut in 0..b.len() {
                assert!(decode_metadata_record(&b[..cut]).is_err(), "{} v{v} cut {cut}", m.name);
            }
            for i in 0..b.len() {
                for x in [0x00u8, 0x7f, 0x80, 0xff] {
                    let mut c = b.clone();
                    c[i] = x;
                    let _ = decode_metadata_record(&c);
                }
            }
        }
    }
}
