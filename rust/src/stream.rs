//! The records of a compressed batch, read as they come out of the decompressor, as Kafka's
//! broker iterates a compressed batch: memory holds one chunk of output and the record being
//! read, never the whole records area. A decompression bomb costs its limit in time, not in memory.

use crate::compression::{cerr, too_large, Codec};
use crate::error::{Error, Result};
use crate::lz4_frame::{self, Block, Frame};
use crate::varint::read_varint;
use std::io::Read;

/// How much decompressed output is asked for at a time.
const CHUNK: usize = 64 * 1024;

enum Source<'a> {
    /// gzip, zstd, and snappy in xerial framing: readers of the codec's stream.
    Reader(Box<dyn Read + 'a>),
    /// Kafka's LZ4 framing, block by block (with a scratch block buffer).
    Lz4(Frame<'a>, Vec<u8>),
}

/// Record after record of a compressed records area.
pub struct RecordStream<'a> {
    codec: Codec,
    src: Source<'a>,
    buf: Vec<u8>,
    /// Where the unread bytes of `buf` start.
    start: usize,
    eof: bool,
    /// Decompressed bytes so far, and the most there may be.
    produced: usize,
    limit: usize,
}

impl<'a> RecordStream<'a> {
    /// A stream over `area`, compressed with `codec` (not `None`), that fails once more than
    /// `limit` bytes came out.
    pub fn new(codec: Codec, area: &'a [u8], limit: usize) -> Result<Self> {
        let src = match codec {
            Codec::None => return Err(Error::invalid("an uncompressed records area needs no stream")),
            Codec::Gzip => Source::Reader(Box::new(flate2::read::GzDecoder::new(area))),
            Codec::Zstd => Source::Reader(Box::new(zstd::stream::read::Decoder::with_buffer(area).map_err(|e| cerr(codec, e))?)),
            Codec::Snappy => Source::Reader(Box::new(Xerial::new(area)?)),
            Codec::Lz4 => Source::Lz4(Frame::open(area).map_err(|e| cerr(codec, e))?, Vec::new()),
        };
        Ok(RecordStream { codec, src, buf: Vec::new(), start: 0, eof: false, produced: 0, limit })
    }

    /// Reads until `want` unread bytes are buffered or the data ends.
    fn fill(&mut self, want: usize) -> Result<()> {
        while self.buf.len() - self.start < want && !self.eof {
            if self.start > 0 {
                self.buf.drain(..self.start);
                self.start = 0;
            }
            let before = self.buf.len();
            match &mut self.src {
                Source::Reader(r) => {
                    self.buf.resize(before + CHUNK, 0);
                    let n = r.read(&mut self.buf[before..]).map_err(|e| cerr(self.codec, e))?;
                    self.buf.truncate(before + n);
                    self.eof = n == 0;
                }
                Source::Lz4(frame, scratch) => match frame.next_block().map_err(|e| cerr(self.codec, e))? {
                    None => self.eof = true,
                    Some(Block::Stored(b)) => self.buf.extend_from_slice(b),
                    Some(Block::Compressed(b)) => {
                        scratch.resize(frame.max_block, 0);
                        let n = lz4_frame::decode_block(b, scratch).map_err(|e| cerr(self.codec, e))?;
                        self.buf.extend_from_slice(&scratch[..n]);
                    }
                },
            }
            self.produced += self.buf.len() - before;
            if self.produced > self.limit {
                return Err(too_large(self.codec, self.limit));
            }
        }
        Ok(())
    }

    /// The bytes of the next record (its length varint first), or None where the data ends.
    pub fn next_record(&mut self) -> std::result::Result<Option<&[u8]>, String> {
        self.fill(5).map_err(|e| e.reason)?;
        if self.buf.len() == self.start {
            return Ok(None);
        }
        let mut pos = self.start;
        let len = read_varint(&self.buf, &mut pos).ok_or("invalid record length varint")?;
        if len <= 0 {
            return Err(format!("invalid record size {len}"));
        }
        let total = pos - self.start + len as usize;
        self.fill(total).map_err(|e| e.reason)?;
        if self.buf.len() - self.start < total {
            return Err(format!("record of {len} bytes runs past the end of the batch"));
        }
        let r = &self.buf[self.start..self.start + total];
        self.start += total;
        Ok(Some(r))
    }
}

/// snappy in snappy-java's xerial framing (what Kafka writes), block by block; raw snappy (which
/// Kafka's reader also takes) is decoded in one piece, its size read first.
struct Xerial<'a> {
    data: &'a [u8],
    pos: usize,
    block: Vec<u8>,
    bpos: usize,
    raw: bool,
}

impl<'a> Xerial<'a> {
    fn new(data: &'a [u8]) -> Result<Self> {
        let xerial = crate::compression::is_xerial(data);
        Ok(Xerial { data, pos: if xerial { crate::compression::XERIAL_HEADER_LEN } else { 0 }, block: Vec::new(), bpos: 0, raw: !xerial })
    }

