//! Kafka's LZ4 framing, read as Kafka's `Lz4BlockInputStream` reads it.
//!
//! A batch's records area compressed with lz4 is one LZ4 frame (magic 0x184D2204, a frame
//! descriptor, blocks, an end mark). Kafka accepts exactly what its reader accepts, which is not
//! quite what the LZ4 frame specification (or the lz4 library) does:
//!
//! * the descriptor must say version 1, independent blocks, a block size code of 4 to 7 and no
//!   reserved bits; its checksum byte is the second byte of the XXH32 of the descriptor (Kafka
//!   does not check it for magic 0 message sets, which kraftkit does not read);
//! * a block size word is read with its "uncompressed" bit masked off before the end-mark test,
//!   so `0x80000000` ends the frame as `0` does;
//! * the content checksum after the end mark is read but not checked, and bytes after it are
//!   ignored; input that ends before an end mark is an error.
//!
//! Blocks are decompressed with lz4_flex's block decoder into a per-thread scratch buffer of
//! the frame's maximum block size, then appended to the output: lz4_flex's own frame reader
//! allocates and zero-fills two buffers of the maximum block size for every frame, which took
//! about as long as decompressing a 15 KB batch.

use std::cell::RefCell;

const MAGIC: u32 = 0x184D_2204;
/// The bit of a block size word that marks a block stored uncompressed.
const UNCOMPRESSED: u32 = 0x8000_0000;
const PREMATURE: &str = "the LZ4 frame ends before its end mark";

