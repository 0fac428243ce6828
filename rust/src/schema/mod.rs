//! Schema-driven codec for KRaft metadata records and control records.
//!
//! * `generated` -- static tables made by `scripts/gen_schemas.py` from Kafka's JSON schemas
//!   (never edited by hand; CI re-runs the script with `--check`);
//! * `codec` -- one generic decoder/encoder for Kafka's message encoding, driven by the tables;
//! * `json` -- JSON as Kafka's generated JsonConverters print it (what `kafka-dump-log
//!   --cluster-metadata-decoder` shows);
//! * `getters` -- typed reads of a decoded record's fields by name, with the Python image's
//!   wording for a missing or mistyped field; `records` -- the typed `PartitionRecord` and
//!   `PartitionChangeRecord` read through them;
//! * this module -- the `ApiMessageAndVersion` frame of metadata records and control-record
//!   values, with Kafka's error messages.

pub mod codec;
#[rustfmt::skip]
pub mod generated;
pub mod getters;
pub mod json;
pub mod json_direct;
pub mod metadata_versions;
pub mod records;
pub mod types;

pub use codec::{CodecError, CodecErrorKind};
pub use generated::{api_keys, control_types, rpc_api_keys, CONTROL_RECORDS, METADATA_RECORDS, RPC_MESSAGES};
pub use types::*;

use codec::{CResult, Reader};

/// The only frame version Kafka writes and reads (`DEFAULT_FRAME_VERSION`).
pub const FRAME_VERSION: u32 = 1;

/// The metadata record type with this apiKey.
pub fn metadata_schema(api_key: i16) -> Option<&'static MessageSchema> {
    METADATA_RECORDS.iter().copied().find(|m| m.api_key == api_key)
}

/// The metadata record type with this schema name (`FeatureLevelRecord`) or dump-log type name
/// (`FEATURE_LEVEL_RECORD`).
pub fn metadata_schema_by_name(name: &str) -> Option<&'static MessageSchema> {
    METADATA_RECORDS.iter().copied().find(|m| m.name == name || m.type_name == name)
}

/// The control record schema for a control type id (2..=6), None for transaction markers and
/// unknown types.
pub fn control_schema(control_type: i16) -> Option<&'static ControlSchema> {
    CONTROL_RECORDS.iter().find(|c| c.control_type == control_type)
}

/// A decoded metadata record: its type, version and body.
#[derive(Clone, Debug)]
pub struct MetadataRecord {
    pub schema: &'static MessageSchema,
    pub version: i16,
    pub data: Struct,
}

fn frame_varint(r: &mut Reader, what: &str) -> CResult<i16> {
    let start = r.pos;
    let v = r.uvarint(what).map_err(|mut e| {
        e.reason = format!("Could not read {what}: {}", e.reason);
        e
    })?;
    if v > i16::MAX as u32 {
        return Err(CodecError::new(CodecErrorKind::Corrupt, Some(start), format!("Value for {what} was too large.")));
    }
    Ok(v as i16)
}

/// Decodes the value of a KRaft data record: the `ApiMessageAndVersion` frame (unsigned varints
/// frame version 1, apiKey, version) and the record body. Errors carry Kafka's messages.
pub fn decode_metadata_record(value: &[u8]) -> CResult<MetadataRecord> {
    let mut r = Reader::new(value);
    let frame = frame_varint(&mut r, "frame version")?;
    if frame == 0 {
        return Err(CodecError::new(
            CodecErrorKind::Unsupported,
            Some(0),
            "Could not deserialize metadata record with frame version 0. Note that upgrades from the preview release of KRaft in 2.8 to newer versions are not supported.",
        ));
    }
    if frame as u32 != FRAME_VERSION {
        return Err(CodecError::new(
            CodecErrorKind::Unsupported,
            Some(0),
            format!("Could not deserialize metadata record due to unknown frame version {frame}(only frame version 1 is supported)"),
        ));
    }
    let key_pos = r.pos;
    let api_key = frame_varint(&mut r, "type")?;
    let version = frame_varint(&mut r, "version")?;
    let schema = metadata_schema(api_key)
        .ok_or_else(|| CodecError::new(CodecErrorKind::Unsupported, Some(key_pos), format!("Unknown metadata id {api_key}")))?;
    let data = codec::read_body(&mut r, schema, version)?;
    if r.remaining() > 0 {
        return Err(CodecError::new(CodecErrorKind::Corrupt, Some(r.pos), format!("Found {} byte(s) of garbage after {api_key}", r.remaining())));
    }
    Ok(MetadataRecord { schema, version, data })
}

