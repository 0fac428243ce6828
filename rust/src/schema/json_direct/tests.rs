//! The direct walk against the tree decoder + [`json`] writer (the oracle): the same text for
//! every record type and version with random values, and the same verdict on damaged bytes.

use super::*;
use crate::schema::{self, codec, CONTROL_RECORDS, METADATA_RECORDS};

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const TEXTS: &[&str] = &["", "a", "metadata.version", "q\"uote", "back\\slash", "new\nline\t\r\u{8}\u{c}", "\u{1}\u{1f}", "é☃ 𝄞", "\u{7f}\u{2028}"];

fn random_value(g: &mut Rng, f: &Field, t: &FieldType, v: i16, nullable: bool, depth: usize) -> Value {
    if nullable && g.below(5) == 0 {
        return Value::Null;
    }
    // the field's default now and then, so tagged fields are sometimes left out
    if g.below(6) == 0 && depth == 0 {
        return codec::default_value(f, v);
    }
    let int = |g: &mut Rng, lo: i64, hi: i64| -> i64 {
        match g.below(4) {
            0 => lo,
            1 => hi,
            2 => 0,
            _ => (lo as i128 + (g.next() as i128).rem_euclid(hi as i128 - lo as i128 + 1)) as i64,
        }
    };
    match t {
        FieldType::Bool => Value::Bool(g.below(2) == 0),
        FieldType::Float64 => Value::Float([0.0, -0.0, 1.0, 1e7, 1.5e-4, f64::NAN, f64::INFINITY, -123.25, f64::from_bits(g.next())][g.below(9) as usize]),
        FieldType::String => Value::Str(TEXTS[g.below(TEXTS.len() as u64) as usize].to_string()),
        FieldType::Bytes | FieldType::Records => Value::Bytes((0..g.below(7)).map(|_| g.next() as u8).collect()),
        FieldType::Uuid => Value::Uuid(if g.below(4) == 0 { [0; 16] } else { std::array::from_fn(|_| g.next() as u8) }),
        FieldType::Array(e) => {
            let n = if depth > 2 { 0 } else { g.below(4) };
            Value::Array((0..n).map(|_| random_value(g, f, e, v, false, depth + 1)).collect())
        }
        FieldType::Struct(s) => Value::Struct(random_struct(g, s, v, false, depth + 1)),
        t => {
            let (lo, hi) = t.int_range().unwrap();
            Value::Int(int(g, lo, hi))
        }
    }
}

fn random_struct(g: &mut Rng, s: &'static StructSchema, v: i16, flexible: bool, depth: usize) -> Struct {
    let mut st = Struct::default();
    for f in s.fields {
        if !f.versions.contains(v) {
            continue;
        }
        let val = random_value(g, f, &f.ty, v, f.nullable_versions.contains(v), depth);
        st.fields.push((f.name, val));
    }
    if flexible && g.below(4) == 0 {
        st.unknown_tags.push((1000 + g.below(5) as u32, (0..g.below(4)).map(|_| g.next() as u8).collect()));
    }
    st
}

fn direct(value: &[u8]) -> Result<String, Refused> {
    let (mut out, mut tmp) = (Vec::new(), Scratch::default());
    metadata_fast(value, &mut out, &mut tmp, record_head)?;
    out.push(b'}');
    Ok(String::from_utf8(out).expect("the direct walk writes UTF-8"))
}

fn oracle(value: &[u8]) -> Option<String> {
    schema::decode_metadata_record(value).ok().map(|r| json::metadata_record_json(r.schema, r.version, &r.data))
}

fn control_direct(t: i16, value: &[u8]) -> Result<String, Refused> {
    let (mut out, mut tmp) = (Vec::new(), Scratch::default());
    control_fast(t, value, &mut out, &mut tmp, |_, _, _| {})?;
    Ok(String::from_utf8(out).unwrap())
}

fn control_oracle(t: i16, value: &[u8]) -> Option<String> {
    schema::decode_control_record(t, value).ok().map(|(c, v, st)| json::message_json(c.schema, v, &st))
}

/// Every prefix and single-byte change of `b`: the direct walk refuses exactly what the decoder
/// refuses, and prints what the decoder's record prints.
/// (the direct walk's text, the oracle's) of some bytes
type Verdicts = (Result<String, Refused>, Option<String>);

fn damaged_agree(b: &[u8], what: &str, check: &dyn Fn(&[u8]) -> Verdicts) {
    let mut cases: Vec<Vec<u8>> = (0..b.len()).map(|cut| b[..cut].to_vec()).collect();
    for i in 0..b.len() {
        for x in [0x00u8, 0x01, 0x7f, 0x80, 0xff, b[i] ^ 0x01] {
            let mut c = b.to_vec();
            c[i] = x;
            cases.push(c);
        }
    }
    let mut longer = b.to_vec();
    longer.push(0);
    cases.push(longer);
    for c in cases {
        let (d, o) = check(&c);
        assert_eq!(d.ok(), o, "{what}: {c:02x?}");
    }
}

