//! Compression codecs framed the way Kafka frames them inside a v2 batch:
//! gzip (RFC 1952), snappy (xerial block framing, raw snappy accepted on read),
//! lz4 (LZ4 frame, 64 KiB independent blocks) and zstd (standard frame).

use crate::error::{Error, ErrorKind, Result};
use std::io::{Read, Write};
use std::sync::atomic::{AtomicUsize, Ordering};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    None = 0,
    Gzip = 1,
    Snappy = 2,
    Lz4 = 3,
    Zstd = 4,
}

impl Codec {
    pub fn from_id(id: u8) -> Option<Codec> {
        Some(match id {
            0 => Codec::None,
            1 => Codec::Gzip,
            2 => Codec::Snappy,
            3 => Codec::Lz4,
            4 => Codec::Zstd,
            _ => return None,
        })
    }
    pub fn from_name(name: &str) -> Option<Codec> {
        Some(match name {
            "none" => Codec::None,
            "gzip" => Codec::Gzip,
            "snappy" => Codec::Snappy,
            "lz4" => Codec::Lz4,
            "zstd" => Codec::Zstd,
            _ => return None,
        })
    }
    /// The name Kafka uses (`CompressionType.name`).
    pub fn name(self) -> &'static str {
        match self {
            Codec::None => "none",
            Codec::Gzip => "gzip",
            Codec::Snappy => "snappy",
            Codec::Lz4 => "lz4",
            Codec::Zstd => "zstd",
        }
    }
}

pub(crate) fn cerr(codec: Codec, e: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::Compression, format!("{} decompression failed: {e}", codec.name()))
}

/// The xerial snappy-java stream header: magic, version 1, compatible version 1.
const XERIAL_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];
pub(crate) const XERIAL_HEADER_LEN: usize = 16;
/// snappy-java's default block size, which Kafka uses.
const XERIAL_BLOCK: usize = 32 * 1024;

/// The largest records area a compressed batch may inflate to unless the caller says otherwise:
/// 100 MiB, Kafka's `socket.request.max.bytes` default (a broker never accepts a request, and so
/// never a batch, larger than that). A decompression bomb (a few KB that inflate to GBs) stops
/// there with an error instead of exhausting memory.
pub const DEFAULT_MAX_UNCOMPRESSED_BYTES: usize = 100 * 1024 * 1024;

static MAX_UNCOMPRESSED_BYTES: AtomicUsize = AtomicUsize::new(DEFAULT_MAX_UNCOMPRESSED_BYTES);

/// The limit `decompress` applies (process-wide; `set_max_uncompressed_bytes` changes it).
pub fn max_uncompressed_bytes() -> usize {
    MAX_UNCOMPRESSED_BYTES.load(Ordering::Relaxed)
}

/// Sets the process-wide limit on the size a batch's records area may inflate to (at least 1).
pub fn set_max_uncompressed_bytes(limit: usize) {
    MAX_UNCOMPRESSED_BYTES.store(limit.max(1), Ordering::Relaxed);
}

/// Decompresses a batch's records area, refusing to inflate it past `max_uncompressed_bytes()`.
/// `size_hint` (e.g. records count * 16) sizes the output.
pub fn decompress(codec: Codec, data: &[u8], size_hint: usize) -> Result<Vec<u8>> {
    decompress_limited(codec, data, size_hint, max_uncompressed_bytes())
}

/// Decompresses a batch's records area; more than `limit` bytes of output is an error, found
/// before more than `limit` + one codec block is held in memory.
pub fn decompress_limited(codec: Codec, data: &[u8], size_hint: usize, limit: usize) -> Result<Vec<u8>> {
    // lz4 appends whole blocks: the first one sizes the vector exactly. The hint comes from the
    // batch header (a lying count must not reserve memory): at most 32x the compressed size.
    let cap = if codec == Codec::Lz4 {
        0
    } else {
        size_hint.min(data.len().saturating_mul(32)).max(data.len() * 2).min(64 << 20).min(limit.saturating_add(1))
    };
    let mut out = Vec::new();
    grow(&mut out, cap, codec)?;
    match codec {
        Codec::None => out.extend_from_slice(data),
        Codec::Gzip => {
            flate2::read::GzDecoder::new(data)
                .take((limit as u64).saturating_add(1))
                .read_to_end(&mut out)
                .map_err(|e| cerr(codec, e))?;
        }
        Codec::Snappy => snappy_decompress(data, &mut out, limit)?,
        Codec::Lz4 => crate::lz4_frame::decompress(data, &mut out, limit).map_err(|e| cerr(codec, e))?,
        Codec::Zstd => zstd_decompress(data, &mut out, limit)?,
    }
    if out.len() > limit {
        return Err(too_large(codec, limit));
    }
    Ok(out)
}