/// Encodes a metadata record (frame + body) as a KRaft data record value.
pub fn encode_metadata_record(api_key: i16, version: i16, data: &Struct) -> CResult<Vec<u8>> {
    let schema = metadata_schema(api_key)
        .ok_or_else(|| CodecError::new(CodecErrorKind::Unsupported, None, format!("Unknown metadata id {api_key}")))?;
    if version < 0 {
        return Err(CodecError::new(CodecErrorKind::Invalid, None, format!("negative version {version}")));
    }
    let mut out = Vec::with_capacity(64);
    crate::varint::write_uvarint(&mut out, FRAME_VERSION);
    crate::varint::write_uvarint(&mut out, api_key as u32);
    crate::varint::write_uvarint(&mut out, version as u32);
    codec::encode_message(schema, version, data, &mut out)?;
    Ok(out)
}

/// Decodes a control record value (LeaderChange, SnapshotHeader, SnapshotFooter, KRaftVersion,
/// KRaftVoters). The schema version is the value's leading int16 `Version` field, which every
/// control schema starts with; it must be one of the schema's valid versions.
pub fn decode_control_record(control_type: i16, value: &[u8]) -> CResult<(&'static ControlSchema, i16, Struct)> {
    let c = control_schema(control_type).ok_or_else(|| {
        CodecError::new(CodecErrorKind::Unsupported, None, format!("control type {control_type} has no schema (known: 2..=6; 0/1 are transaction markers)"))
    })?;
    if value.len() < 2 {
        return Err(CodecError::new(CodecErrorKind::Truncated, Some(0), format!("{} value needs at least 2 bytes, got {}", c.schema.name, value.len())));
    }
    let version = i16::from_be_bytes([value[0], value[1]]);
    let data = codec::decode_message(c.schema, version, value)?;
    Ok((c, version, data))
}

/// Encodes a control record value; the version is `data`'s `Version` field (0 when absent).
pub fn encode_control_record(control_type: i16, data: &Struct) -> CResult<Vec<u8>> {
    let c = control_schema(control_type)
        .ok_or_else(|| CodecError::new(CodecErrorKind::Unsupported, None, format!("control type {control_type} has no schema")))?;
    let version = match data.get("Version") {
        Some(Value::Int(v)) if *v >= 0 && *v <= i16::MAX as i64 => *v as i16,
        Some(other) => return Err(CodecError::new(CodecErrorKind::Invalid, None, format!("{}.Version must be a version number, got {other:?}", c.schema.name))),
        None => 0,
    };
    let mut out = Vec::with_capacity(32);
    codec::encode_message(c.schema, version, data, &mut out)?;
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// RPC messages: request and response framing (without the 4-byte size prefix)

/// An RPC message schema by name (`VoteRequest`, `RequestHeader`, ...).
pub fn rpc_schema(name: &str) -> Option<&'static MessageSchema> {
    RPC_MESSAGES.iter().copied().find(|m| m.name == name)
}

/// The request (`response` false) or response schema of an apiKey.
pub fn rpc_message(api_key: i16, response: bool) -> Option<&'static MessageSchema> {
    let kind = if response { "response" } else { "request" };
    RPC_MESSAGES.iter().copied().find(|m| m.api_key == api_key && m.kind == kind)
}

fn rpc_or_err(api_key: i16, response: bool) -> CResult<&'static MessageSchema> {
    rpc_message(api_key, response).ok_or_else(|| {
        CodecError::new(CodecErrorKind::Unsupported, Some(0), format!("apiKey {api_key} is not an RPC kraftkit speaks"))
    })
}

/// The request header version for a request: 2 when the request version is flexible, else 1.
pub fn request_header_version(api_key: i16, version: i16) -> CResult<i16> {
    Ok(if rpc_or_err(api_key, false)?.flexible_versions.contains(version) { 2 } else { 1 })
}

