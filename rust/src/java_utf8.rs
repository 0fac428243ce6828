//! Bytes decoded as Java's `new String(bytes, UTF_8)` decodes them, then re-encoded as UTF-8:
//! what `kafka-dump-log` prints for a key or payload. Valid UTF-8 comes out as it went in; each
//! malformed sequence becomes U+FFFD, with Java's rules for how many bytes one replacement
//! covers (JDK `String.decodeUTF8_UTF16`), which differ from Rust's `from_utf8_lossy`: Java gives
//! an overlong three-byte sequence one replacement per byte, a surrogate one for all three, and
//! a truncated sequence at the end of the input one in all.
//!
//! Binary values (KRaft metadata records, UUIDs) are mostly malformed, so the decoder is built
//! for that case too. Output goes into a buffer sized for the worst case (three bytes out per
//! byte in, and slack for one four-byte store), and ASCII is copied eight bytes at a time. A byte
//! that does not start a multi-byte sequence (it is ASCII, or its successor is not a continuation
//! byte) decodes alone, to itself or to one U+FFFD, whatever its neighbours: that case, most
//! bytes of random data, takes no data-dependent branch (one four-byte store, a conditional move
//! choosing what to store, the output advancing by 1 or 3). Only the rest (about one byte in
//! twenty of random data) goes through Java's rules one case at a time.

/// U+FFFD in UTF-8.
const REPLACEMENT: [u8; 3] = [0xef, 0xbf, 0xbd];

#[inline(always)]
fn is_cont(b: u8) -> bool {
    b & 0xc0 == 0x80
}

/// Appends `b` as Java decodes it (see the module doc).
pub fn lossy(out: &mut Vec<u8>, b: &[u8]) {
    if std::str::from_utf8(b).is_ok() {
        out.extend_from_slice(b);
        return;
    }
    let base = out.len();
    // No input byte gives more than three bytes of output (a replacement); the last store may
    // write up to three bytes past what it keeps.
    out.resize(base + 3 * b.len() + 4, 0);
    let written = decode_into(&mut out[base..], b);
    out.truncate(base + written);
}

/// U+FFFD in UTF-8 as the low three bytes of a little-endian word.
const REPLACEMENT_WORD: u32 = u32::from_le_bytes([0xef, 0xbf, 0xbd, 0]);

const HIGH: u64 = 0x8080_8080_8080_8080;

/// The high bit of each byte of `w` (little-endian: byte k is bits 8k..8k+8) that is a
/// continuation byte (0b10xxxxxx).
#[inline(always)]
fn continuations(w: u64) -> u64 {
    w & !(w << 1) & HIGH
}

/// The high bit of each byte of `w` that can lead a multi-byte sequence as Java reads one
/// (0xc2..=0xf4), by carry-free per-byte compares on the low seven bits.
#[inline(always)]
fn leads(w: u64) -> u64 {
    let low = w & !HIGH;
    let at_least_c2 = (low + 0x3e3e_3e3e_3e3e_3e3e) & HIGH; // low >= 0x42
    let above_f4 = (low + 0x0b0b_0b0b_0b0b_0b0b) & HIGH; // low >= 0x75
    w & HIGH & at_least_c2 & !above_f4
}

/// Writes a byte that decodes alone (it does not lead a sequence: ASCII, or any byte not
/// followed by a continuation byte) at `o`: ASCII as itself, any other byte as one replacement,
/// which is what Java gives a continuation byte without a lead, a byte that never leads, and a
/// lead byte without a continuation after it (also at the end of the input). Stores four bytes
/// (`dst` has the slack) and returns the new end.
#[inline(always)]
fn alone(dst: &mut [u8], o: usize, c: u8) -> usize {
    let non_ascii = (c >> 7) as usize;
    let word = if non_ascii == 1 { REPLACEMENT_WORD } else { c as u32 };
    dst[o..o + 4].copy_from_slice(&word.to_le_bytes());
    o + 1 + 2 * non_ascii
}

