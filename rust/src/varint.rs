//! Kafka's variable-length integers (`ByteUtils` in Kafka): unsigned LEB128 and the
//! zig-zag signed forms used inside v2 records.

/// Reads an unsigned varint of at most 5 bytes (32 bits) at `*pos`.
/// Returns `None` on truncation or an over-long encoding.
#[inline(always)]
pub fn read_uvarint(buf: &[u8], pos: &mut usize) -> Option<u32> {
    let mut value: u32 = 0;
    let mut shift = 0u32;
    loop {
        let b = *buf.get(*pos)?;
        *pos += 1;
        if shift == 28 && b > 0x0f {
            return None;
        }
        value |= ((b & 0x7f) as u32) << shift;
        if b & 0x80 == 0 {
            return Some(value);
        }
        shift += 7;
    }
}

/// Reads an unsigned varlong of at most 10 bytes (64 bits) at `*pos`.
#[inline(always)]
pub fn read_uvarlong(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let mut value: u64 = 0;
    let mut shift = 0u32;
    loop {
        let b = *buf.get(*pos)?;
        *pos += 1;
        if shift == 63 && b > 0x01 {
            return None;
        }
        value |= ((b & 0x7f) as u64) << shift;
        if b & 0x80 == 0 {
            return Some(value);
        }
        shift += 7;
    }
}

/// Zig-zag varint (signed 32 bit).
#[inline(always)]
pub fn read_varint(buf: &[u8], pos: &mut usize) -> Option<i32> {
    // Fast path: one byte.
    if let Some(&b) = buf.get(*pos) {
        if b & 0x80 == 0 {
            *pos += 1;
            return Some(((b >> 1) as i32) ^ -((b & 1) as i32));
        }
    }
    let v = read_uvarint(buf, pos)?;
    Some(((v >> 1) as i32) ^ -((v & 1) as i32))
}

/// Zig-zag varlong (signed 64 bit).
#[inline(always)]
pub fn read_varlong(buf: &[u8], pos: &mut usize) -> Option<i64> {
    if let Some(&b) = buf.get(*pos) {
        if b & 0x80 == 0 {
            *pos += 1;
            return Some(((b >> 1) as i64) ^ -((b & 1) as i64));
        }
    }
    let v = read_uvarlong(buf, pos)?;
    Some(((v >> 1) as i64) ^ -((v & 1) as i64))
}

#[inline]
pub fn write_uvarint(out: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[inline]
pub fn write_uvarlong(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[inline]
pub fn write_varint(out: &mut Vec<u8>, v: i32) {
    write_uvarint(out, ((v << 1) ^ (v >> 31)) as u32);
}

#[inline]
pub fn write_varlong(out: &mut Vec<u8>, v: i64) {
    write_uvarlong(out, ((v << 1) ^ (v >> 63)) as u64);
}

#[inline]
pub fn size_of_varint(v: i32) -> usize {
    size_of_uvarint(((v << 1) ^ (v >> 31)) as u32)
}

#[inline]
pub fn size_of_uvarint(mut u: u32) -> usize {
    let mut n = 1;
    while u >= 0x80 {
        u >>= 7;
        n += 1;
    }
    n
}

#[inline]
pub fn size_of_varlong(v: i64) -> usize {
    let mut u = ((v << 1) ^ (v >> 63)) as u64;
    let mut n = 1;
    while u >= 0x80 {
        u >>= 7;
        n += 1;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc_varint(v: i32) -> Vec<u8> {
        let mut o = Vec::new();
        write_varint(&mut o, v);
        o
    }

    #[test]
    fn sizes_match_encodings() {
        for v in [0i64, 1, -1, 63, 64, -64, -65, 8191, 8192, i32::MAX as i64, i32::MIN as i64, i64::MAX, i64::MIN] {
            let mut o = Vec::new();
            write_varlong(&mut o, v);
            assert_eq!(size_of_varlong(v), o.len(), "{v}");
            if let Ok(x) = i32::try_from(v) {
                assert_eq!(size_of_varint(x), enc_varint(x).len(), "{x}");
            }
            if let Ok(x) = u32::try_from(v) {
                let mut o = Vec::new();
                write_uvarint(&mut o, x);
                assert_eq!(size_of_uvarint(x), o.len(), "{x}");
            }
        }
    }

    #[test]
    fn known_encodings() {
        // Examples from Kafka's ByteUtils documentation and the format notes.
        assert_eq!(enc_varint(-1), vec![0x01]);
        assert_eq!(enc_varint(1), vec![0x02]);
        assert_eq!(enc_varint(300), vec![0xd8, 0x04]);
        let mut o = Vec::new();
        write_uvarint(&mut o, 300);
        assert_eq!(o, vec![0xac, 0x02]);
        let mut o = Vec::new();
        write_varlong(&mut o, -2);
        assert_eq!(o, vec![0x03]);
    }

    #[test]
    fn round_trip_extremes() {
        for v in [0, 1, -1, 63, -64, 64, i32::MAX, i32::MIN] {
            let b = enc_varint(v);
            assert_eq!(b.len(), size_of_varint(v));
            let mut p = 0;
            assert_eq!(read_varint(&b, &mut p), Some(v));
            assert_eq!(p, b.len());
        }
        for v in [0i64, -1, i64::MAX, i64::MIN, 1 << 40] {
            let mut b = Vec::new();
            write_varlong(&mut b, v);
            let mut p = 0;
            assert_eq!(read_varlong(&b, &mut p), Some(v));
        }
    }

    #[test]
    fn rejects_truncated_and_overlong() {
        let mut p = 0;
        assert_eq!(read_varint(&[0x80], &mut p), None);
        let mut p = 0;
        assert_eq!(read_uvarint(&[0xff, 0xff, 0xff, 0xff, 0x7f], &mut p), None);
    }
}