/// The response header version: 1 when the response version is flexible, else 0; always 0
/// for ApiVersions (a client must read it before knowing what the broker supports).
pub fn response_header_version(api_key: i16, version: i16) -> CResult<i16> {
    if api_key == rpc_api_keys::API_VERSIONS {
        return Ok(0);
    }
    Ok(if rpc_or_err(api_key, true)?.flexible_versions.contains(version) { 1 } else { 0 })
}

fn header_schema(response: bool) -> &'static MessageSchema {
    rpc_schema(if response { "ResponseHeader" } else { "RequestHeader" }).expect("generated headers")
}

/// Encodes a request: header (apiKey, version, correlation id, client id) then body.
pub fn encode_request(api_key: i16, version: i16, correlation_id: i32, client_id: Option<&str>, body: &Struct) -> CResult<Vec<u8>> {
    let m = rpc_or_err(api_key, false)?;
    let hv = request_header_version(api_key, version)?;
    let header = Struct {
        fields: vec![
            ("RequestApiKey", Value::Int(api_key as i64)),
            ("RequestApiVersion", Value::Int(version as i64)),
            ("CorrelationId", Value::Int(correlation_id as i64)),
            ("ClientId", client_id.map_or(Value::Null, |c| Value::Str(c.to_string()))),
        ],
        unknown_tags: Vec::new(),
    };
    let mut out = Vec::with_capacity(64);
    codec::encode_message(header_schema(false), hv, &header, &mut out)?;
    codec::encode_message(m, version, body, &mut out)?;
    Ok(out)
}

/// A decoded request: apiKey, version, the header and the body.
pub struct Request {
    pub api_key: i16,
    pub version: i16,
    pub correlation_id: i32,
    pub header: Struct,
    pub body: Struct,
}

/// Decodes a request (apiKey and version first, then the header version they imply, then
/// the body; trailing bytes are an error).
pub fn decode_request(b: &[u8]) -> CResult<Request> {
    if b.len() < 8 {
        return Err(CodecError::new(CodecErrorKind::Truncated, Some(0), format!("a request header needs at least 8 bytes, got {}", b.len())));
    }
    let api_key = i16::from_be_bytes([b[0], b[1]]);
    let version = i16::from_be_bytes([b[2], b[3]]);
    let correlation_id = i32::from_be_bytes([b[4], b[5], b[6], b[7]]);
    let m = rpc_or_err(api_key, false)?;
    let hv = request_header_version(api_key, version)?;
    let mut r = Reader::new(b);
    let header = codec::read_body(&mut r, header_schema(false), hv)?;
    let body = codec::read_body(&mut r, m, version)?;
    if r.remaining() > 0 {
        return Err(CodecError::new(CodecErrorKind::Corrupt, Some(r.pos), format!("{} byte(s) of garbage after {} v{version}", r.remaining(), m.name)));
    }
    Ok(Request { api_key, version, correlation_id, header, body })
}

/// Encodes a response to a request of `api_key` at `version`.
pub fn encode_response(api_key: i16, version: i16, correlation_id: i32, body: &Struct) -> CResult<Vec<u8>> {
    let m = rpc_or_err(api_key, true)?;
    let hv = response_header_version(api_key, version)?;
    let header = Struct { fields: vec![("CorrelationId", Value::Int(correlation_id as i64))], unknown_tags: Vec::new() };
    let mut out = Vec::with_capacity(64);
    codec::encode_message(header_schema(true), hv, &header, &mut out)?;
    codec::encode_message(m, version, body, &mut out)?;
    Ok(out)
}

/// Decodes a response to a request of `api_key` at `version`: (correlation id, body).
pub fn decode_response(api_key: i16, version: i16, b: &[u8]) -> CResult<(i32, Struct)> {
    let m = rpc_or_err(api_key, true)?;
    let hv = response_header_version(api_key, version)?;
    let mut r = Reader::new(b);
    let header = codec::read_body(&mut r, header_schema(true), hv)?;
    let correlation_id = match header.get("CorrelationId") {
        Some(Value::Int(c)) => *c as i32,
        _ => 0,
    };
    let body = codec::read_body(&mut r, m, version)?;
    if r.remaining() > 0 {
        return Err(CodecError::new(CodecErrorKind::Corrupt, Some(r.pos), format!("{} byte(s) of garbage after {} v{version}", r.remaining(), m.name)));
    }
    Ok((correlation_id, body))
}