#[test]
fn every_metadata_type_and_version_prints_as_the_tree() {
    let mut g = Rng(0x2545f4914f6cdd1d);
    let (mut tried, mut checked) = (0, 0);
    for m in METADATA_RECORDS {
        for v in m.valid_versions.min..=m.valid_versions.max {
            for i in 0..40 {
                let st = random_struct(&mut g, m.body, v, m.flexible_versions.contains(v), 0);
                tried += 1;
                let Ok(b) = schema::encode_metadata_record(m.api_key, v, &st) else { continue };
                checked += 1;
                let want = oracle(&b).unwrap_or_else(|| panic!("{} v{v}: the encoding does not decode", m.name));
                assert_eq!(direct(&b).as_deref(), Ok(want.as_str()), "{} v{v} #{i}: {b:02x?}", m.name);
                let (mut out, mut tmp) = (Vec::new(), Scratch::default());
                metadata_record_json(&b, &mut out, &mut tmp).unwrap();
                assert_eq!(String::from_utf8(out).unwrap(), want);
                if i < 3 {
                    damaged_agree(&b, m.name, &|c| (direct(c), oracle(c)));
                }
            }
        }
    }
    // (values the encoder refuses, e.g. a null where the version has no null, are redrawn by the next round)
    assert!(checked * 2 > tried, "only {checked} of {tried} random records could be encoded");
}

#[test]
fn every_control_type_and_version_prints_as_the_tree() {
    let mut g = Rng(0x9e3779b97f4a7c15);
    for c in CONTROL_RECORDS {
        for v in c.schema.valid_versions.min..=c.schema.valid_versions.max {
            for i in 0..40 {
                let mut st = random_struct(&mut g, c.schema.body, v, c.schema.flexible_versions.contains(v), 0);
                for (n, val) in st.fields.iter_mut() {
                    if *n == "Version" {
                        *val = Value::Int(v as i64);
                    }
                }
                let Ok(b) = schema::encode_control_record(c.control_type, &st) else { continue };
                let want = control_oracle(c.control_type, &b).unwrap();
                assert_eq!(control_direct(c.control_type, &b).as_deref(), Ok(want.as_str()), "{} v{v}", c.schema.name);
                if i < 3 {
                    let t = c.control_type;
                    damaged_agree(&b, c.schema.name, &|x| (control_direct(t, x), control_oracle(t, x)));
                }
            }
        }
    }
}

#[test]
fn a_tag_given_twice_counts_once_the_last_time() {
    let m = schema::metadata_schema_by_name("PartitionChangeRecord").unwrap();
    let leader = m.body.fields.iter().find(|f| f.name == "Leader").unwrap();
    let tag = leader.tag.unwrap() as u8;
    let DefaultValue::Int(dflt) = leader.default else { panic!("Leader has an int default") };
    let mut b = vec![1u8, m.api_key as u8, 0];
    b.extend_from_slice(&7i32.to_be_bytes()); // PartitionId
    b.extend_from_slice(&[9u8; 16]); // TopicId
    for (first, second) in [(7i32, dflt as i32), (dflt as i32, 7), (3, 4)] {
        let mut c = b.clone();
        c.push(2);
        for x in [first, second] {
            c.extend_from_slice(&[tag, 4]);
            c.extend_from_slice(&x.to_be_bytes());
        }
        let want = oracle(&c).unwrap();
        assert_eq!(direct(&c).as_deref(), Ok(want.as_str()), "{first} then {second}");
    }
    // two tags in descending order: printed in schema order all the same
    let isr = m.body.fields.iter().find(|f| f.name == "Isr").unwrap().tag.unwrap() as u8;
    let mut c = b.clone();
    c.extend_from_slice(&[2, tag, 4]);
    c.extend_from_slice(&5i32.to_be_bytes());
    c.extend_from_slice(&[isr, 5, 2]);
    c.extend_from_slice(&3i32.to_be_bytes());
    let want = oracle(&c).unwrap();
    assert!(want.find("\"isr\"").unwrap() < want.find("\"leader\"").unwrap(), "{want}");
    assert_eq!(direct(&c).as_deref(), Ok(want.as_str()));
}

/// Every field name of the tables prints without escapes (the writer's fast way for keys).
#[test]
fn field_names_are_plain() {
    fn walk(s: &StructSchema) {
        for f in s.fields {
            assert!(plain(f.json_name), "{}", f.json_name);
            let mut t = &f.ty;
            while let FieldType::Array(e) = t {
                t = e;
            }
            if let FieldType::Struct(sub) = t {
                walk(sub);
            }
        }
    }
    METADATA_RECORDS.iter().for_each(|m| walk(m.body));
    CONTROL_RECORDS.iter().for_each(|c| walk(c.schema.body));
}

#[test]
fn errors_are_the_decoders() {
    let m = schema::metadata_schema_by_name("PartitionRecord").unwrap();
    let b = schema::encode_metadata_record(m.api_key, 1, &Struct::default()).unwrap();
    for cut in 0..b.len() {
        let (mut out, mut tmp) = (b"x".to_vec(), Scratch::default());
        let e = metadata_record_json(&b[..cut], &mut out, &mut tmp).unwrap_err();
        assert_eq!(Some(e), schema::decode_metadata_record(&b[..cut]).err());
        assert_eq!(out, b"x", "nothing is left in the output");
    }
}

/// A record claiming a huge array is refused at its length, before any output for it.
#[test]
fn a_huge_array_count_is_refused() {
    let m = schema::metadata_schema_by_name("PartitionRecord").unwrap();
    let mut b = vec![1u8, m.api_key as u8, 0];
    b.extend_from_slice(&0i32.to_be_bytes());
    b.extend_from_slice(&[1u8; 16]);
    b.extend_from_slice(&i32::MAX.to_be_bytes()); // Replicas: 2^31-1 elements claimed
    b.extend_from_slice(&[0u8; 64]);
    assert_eq!(direct(&b), Err(Refused));
    let (mut out, mut tmp) = (Vec::new(), Scratch::default());
    let e = metadata_record_json(&b, &mut out, &mut tmp).unwrap_err();
    assert!(e.reason.contains("cannot fit"), "{e}");
    assert!(out.is_empty());
}
