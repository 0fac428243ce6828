//! The shapes of the generated schema tables (`generated.rs`) and the decoded value tree.

/// An inclusive range of versions; `NONE` is empty. `N+` is stored as `N..=32767`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Versions {
    pub min: i16,
    pub max: i16,
}

impl Versions {
    pub const NONE: Versions = Versions { min: 0, max: -1 };
    pub const fn new(min: i16, max: i16) -> Self {
        Versions { min, max }
    }
    #[inline]
    pub fn contains(self, v: i16) -> bool {
        self.min <= v && v <= self.max
    }
    #[inline]
    pub fn is_none(self) -> bool {
        self.min > self.max
    }
    /// Kafka's text form: `none`, `3`, `1-3`, `2+`.
    pub fn to_kafka_string(self) -> String {
        if self.is_none() {
            "none".into()
        } else if self.max == i16::MAX {
            format!("{}+", self.min)
        } else if self.min == self.max {
            format!("{}", self.min)
        } else {
            format!("{}-{}", self.min, self.max)
        }
    }
}

/// A field's type. Arrays and structs refer to other static tables.
#[derive(Debug)]
pub enum FieldType {
    Bool,
    Int8,
    Int16,
    Uint16,
    Int32,
    Uint32,
    Int64,
    Float64,
    String,
    Bytes,
    Uuid,
    Records,
    Struct(&'static StructSchema),
    Array(&'static FieldType),
}

impl FieldType {
    /// Kafka's spelling of the type (`int32`, `[]Voter`, ...).
    pub fn kafka_name(&self) -> String {
        match self {
            FieldType::Struct(s) => s.name.to_string(),
            FieldType::Array(t) => format!("[]{}", t.kafka_name()),
            t => t.primitive_name().to_string(),
        }
    }
    pub fn primitive_name(&self) -> &'static str {
        match self {
            FieldType::Bool => "bool",
            FieldType::Int8 => "int8",
            FieldType::Int16 => "int16",
            FieldType::Uint16 => "uint16",
            FieldType::Int32 => "int32",
            FieldType::Uint32 => "uint32",
            FieldType::Int64 => "int64",
            FieldType::Float64 => "float64",
            FieldType::String => "string",
            FieldType::Bytes => "bytes",
            FieldType::Uuid => "uuid",
            FieldType::Records => "records",
            FieldType::Struct(_) => "struct",
            FieldType::Array(_) => "array",
        }
    }
    /// Range of an integer type, None for the others.
    pub fn int_range(&self) -> Option<(i64, i64)> {
        Some(match self {
            FieldType::Int8 => (i8::MIN as i64, i8::MAX as i64),
            FieldType::Int16 => (i16::MIN as i64, i16::MAX as i64),
            FieldType::Uint16 => (0, u16::MAX as i64),
            FieldType::Int32 => (i32::MIN as i64, i32::MAX as i64),
            FieldType::Uint32 => (0, u32::MAX as i64),
            FieldType::Int64 => (i64::MIN, i64::MAX),
            _ => return None,
        })
    }
}

/// A field's default as written in the schema (`Zero`: the type's own default -- 0, false,
/// "", zero UUID, empty bytes/array, a struct of defaults).
#[derive(Debug, Clone, Copy)]
pub enum DefaultValue {
    Zero,
    Null,
    Int(i64),
    Float(f64),
    Bool(bool),
    Str(&'static str),
}

#[derive(Debug)]
pub struct Field {
    /// The schema's name (`BrokerId`); also the key in decoded values.
    pub name: &'static str,
    /// The name Kafka's JsonConverter prints (`brokerId`).
    pub json_name: &'static str,
    /// The type as spelled in the schema file.
    pub type_name: &'static str,
    pub ty: FieldType,
    pub versions: Versions,
    pub nullable_versions: Versions,
    pub tagged_versions: Versions,
    pub tag: Option<u32>,
    /// A per-field override of the message's flexible versions (strings only, e.g. RequestHeader.ClientId).
    pub flexible_versions: Option<Versions>,
    pub default: DefaultValue,
    pub ignorable: bool,
}

#[derive(Debug)]
pub struct StructSchema {
    pub name: &'static str,
    pub versions: Versions,
    pub fields: &'static [Field],
}

#[derive(Debug)]
pub struct MessageSchema {
    pub name: &'static str,
    /// The metadata record type (apiKey), -1 for messages without one (control records).
    pub api_key: i16,
    /// The schema's `type`: "metadata" or "data".
    pub kind: &'static str,
    /// `MetadataRecordType` constant name, printed by kafka-dump-log's metadata decoder.
    pub type_name: &'static str,
    pub valid_versions: Versions,
    pub flexible_versions: Versions,
    pub body: &'static StructSchema,
    /// Where the schema came from (jar entry or reference copy).
    pub source: &'static str,
}

/// A control record type with a schema.
#[derive(Debug)]
pub struct ControlSchema {
    pub control_type: i16,
    /// What kafka-dump-log prints before the JSON (`SnapshotHeader`, `KRaftVoters`, ...).
    pub label: &'static str,
    pub schema: &'static MessageSchema,
}

/// A decoded value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    /// Every integer type (int8 ... int64, uint16, uint32).
    Int(i64),
    Float(f64),
    Str(String),
    /// bytes and records.
    Bytes(Vec<u8>),
    Uuid([u8; 16]),
    Array(Vec<Value>),
    Struct(Struct),
}

/// A decoded struct: its fields present at the version, in schema order, and the tagged
/// fields the schema does not know (kept as raw payloads so they survive a re-encode).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Struct {
    pub fields: Vec<(&'static str, Value)>,
    pub unknown_tags: Vec<(u32, Vec<u8>)>,
}

impl Struct {
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.fields.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }
}