#[cfg(test)]
mod tests;

/// Kafka's `KafkaRaftClient.MAX_BATCH_SIZE_BYTES`: the largest batch a KRaft leader writes (8 MiB),
/// and the most a client batch appended to the metadata log may inflate to.
pub const MAX_METADATA_BATCH_BYTES: usize = 8 * 1024 * 1024;

/// Checks that `buf` holds only data batches of metadata records, as a KRaft leader accepts
/// appends: whole v2 batches with valid CRCs, not control, not transactional, records with
/// consecutive offset deltas and a value that decodes as a metadata record (frame version,
/// apiKey, a version the schema knows, every field). Returns the number of records, or the
/// reason (naming the batch and record) of the first problem. A compressed batch is read as it
/// inflates, a record at a time, up to `MAX_METADATA_BATCH_BYTES`: a KRaft leader never writes a
/// larger batch, and a client's decompression bomb stops there having held one chunk.
pub fn check_metadata_batches(buf: &[u8]) -> std::result::Result<usize, String> {
    use crate::batch::{self, NextBatch, RECORD_BATCH_OVERHEAD};
    use crate::compression::Codec;
    let mut pos = 0usize;
    let mut count = 0usize;
    loop {
        let (h, range) = match batch::next_batch(buf, pos, 0) {
            Ok(NextBatch::Batch(h, r)) => (h, r),
            Ok(NextBatch::End) => return Ok(count),
            Err(e) => return Err(e.to_string()),
        };
        let bytes = &buf[range.clone()];
        let fpos = range.start as u64;
        batch::validate(&h, bytes, fpos).map_err(|e| e.to_string())?;
        if h.is_control() {
            return Err(format!("batch at byte {fpos} is a control batch: only the raft leader writes control records"));
        }
        if h.attributes & batch::ATTR_TRANSACTIONAL != 0 {
            return Err(format!("batch at byte {fpos} is transactional; the metadata log takes plain batches"));
        }
        if h.records_count as i64 != h.last_offset_delta as i64 + 1 {
            return Err(format!("batch at byte {fpos} holds {} records but a lastOffsetDelta of {}: the metadata log has no gaps",
                               h.records_count, h.last_offset_delta));
        }
        let n = h.records_count as usize;
        let area = &bytes[RECORD_BATCH_OVERHEAD..];
        let check = |i: usize, record: &[u8]| -> std::result::Result<(), String> {
            let at = |e: String| format!("batch at byte {fpos}: record {i}: {e}");
            if i >= n {
                return Err(at(format!("more records than the {n} the batch declares")));
            }
            let mut p = 0;
            let v = batch::read_record(record, &mut p, record.len()).map_err(at)?;
            if v.offset_delta as usize != i {
                return Err(format!("batch at byte {fpos}: record {i} has offset delta {}", v.offset_delta));
            }
            let value = match &v.value {
                Some(r) => &record[r.start as usize..r.end as usize],
                None => return Err(format!("batch at byte {fpos}: record {i} has a null value")),
            };
            decode_metadata_record(value).map(|_| ()).map_err(|e| at(e.to_string()))
        };
        let mut seen = 0usize;
        match h.codec() {
            Some(Codec::None) => {
                let mut p = 0;
                while p < area.len() {
                    let start = p;
                    let mut q = p;
                    batch::read_record(area, &mut q, area.len()).map_err(|e| format!("batch at byte {fpos}: record {seen}: {e}"))?;
                    check(seen, &area[start..q])?;
                    p = q;
                    seen += 1;
                }
            }
            Some(c) => {
                let mut stream = crate::stream::RecordStream::new(c, area, MAX_METADATA_BATCH_BYTES).map_err(|e| format!("batch at byte {fpos}: {e}"))?;
                while let Some(record) = stream.next_record().map_err(|e| format!("batch at byte {fpos}: record {seen}: {e}"))? {
                    check(seen, record)?;
                    seen += 1;
                }
            }
            None => unreachable!("validate() refused unknown codecs"),
        }
        if seen != n {
            return Err(format!("batch at byte {fpos} declares {n} records but holds {seen}"));
        }
        count += n;
        pos = range.end;
    }
}