    fn next_block(&mut self) -> std::io::Result<bool> {
        let bad = |m: String| std::io::Error::new(std::io::ErrorKind::InvalidData, m);
        let data = self.data;
        if self.pos >= data.len() {
            return Ok(false);
        }
        let block = if self.raw {
            self.pos = data.len();
            data
        } else {
            if data.len() - self.pos < 4 {
                return Err(bad("truncated xerial block length".into()));
            }
            let n = u32::from_be_bytes(data[self.pos..self.pos + 4].try_into().unwrap()) as usize;
            self.pos += 4;
            if data.len() - self.pos < n {
                return Err(bad(format!("xerial block of {n} bytes runs past the end")));
            }
            self.pos += n;
            &data[self.pos - n..self.pos]
        };
        let len = snap::raw::decompress_len(block).map_err(|e| bad(e.to_string()))?;
        self.block.resize(len, 0);
        snap::raw::Decoder::new().decompress(block, &mut self.block).map_err(|e| bad(e.to_string()))?;
        self.bpos = 0;
        Ok(true)
    }
}

impl Read for Xerial<'_> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        while self.bpos == self.block.len() {
            if !self.next_block()? {
                return Ok(0);
            }
        }
        let n = out.len().min(self.block.len() - self.bpos);
        out[..n].copy_from_slice(&self.block[self.bpos..self.bpos + n]);
        self.bpos += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::read_record;
    use crate::builder::{write_record, RecordInput};
    use crate::compression::{compress, decompress_limited};

    fn records(n: usize, value: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        for i in 0..n {
            write_record(&mut out, i as i32, 0, &RecordInput { timestamp: 0, key: None, value: Some(value), headers: vec![] });
        }
        out
    }

    fn streamed(codec: Codec, c: &[u8], limit: usize) -> std::result::Result<Vec<Vec<u8>>, String> {
        let mut s = RecordStream::new(codec, c, limit).map_err(|e| e.reason)?;
        let mut out = Vec::new();
        while let Some(r) = s.next_record()? {
            out.push(r.to_vec());
        }
        Ok(out)
    }

    #[test]
    fn the_stream_gives_the_records_of_the_whole_area() {
        // records smaller and larger than a chunk, and an lz4 block
        for (n, value) in [(5000, vec![7u8; 30]), (3, vec![1u8; 200_000]), (0, vec![])] {
            let area = records(n, &value);
            for codec in [Codec::Gzip, Codec::Snappy, Codec::Lz4, Codec::Zstd] {
                let mut c = Vec::new();
                compress(codec, &area, None, &mut c).unwrap();
                let got = streamed(codec, &c, usize::MAX).unwrap();
                assert_eq!(got.len(), n, "{}", codec.name());
                assert_eq!(got.concat(), area, "{}", codec.name());
                for r in &got {
                    let mut pos = 0;
                    read_record(r, &mut pos, r.len()).unwrap();
                    assert_eq!(pos, r.len());
                }
            }
        }
        // raw snappy, which Kafka's reader also takes
        let area = records(100, b"raw");
        let raw = snap::raw::Encoder::new().compress_vec(&area).unwrap();
        assert_eq!(streamed(Codec::Snappy, &raw, usize::MAX).unwrap().concat(), area);
    }

    #[test]
    fn a_bomb_stops_at_the_limit_holding_a_chunk() {
        let zeros = vec![0u8; 32 << 20];
        for codec in [Codec::Gzip, Codec::Snappy, Codec::Lz4, Codec::Zstd] {
            let mut c = Vec::new();
            compress(codec, &zeros, None, &mut c).unwrap();
            // zeros are records of length 0: an error at once, whatever the limit
            assert!(streamed(codec, &c, usize::MAX).unwrap_err().contains("invalid record size 0"), "{}", codec.name());
            // one record claiming the whole area: the limit stops it, having held at most the limit
            let mut big = Vec::new();
            crate::varint::write_varint(&mut big, (32 << 20) - 8);
            big.extend_from_slice(&zeros[..(32 << 20) - 8]);
            let mut c = Vec::new();
            compress(codec, &big, None, &mut c).unwrap();
            let e = streamed(codec, &c, 1 << 20).unwrap_err();
            assert!(e.contains("more than 1048576 bytes"), "{}: {e}", codec.name());
        }
    }

    #[test]
    fn damage_is_the_same_error_as_the_whole_area_gives() {
        let area = records(300, b"some value bytes");
        for codec in [Codec::Gzip, Codec::Snappy, Codec::Lz4, Codec::Zstd] {
            let mut c = Vec::new();
            compress(codec, &area, None, &mut c).unwrap();
            for cut in [c.len() / 2, c.len() - 1] {
                let whole = decompress_limited(codec, &c[..cut], 0, usize::MAX);
                let stream = streamed(codec, &c[..cut], usize::MAX);
                // a cut frame is an error both ways (the stream may have read records before it)
                assert!(whole.is_err() && stream.is_err(), "{} cut at {cut} of {}: {:?} {:?}", codec.name(), c.len(), whole.as_ref().map(|v| v.len()), stream.as_ref().map(|v| v.len()));
            }
        }
    }
}