/// Writes the decoding of `b` into `dst` (at least `3 * b.len() + 4` bytes); returns its length.
fn decode_into(dst: &mut [u8], b: &[u8]) -> usize {
    let n = b.len();
    let (mut i, mut o) = (0usize, 0usize);
    macro_rules! put {
        ($len:literal, $src:expr) => {{
            dst[o..o + $len].copy_from_slice($src);
            o += $len;
        }};
    }
    while i < n {
        // Eight bytes at a time while nine can be read (the ninth tells whether the eighth
        // leads a sequence): all ASCII, or bytes that all decode alone, are written without a
        // data-dependent branch; else the bytes before the first lead-and-continuation pair are.
        if let Some(w9) = b.get(i..i + 9) {
            let w = u64::from_le_bytes(w9[..8].try_into().unwrap());
            if w & HIGH == 0 {
                put!(8, &w9[..8]);
                i += 8;
                continue;
            }
            let pairs = leads(w) & continuations(u64::from_le_bytes(w9[1..].try_into().unwrap()));
            if pairs == 0 {
                for k in 0..8 {
                    o = alone(dst, o, (w >> (8 * k)) as u8);
                }
                i += 8;
                continue;
            }
            for k in 0..(pairs.trailing_zeros() / 8) as usize {
                o = alone(dst, o, (w >> (8 * k)) as u8);
                i += 1;
            }
        }
        let b1 = b[i];
        let next = b.get(i + 1).copied().unwrap_or(0);
        if !(0xc2..=0xf4).contains(&b1) || !is_cont(next) {
            o = alone(dst, o, b1);
            i += 1;
            continue;
        }
        // A lead byte followed by a continuation byte: Java's rules, case by case.
        // Bytes after the lead byte, 0 past the end (0 is not a continuation byte, and every
        // rule below that reads one checks the length first where Java does).
        let at = |k: usize| b.get(i + k).copied().unwrap_or(0);
        match b1 {
            0xc2..=0xdf => {
                if i + 1 < n {
                    if is_cont(at(1)) {
                        put!(2, &b[i..i + 2]);
                        i += 2;
                    } else {
                        put!(3, &REPLACEMENT);
                        i += 1;
                    }
                } else {
                    put!(3, &REPLACEMENT);
                    return o;
                }
            }
            0xe0..=0xef => {
                let b2 = at(1);
                let overlong = b1 == 0xe0 && b2 & 0xe0 == 0x80;
                if i + 2 < n {
                    let b3 = at(2);
                    if overlong || !is_cont(b2) || !is_cont(b3) {
                        put!(3, &REPLACEMENT);
                        // Java skips 1 byte, or 2 when the second byte was acceptable.
                        i += if !overlong && is_cont(b2) { 2 } else { 1 };
                    } else {
                        // 0xed 0xa0..=0xbf is a surrogate: one replacement for the three bytes.
                        if b1 == 0xed && b2 >= 0xa0 {
                            put!(3, &REPLACEMENT);
                        } else {
                            put!(3, &b[i..i + 3]);
                        }
                        i += 3;
                    }
                } else {
                    put!(3, &REPLACEMENT);
                    if i + 1 < n && (overlong || !is_cont(b2)) {
                        i += 1;
                    } else {
                        return o;
                    }
                }
            }
            0xf0..=0xf7 => {
                let b2 = at(1);
                let bad2 = (b1 == 0xf0 && !(0x90..=0xbf).contains(&b2)) || (b1 == 0xf4 && b2 & 0xf0 != 0x80) || !is_cont(b2);
                if i + 3 < n {
                    let (b3, b4) = (at(2), at(3));
                    let uc = ((b1 as u32 & 0x07) << 18) | ((b2 as u32 & 0x3f) << 12) | ((b3 as u32 & 0x3f) << 6) | (b4 as u32 & 0x3f);
                    if !is_cont(b2) || !is_cont(b3) || !is_cont(b4) || !(0x10000..=0x10ffff).contains(&uc) {
                        put!(3, &REPLACEMENT);
                        // Java's malformedN(4): 1, 2 or 3 bytes make up the bad sequence.
                        i += if b1 > 0xf4 || bad2 {
                            1
                        } else if !is_cont(b3) {
                            2
                        } else {
                            3
                        };
                    } else {
                        put!(4, &b[i..i + 4]);
                        i += 4;
                    }
                } else {
                    put!(3, &REPLACEMENT);
                    if b1 > 0xf4 || (i + 1 < n && bad2) {
                        i += 1;
                    } else if i + 2 < n && !is_cont(at(2)) {
                        i += 2;
                    } else {
                        return o;
                    }
                }
            }
            _ => {
                put!(3, &REPLACEMENT);
                i += 1;
            }
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::lossy;

    /// The first version of this decoder (a byte at a time, through `Vec` pushes, with a
    /// well-formed-sequence fast path), kept as a reference for the differential test below.
    /// It was checked against the JDK's documented rules and against real kafka-dump-log output.
    mod reference {
    const REPLACEMENT: &[u8] = "\u{FFFD}".as_bytes();

    #[inline]
    fn is_cont(b: u8) -> bool {
        b & 0xc0 == 0x80
    }

    /// Appends `b` decoded as Java's `new String(bytes, UTF_8)` does (what kafka-dump-log prints),
    /// re-encoded as UTF-8: valid UTF-8 is copied as is; each malformed sequence becomes U+FFFD,
    /// with Java's rules for how many bytes one replacement covers (JDK `String.decodeUTF8_UTF16`).
    pub fn lossy(out: &mut Vec<u8>, b: &[u8]) {
        if std::str::from_utf8(b).is_ok() {
            out.extend_from_slice(b);
            return;
        }
        let n = b.len();
        let mut i = 0;
        while i < n {
            let b1 = b[i];
            if b1 < 0x80 {
                let run = b[i..].iter().position(|&c| c >= 0x80).unwrap_or(n - i);
                out.extend_from_slice(&b[i..i + run]);
                i += run;
                continue;
            }
            // A well-formed sequence is copied as is (Java decodes it identically).
            if let Some(len) = valid_sequence_len(b, i) {
                out.extend_from_slice(&b[i..i + len]);
                i += len;
                continue;
            }
            match java_malformed_step(out, b, i) {
                Some(next) => i = next,
                None => return,
            }
        }
    }

    /// Length of the well-formed UTF-8 sequence (RFC 3629) starting with a non-ASCII byte at `i`.
    #[inline]
    fn valid_sequence_len(b: &[u8], i: usize) -> Option<usize> {
        let b1 = b[i];
        let c = |k: usize| b.get(i + k).copied().filter(|&x| is_cont(x));
        let (len, lo, hi) = match b1 {
            0xc2..=0xdf => (2, 0x80, 0xbf),
            0xe0 => (3, 0xa0, 0xbf),
            0xe1..=0xec | 0xee..=0xef => (3, 0x80, 0xbf),
            0xed => (3, 0x80, 0x9f),
            0xf0 => (4, 0x90, 0xbf),
            0xf1..=0xf3 => (4, 0x80, 0xbf),
            0xf4 => (4, 0x80, 0x8f),
            _ => return None,
        };
        let b2 = c(1)?;
        if b2 < lo || b2 > hi {
            return None;
        }
        for k in 2..len {
            c(k)?;
        }
        Some(len)
    }

    /// One step of Java's decoder at a byte where Rust found malformed input: appends what Java
    /// appends and returns where Java resumes, or None where Java stops (at the end of input).
    fn java_malformed_step(out: &mut Vec<u8>, b: &[u8], start: usize) -> Option<usize> {
        let n = b.len();
        let b1 = b[start];
        let mut i = start + 1;
        if b1 < 0x80 {
            out.push(b1);
            return Some(i);
        }
        if (0xc2..=0xdf).contains(&b1) {
            if i < n {
                if is_cont(b[i]) {
                    out.extend_from_slice(&b[i - 1..i + 1]);
                    i += 1;
                } else {
                    out.extend_from_slice(REPLACEMENT);
                }
                return Some(i);
            }
            out.extend_from_slice(REPLACEMENT);
            return None;
        }
        if (0xe0..=0xef).contains(&b1) {
            let overlong = |b2: u8| b1 == 0xe0 && b2 & 0xe0 == 0x80;
            if i + 1 < n {
                let (b2, b3) = (b[i], b[i + 1]);
                if overlong(b2) || !is_cont(b2) || !is_cont(b3) {
                    out.extend_from_slice(REPLACEMENT);
                    // Java skips 1 byte, or 2 when the second byte was acceptable.
                    if !overlong(b2) && is_cont(b2) {
                        i += 1;
                    }
                } else {
                    let c = ((b1 as u32 & 0x0f) << 12) | ((b2 as u32 & 0x3f) << 6) | (b3 as u32 & 0x3f);
                    if (0xd800..=0xdfff).contains(&c) {
                        out.extend_from_slice(REPLACEMENT);
                    } else {
                        out.extend_from_slice(&b[i - 1..i + 2]);
                    }
                    i += 2;
                }
                return Some(i);
            }
            out.extend_from_slice(REPLACEMENT);
            if i < n && (overlong(b[i]) || !is_cont(b[i])) {
                return Some(i);
            }
            return None;
        }
        if (0xf0..=0xf7).contains(&b1) {
            let bad2 = |b2: u8| (b1 == 0xf0 && !(0x90..=0xbf).contains(&b2)) || (b1 == 0xf4 && b2 & 0xf0 != 0x80) || !is_cont(b2);
            if i + 2 < n {
                let (b2, b3, b4) = (b[i], b[i + 1], b[i + 2]);
                let uc = ((b1 as u32 & 0x07) << 18) | ((b2 as u32 & 0x3f) << 12) | ((b3 as u32 & 0x3f) << 6) | (b4 as u32 & 0x3f);
                if !is_cont(b2) || !is_cont(b3) || !is_cont(b4) || !(0x10000..=0x10ffff).contains(&uc) {
                    out.extend_from_slice(REPLACEMENT);
                    // Java's malformedN(4): 1, 2 or 3 bytes make up the bad sequence.
                    let len = if b1 > 0xf4 || bad2(b2) {
                        1
                    } else if !is_cont(b3) {
                        2
                    } else {
                        3
                    };
                    return Some(start + len);
                }
                out.extend_from_slice(&b[start..start + 4]);
                return Some(start + 4);
            }
            out.extend_from_slice(REPLACEMENT);
            if b1 > 0xf4 || (i < n && bad2(b[i])) {
                return Some(i);
            }
            i += 1;
            if i < n && !is_cont(b[i]) {
                return Some(i);
            }
            return None;
        }
        out.extend_from_slice(REPLACEMENT);
        Some(i)
    }
    }

    fn j(b: &[u8]) -> String {
        let mut o = Vec::new();
        lossy(&mut o, b);
        String::from_utf8(o).unwrap()
    }

    /// Expected strings follow the JDK's decoding rules as documented in String.decodeUTF8_UTF16.
    #[test]
    fn java_replacement_rules() {
        assert_eq!(j("héllo".as_bytes()), "héllo");
        assert_eq!(j(&[0x80]), "\u{FFFD}");
        assert_eq!(j(&[0xed, 0xb1, 0x1f]), "\u{FFFD}\u{1f}"); // 2 bytes, one replacement
        assert_eq!(j(&[0xed, 0xa0, 0x80]), "\u{FFFD}"); // a surrogate: 3 bytes, one replacement
        assert_eq!(j(&[0xe0, 0x80, 0x80]), "\u{FFFD}\u{FFFD}\u{FFFD}"); // overlong: 1 byte at a time
        assert_eq!(j(&[0xc3]), "\u{FFFD}");
        assert_eq!(j(&[0xc3, 0x41]), "\u{FFFD}A");
        assert_eq!(j(&[0xf0, 0x9f, 0x98]), "\u{FFFD}");
        assert_eq!(j(&[0xf0, 0x9f, 0x41, 0x41]), "\u{FFFD}AA");
        // appends: what the buffer held stays
        let mut o = b"x".to_vec();
        lossy(&mut o, &[0xff, b'y']);
        assert_eq!(o, "x\u{FFFD}y".as_bytes());
    }

    fn same_as_reference(b: &[u8]) {
        let (mut fast, mut slow) = (b"prefix".to_vec(), b"prefix".to_vec());
        lossy(&mut fast, b);
        reference::lossy(&mut slow, b);
        assert_eq!(fast, slow, "input {b:02x?}");
    }

    /// Every input of up to three bytes drawn from bytes that sit on the rules' boundaries,
    /// each also behind ASCII (the eight-byte path) and before it.
    #[test]
    fn short_inputs_decode_as_the_reference_does() {
        let edges: Vec<u8> = vec![
            0x00, 0x41, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xc1, 0xc2, 0xdf, 0xe0, 0xe1, 0xec, 0xed, 0xee,
            0xef, 0xf0, 0xf1, 0xf3, 0xf4, 0xf5, 0xf7, 0xf8, 0xff,
        ];
        let mut inputs: Vec<Vec<u8>> = vec![vec![]];
        for len in 1..=3 {
            let mut next = Vec::new();
            for p in inputs.iter().filter(|p| p.len() == len - 1) {
                for &e in &edges {
                    let mut q = p.clone();
                    q.push(e);
                    next.push(q);
                }
            }
            inputs.extend(next);
        }
        for inp in &inputs {
            same_as_reference(inp);
            let mut padded = b"abcdefghij".to_vec();
            padded.extend_from_slice(inp);
            padded.extend_from_slice(b"klmnopqrs");
            same_as_reference(&padded);
        }
    }

    /// Random inputs (a fixed xorshift stream): uniform bytes, as UUIDs and binary fields
    /// give, and bytes drawn from the rules' boundaries, in runs of every length up to 64.
    #[test]
    fn random_inputs_decode_as_the_reference_does() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let edges = [0x41u8, 0x80, 0x9f, 0xa0, 0xbf, 0xc2, 0xdf, 0xe0, 0xed, 0xef, 0xf0, 0xf4, 0xf5, 0xff];
        for round in 0..200_000 {
            let len = (next() % 65) as usize;
            let b: Vec<u8> = (0..len)
                .map(|_| {
                    let r = next();
                    if round % 2 == 0 {
                        r as u8
                    } else {
                        edges[(r % edges.len() as u64) as usize]
                    }
                })
                .collect();
            same_as_reference(&b);
        }
    }
}
