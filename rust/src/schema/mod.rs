//! Schema-driven codec for KRaft metadata records and control records.
//!
//! * `generated` -- static tables made by `scripts/gen_schemas.py` from Kafka's JSON schemas
//!   (never edited by hand; CI re-runs the script with `--check`);
//! * `codec` -- one generic decoder/encoder for Kafka's message encoding, driven by the tables;
//! * `json` -- JSON as Kafka's generated JsonConverters print it (what `kafka-dump-log
//!   --cluster-metadata-decoder` shows);
//! * this module -- the `ApiMessageAndVersion` frame of metadata records and control-record
//!   values, with Kafka's error messages.

pub mod codec;
#[rustfmt::skip]
pub mod generated;
pub mod json;
pub mod types;

pub use codec::{CodecError, CodecErrorKind};
pub use generated::{CONTROL_RECORDS, METADATA_RECORDS};
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

#[cfg(test)]
mod tests;