/// Makes room for `add` more bytes, or says that the memory is not there (a limit set above the
/// memory available must not abort the process).
pub(crate) fn grow(out: &mut Vec<u8>, add: usize, codec: Codec) -> Result<()> {
    out.try_reserve_exact(add).map_err(|_| {
        Error::new(ErrorKind::Compression, format!(
            "cannot allocate {} bytes to decompress {} records into: the limit on a decompressed batch is above the memory available",
            out.len().saturating_add(add), codec.name()))
    })
}

/// The error of a records area that inflates past `limit`.
#[cold]
pub fn too_large(codec: Codec, limit: usize) -> Error {
    Error::new(
        ErrorKind::Compression,
        format!("{} records area inflates to more than {limit} bytes, the limit on a decompressed batch", codec.name()),
    )
}

thread_local! {
    /// One zstd decompression context per thread: creating one per batch dominated the cost.
    static ZSTD_DCTX: std::cell::RefCell<Option<zstd::stream::raw::Decoder<'static>>> = const { std::cell::RefCell::new(None) };
}

fn zstd_decompress(data: &[u8], out: &mut Vec<u8>, limit: usize) -> Result<()> {
    use zstd::stream::raw::{InBuffer, Operation, OutBuffer};
    let codec = Codec::Zstd;
    ZSTD_DCTX.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = Some(zstd::stream::raw::Decoder::new().map_err(|e| cerr(codec, e))?);
        }
        let dec = slot.as_mut().unwrap();
        dec.reinit().map_err(|e| cerr(codec, e))?;
        let mut input = InBuffer::around(data);
        let mut stalls = 0;
        loop {
            if out.len() > limit {
                return Err(too_large(codec, limit));
            }
            if out.capacity() - out.len() < 32 * 1024 {
                // grow by doubling, but never past the limit (+1 byte to see it crossed)
                let room = (limit + 1).saturating_sub(out.len()).max(1);
                grow(out, out.len().max(64 * 1024).min(room), codec)?;
            }
            let before_in = input.pos;
            let before_out = out.len();
            let pos = out.len();
            let mut ob = OutBuffer::around_pos(out, pos);
            let hint = dec.run(&mut input, &mut ob).map_err(|e| cerr(codec, e))?;
            let produced = ob.pos() - before_out;
            if hint == 0 && input.pos == data.len() {
                return Ok(());
            }
            if input.pos == before_in && produced == 0 {
                // No progress although there was room: the frame is cut short (or the codec stuck).
                stalls += 1;
                if input.pos == data.len() || stalls > 3 {
                    return Err(cerr(codec, "truncated zstd frame"));
                }
            } else {
                stalls = 0;
            }
        }
    })
}

/// Whether `data` starts with snappy-java's xerial stream header (else it is raw snappy).
pub(crate) fn is_xerial(data: &[u8]) -> bool {
    data.len() >= XERIAL_HEADER_LEN && data[..8] == XERIAL_MAGIC
}

fn snappy_decompress(data: &[u8], out: &mut Vec<u8>, limit: usize) -> Result<()> {
    let codec = Codec::Snappy;
    if is_xerial(data) {
        let mut pos = XERIAL_HEADER_LEN;
        let mut dec = snap::raw::Decoder::new();
        while pos < data.len() {
            if data.len() - pos < 4 {
                return Err(cerr(codec, "truncated xerial block length"));
            }
            let n = u32::from_be_bytes(data[pos..pos + 4].try_into().unwrap()) as usize;
            pos += 4;
            if data.len() - pos < n {
                return Err(cerr(codec, format!("xerial block of {n} bytes runs past the end")));
            }
            let block = &data[pos..pos + n];
            let len = snap::raw::decompress_len(block).map_err(|e| cerr(codec, e))?;
            if len > limit.saturating_sub(out.len()) {
                return Err(too_large(codec, limit));
            }
            let start = out.len();
            grow(out, len, codec)?;
            out.resize(start + len, 0);
            dec.decompress(block, &mut out[start..]).map_err(|e| cerr(codec, e))?;
            pos += n;
        }
        Ok(())
    } else {
        let len = snap::raw::decompress_len(data).map_err(|e| cerr(codec, e))?;
        if len > limit {
            return Err(too_large(codec, limit));
        }
        let start = out.len();
        grow(out, len, codec)?;
        out.resize(start + len, 0);
        snap::raw::Decoder::new().decompress(data, &mut out[start..]).map_err(|e| cerr(codec, e))?;
        Ok(())
    }
}

