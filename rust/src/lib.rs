//! kraftkit's byte-level core: Kafka record batches v2, CRC-32C, compression, segment files and
//! their indexes. Policy lives in Python; this crate only reads, checks and writes bytes.
//! The PyO3 face is in `py/`, behind the `python` feature, so `cargo test` needs no Python.

pub mod arrow;
pub mod batch;
pub mod builder;
pub mod compression;
pub mod crc;
pub mod dump;
pub mod error;
pub mod image;
pub mod index;
pub mod java_utf8;
pub mod rewrite;
pub mod schema;
pub mod segment;
pub mod snapshot;
pub mod varint;

#[cfg(feature = "python")]
mod py;