thread_local! {
    /// A decompressed block, before it is appended to the output (zero-filled once, reused).
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Appends the decompressed contents of the frame `data` to `out`; the reason on failure. Output
/// past `limit` bytes (in all of `out`) stops the frame with an error before it is appended.
pub fn decompress(data: &[u8], out: &mut Vec<u8>, limit: usize) -> Result<(), String> {
    if data.len() < 6 {
        return Err(PREMATURE.into());
    }
    let magic = u32::from_le_bytes([data[0], data[1], data[2], data[3]]);
    if magic != MAGIC {
        return Err(format!("not an LZ4 frame (magic {magic:#010x})"));
    }
    let (flg, bd) = (data[4], data[5]);
    if flg & 0b11 != 0 {
        return Err("reserved bits of the frame descriptor (FLG) are set".into());
    }
    if flg & 0x20 == 0 {
        return Err("LZ4 frames of dependent blocks are not supported".into());
    }
    if flg >> 6 != 1 {
        return Err(format!("LZ4 frame version {} is not supported", flg >> 6));
    }
    if bd & 0x8F != 0 {
        return Err("reserved bits of the frame descriptor (BD) are set".into());
    }
    let code = (bd >> 4) & 7;
    if code < 4 {
        return Err(format!("LZ4 block size code {code} is not between 4 and 7"));
    }
    let max_block = 1usize << (2 * code as usize + 8);
    let block_checksums = flg & 0x10 != 0;
    let content_checksum = flg & 0x04 != 0;
    let mut pos = 6 + if flg & 0x08 != 0 { 8 } else { 0 }; // the content size is skipped
    if data.len() <= pos {
        return Err(PREMATURE.into());
    }
    let hc = (twox_hash::XxHash32::oneshot(0, &data[4..pos]) >> 8) as u8;
    if data[pos] != hc {
        return Err(format!("LZ4 frame descriptor checksum {:#04x} does not match {hc:#04x}", data[pos]));
    }
    pos += 1;
    SCRATCH.with(|scratch| {
        let mut scratch = scratch.borrow_mut();
        loop {
            let word = read_u32(data, pos).ok_or(PREMATURE)?;
            pos += 4;
            let size = (word & !UNCOMPRESSED) as usize;
            if size == 0 {
                if content_checksum && data.len() - pos < 4 {
                    return Err(PREMATURE.into());
                }
                return Ok(());
            }
            if size > max_block {
                return Err(format!("LZ4 block of {size} bytes is larger than the frame's maximum of {max_block}"));
            }
            if data.len() - pos < size {
                return Err(PREMATURE.into());
            }
            let block = &data[pos..pos + size];
            pos += size;
            if block_checksums {
                let want = read_u32(data, pos).ok_or(PREMATURE)?;
                pos += 4;
                let got = twox_hash::XxHash32::oneshot(0, block);
                if got != want {
                    return Err(format!("LZ4 block checksum {got:#010x} does not match {want:#010x}"));
                }
            }
            if word & UNCOMPRESSED != 0 {
                if block.len() > limit.saturating_sub(out.len()) {
                    return Err(past_limit(limit));
                }
                out.extend_from_slice(block);
            } else {
                if scratch.len() < max_block {
                    scratch.resize(max_block, 0);
                }
                let n = lz4_flex::block::decompress_into(block, &mut scratch[..max_block]).map_err(|e| format!("LZ4 block: {e}"))?;
                if n > limit.saturating_sub(out.len()) {
                    return Err(past_limit(limit));
                }
                out.extend_from_slice(&scratch[..n]);
            }
        }
    })
}

#[cold]
fn past_limit(limit: usize) -> String {
    format!("records area inflates to more than {limit} bytes, the limit on a decompressed batch")
}

#[inline]
fn read_u32(data: &[u8], pos: usize) -> Option<u32> {
    data.get(pos..pos + 4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A frame as Kafka's Lz4BlockOutputStream writes it (lz4_flex's encoder, 64 KiB blocks).
    fn frame(data: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        crate::compression::compress(crate::compression::Codec::Lz4, data, None, &mut out).unwrap();
        out
    }

    fn sample() -> Vec<u8> {
        (0..300_000u32).map(|i| (i % 251) as u8 ^ (i / 977) as u8).collect()
    }

    fn dec(f: &[u8]) -> Result<Vec<u8>, String> {
        let mut out = Vec::new();
        decompress(f, &mut out, usize::MAX).map(|()| out)
    }

    #[test]
    fn reads_what_lz4_flex_writes_and_reads() {
        let data = sample();
        for n in [0, 1, 100, 65_536, 65_537, data.len()] {
            let f = frame(&data[..n]);
            let mut theirs = Vec::new();
            std::io::Read::read_to_end(&mut lz4_flex::frame::FrameDecoder::new(&f[..]), &mut theirs).unwrap();
            assert_eq!(dec(&f).unwrap(), theirs);
            assert_eq!(theirs, &data[..n]);
        }
    }

    #[test]
    fn uncompressed_blocks_block_checksums_and_content_size() {
        // written by hand: FLG version 1, independent, block checksums, content size, content checksum
        let payload = b"kraftkit reads uncompressed LZ4 blocks";
        let mut f = MAGIC.to_le_bytes().to_vec();
        let desc_start = f.len();
        f.push(0b0111_1100);
        f.push(4 << 4);
        f.extend_from_slice(&(payload.len() as u64).to_le_bytes());
        f.push((twox_hash::XxHash32::oneshot(0, &f[desc_start..]) >> 8) as u8);
        f.extend_from_slice(&(payload.len() as u32 | UNCOMPRESSED).to_le_bytes());
        f.extend_from_slice(payload);
        f.extend_from_slice(&twox_hash::XxHash32::oneshot(0, payload).to_le_bytes());
        f.extend_from_slice(&0u32.to_le_bytes());
        f.extend_from_slice(&0xdead_beefu32.to_le_bytes()); // content checksum: read, not checked (as Kafka)
        assert_eq!(dec(&f).unwrap(), payload);
        let mut bad = f.clone();
        bad[desc_start + 11 + 4] ^= 1; // the first payload byte (after FLG, BD, size, HC, block word)
        assert!(dec(&bad).unwrap_err().contains("block checksum"));
    }

    #[test]
    fn end_mark_with_the_uncompressed_bit_ends_the_frame_as_in_kafka() {
        let data = sample();
        let mut f = frame(&data[..1000]);
        let end = f.len() - 4;
        assert_eq!(&f[end..], &[0, 0, 0, 0]);
        f[end + 3] = 0x80;
        assert_eq!(dec(&f).unwrap(), &data[..1000]);
        f.extend_from_slice(b"after the end mark: ignored");
        assert_eq!(dec(&f).unwrap(), &data[..1000]);
    }

    #[test]
    fn damage_is_an_error_with_a_reason() {
        let f = frame(&sample()[..5000]);
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (f[..5].to_vec(), "ends before"),
            (f[..f.len() - 4].to_vec(), "ends before"), // no end mark
            (f[..f.len() - 100].to_vec(), "ends before"),
            ({ let mut b = f.clone(); b[0] ^= 1; b }, "not an LZ4 frame"),
            ({ let mut b = f.clone(); b[4] |= 1; b }, "reserved bits"),
            ({ let mut b = f.clone(); b[4] ^= 0x20; b }, "dependent blocks"),
            ({ let mut b = f.clone(); b[4] ^= 0xC0; b }, "version 2"),
            ({ let mut b = f.clone(); b[5] = 3 << 4; b }, "block size code 3"),
            ({ let mut b = f.clone(); b[6] ^= 0xff; b }, "descriptor checksum"),
            ({ let mut b = f.clone(); b[7..11].copy_from_slice(&(70_000u32).to_le_bytes()); b }, "larger than the frame's maximum"),
        ];
        for (bytes, want) in cases {
            let e = dec(&bytes).unwrap_err();
            assert!(e.contains(want), "{e:?} should say {want:?}");
        }
        // flipped bytes inside the compressed block: an error or other bytes, never a panic
        for i in 11..f.len() - 4 {
            let mut b = f.clone();
            b[i] ^= 0x5a;
            let _ = dec(&b);
        }
    }
}