/// Compresses `data` as Kafka's producer would for `codec`; `level` None = Kafka's default level.
pub fn compress(codec: Codec, data: &[u8], level: Option<i32>, out: &mut Vec<u8>) -> Result<()> {
    let werr = |e: std::io::Error| Error::new(ErrorKind::Compression, format!("{} compression failed: {e}", codec.name()));
    match codec {
        Codec::None => out.extend_from_slice(data),
        Codec::Gzip => {
            // Kafka's GzipCompression default level is Deflater.DEFAULT_COMPRESSION (zlib's 6).
            let lvl = level.unwrap_or(6).clamp(1, 9) as u32;
            let mut e = flate2::write::GzEncoder::new(out, flate2::Compression::new(lvl));
            e.write_all(data).map_err(werr)?;
            e.finish().map_err(werr)?;
        }
        Codec::Snappy => {
            out.extend_from_slice(&XERIAL_MAGIC);
            out.extend_from_slice(&1i32.to_be_bytes());
            out.extend_from_slice(&1i32.to_be_bytes());
            let mut enc = snap::raw::Encoder::new();
            let mut buf = vec![0u8; snap::raw::max_compress_len(XERIAL_BLOCK)];
            for chunk in data.chunks(XERIAL_BLOCK) {
                let n = enc.compress(chunk, &mut buf).map_err(|e| werr(std::io::Error::other(e)))?;
                out.extend_from_slice(&(n as u32).to_be_bytes());
                out.extend_from_slice(&buf[..n]);
            }
        }
        Codec::Lz4 => {
            // Kafka's Lz4BlockOutputStream: 64 KiB blocks, independent, no block or content checksum.
            let info = lz4_flex::frame::FrameInfo::new()
                .block_size(lz4_flex::frame::BlockSize::Max64KB)
                .block_mode(lz4_flex::frame::BlockMode::Independent)
                .block_checksums(false)
                .content_checksum(false);
            let mut e = lz4_flex::frame::FrameEncoder::with_frame_info(info, out);
            e.write_all(data).map_err(werr)?;
            e.finish().map_err(|e| werr(std::io::Error::other(e)))?;
        }
        Codec::Zstd => {
            // Kafka's ZstdCompression default level is 3.
            let v = zstd::bulk::compress(data, level.unwrap_or(3)).map_err(werr)?;
            out.extend_from_slice(&v);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_all_codecs() {
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8 ^ (i / 1000) as u8).collect();
        for codec in [Codec::None, Codec::Gzip, Codec::Snappy, Codec::Lz4, Codec::Zstd] {
            let mut c = Vec::new();
            compress(codec, &data, None, &mut c).unwrap();
            let d = decompress(codec, &c, 0).unwrap();
            assert_eq!(d, data, "{}", codec.name());
        }
    }

    #[test]
    fn inflating_past_the_limit_is_an_error_for_every_codec() {
        // 8 MiB of zeros: a few KB compressed in every codec; decompressed under a 1 MiB limit
        let zeros = vec![0u8; 8 << 20];
        for codec in [Codec::Gzip, Codec::Snappy, Codec::Lz4, Codec::Zstd] {
            let mut c = Vec::new();
            compress(codec, &zeros, None, &mut c).unwrap();
            let e = decompress_limited(codec, &c, usize::MAX >> 1, 1 << 20).unwrap_err();
            assert_eq!(e.kind, ErrorKind::Compression, "{}", codec.name());
            assert!(e.reason.contains("more than 1048576 bytes"), "{}: {}", codec.name(), e.reason);
            // exactly at the limit is fine; one byte over is not
            assert_eq!(decompress_limited(codec, &c, 0, 8 << 20).unwrap().len(), 8 << 20, "{}", codec.name());
            assert!(decompress_limited(codec, &c, 0, (8 << 20) - 1).is_err(), "{}", codec.name());
        }
        // raw (unframed) snappy, which Kafka's reader also accepts
        let raw = snap::raw::Encoder::new().compress_vec(&zeros).unwrap();
        assert!(decompress_limited(Codec::Snappy, &raw, 0, 1 << 20).is_err());
        assert_eq!(decompress_limited(Codec::Snappy, &raw, 0, 8 << 20).unwrap().len(), 8 << 20);
    }

    #[test]
    fn the_process_wide_limit_applies_to_decompress() {
        let zeros = vec![0u8; 3 << 20];
        let mut c = Vec::new();
        compress(Codec::Zstd, &zeros, None, &mut c).unwrap();
        assert_eq!(max_uncompressed_bytes(), DEFAULT_MAX_UNCOMPRESSED_BYTES);
        assert_eq!(decompress(Codec::Zstd, &c, 0).unwrap().len(), 3 << 20);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        let junk = [0x82u8, b'S', b'N', b'A', b'P', b'P', b'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff];
        for codec in [Codec::Gzip, Codec::Snappy, Codec::Lz4, Codec::Zstd] {
            assert!(decompress(codec, &junk, 0).is_err(), "{}", codec.name());
        }
    }
}
