//! Values of KRaft control records (LeaderChangeMessage, SnapshotHeader, SnapshotFooter,
//! KRaftVersion, Voters), rendered as the JSON Kafka's generated converters print.
//! Hand-written for the dump tool; the schema-driven codec of the metadata layer supersedes it.

use base64::Engine;

struct Reader<'a> {
    b: &'a [u8],
    pos: usize,
}

type R<T> = Result<T, String>;

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> R<&'a [u8]> {
        if self.b.len() - self.pos < n {
            return Err(format!("value truncated at byte {}", self.pos));
        }
        let s = &self.b[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    fn i16(&mut self) -> R<i16> {
        Ok(i16::from_be_bytes(self.take(2)?.try_into().unwrap()))
    }
    fn u16(&mut self) -> R<u16> {
        Ok(u16::from_be_bytes(self.take(2)?.try_into().unwrap()))
    }
    fn i32(&mut self) -> R<i32> {
        Ok(i32::from_be_bytes(self.take(4)?.try_into().unwrap()))
    }
    fn i64(&mut self) -> R<i64> {
        Ok(i64::from_be_bytes(self.take(8)?.try_into().unwrap()))
    }
    fn uvarint(&mut self) -> R<u32> {
        crate::varint::read_uvarint(self.b, &mut self.pos).ok_or_else(|| format!("bad varint at byte {}", self.pos))
    }
    /// Compact array length (n + 1; 0 = null).
    fn compact_len(&mut self) -> R<Option<usize>> {
        let n = self.uvarint()?;
        Ok(if n == 0 { None } else { Some(n as usize - 1) })
    }
    fn compact_string(&mut self) -> R<Option<String>> {
        match self.compact_len()? {
            None => Ok(None),
            Some(n) => Ok(Some(String::from_utf8_lossy(self.take(n)?).into_owned())),
        }
    }
    fn uuid(&mut self) -> R<String> {
        Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(self.take(16)?))
    }
    /// Skips a tagged-field section (unknown fields are not printed by Kafka's converters).
    fn tagged(&mut self) -> R<()> {
        let n = self.uvarint()?;
        for _ in 0..n {
            self.uvarint()?;
            let size = self.uvarint()? as usize;
            self.take(size)?;
        }
        Ok(())
    }
    fn done(&self) -> R<()> {
        if self.pos != self.b.len() {
            return Err(format!("{} bytes left after the value", self.b.len() - self.pos));
        }
        Ok(())
    }
}

fn json_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

fn voters_list(r: &mut Reader, with_dir: bool, out: &mut String) -> R<()> {
    let n = r.compact_len()?.ok_or("null voters array")?;
    out.push('[');
    for i in 0..n {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&format!("{{\"voterId\":{}", r.i32()?));
        if with_dir {
            out.push_str(&format!(",\"voterDirectoryId\":\"{}\"", r.uuid()?));
        }
        r.tagged()?;
        out.push('}');
    }
    out.push(']');
    Ok(())
}

/// Renders a control record value for control type `t`: (label Kafka prints, JSON).
/// Returns None for types without a JSON form (transaction markers, unknown).
pub fn render(t: i16, value: &[u8]) -> Option<(&'static str, R<String>)> {
    let label = match t {
        2 => "LeaderChange:",
        3 => "SnapshotHeader",
        4 => "SnapshotFooter",
        5 => "KRaftVersion",
        6 => "KRaftVoters",
        _ => return None,
    };
    Some((label, render_json(t, value)))
}

fn render_json(t: i16, value: &[u8]) -> R<String> {
    let mut r = Reader { b: value, pos: 0 };
    let version = r.i16()?;
    let mut out = format!("{{\"version\":{version}");
    match t {
        2 => {
            if !(0..=1).contains(&version) {
                return Err(format!("unsupported LeaderChangeMessage version {version}"));
            }
            out.push_str(&format!(",\"leaderId\":{},\"voters\":", r.i32()?));
            voters_list(&mut r, version >= 1, &mut out)?;
            out.push_str(",\"grantingVoters\":");
            voters_list(&mut r, version >= 1, &mut out)?;
        }
        3 => out.push_str(&format!(",\"lastContainedLogTimestamp\":{}", r.i64()?)),
        4 => {}
        5 => out.push_str(&format!(",\"kRaftVersion\":{}", r.i16()?)),
        6 => {
            out.push_str(",\"voters\":[");
            let n = r.compact_len()?.ok_or("null voters array")?;
            for i in 0..n {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&format!("{{\"voterId\":{},\"voterDirectoryId\":\"{}\",\"endpoints\":[", r.i32()?, r.uuid()?));
                let m = r.compact_len()?.ok_or("null endpoints array")?;
                for j in 0..m {
                    if j > 0 {
                        out.push(',');
                    }
                    out.push_str("{\"name\":");
                    json_string(&r.compact_string()?.ok_or("null endpoint name")?, &mut out);
                    out.push_str(",\"host\":");
                    json_string(&r.compact_string()?.ok_or("null endpoint host")?, &mut out);
                    out.push_str(&format!(",\"port\":{}}}", r.u16()?));
                    r.tagged()?;
                }
                let (min, max) = (r.i16()?, r.i16()?);
                r.tagged()?;
                out.push_str(&format!("],\"kRaftVersionFeature\":{{\"minSupportedVersion\":{min},\"maxSupportedVersion\":{max}}}}}"));
                r.tagged()?;
            }
            out.push(']');
        }
        _ => unreachable!(),
    }
    r.tagged()?;
    r.done()?;
    out.push('}');
    Ok(out)
}

#[cfg(test)]
mod tests {
    /// Worked examples (b) and (d) of shared/reference/kafka-formats.md §2.7.
    #[test]
    fn reference_examples() {
        let header = [0x00, 0x00, 0x00, 0x00, 0x01, 0x8b, 0xcf, 0xe5, 0x68, 0x00, 0x00];
        assert_eq!(super::render(3, &header).unwrap().1.unwrap(), r#"{"version":0,"lastContainedLogTimestamp":1700000000000}"#);
        let lc = hex("0000 00000001 04 00000001 00 00000002 00 00000003 00 03 00000001 00 00000002 00 00");
        assert_eq!(
            super::render(2, &lc).unwrap().1.unwrap(),
            r#"{"version":0,"leaderId":1,"voters":[{"voterId":1},{"voterId":2},{"voterId":3}],"grantingVoters":[{"voterId":1},{"voterId":2}]}"#
        );
        assert!(super::render(2, &lc[..lc.len() - 2]).unwrap().1.is_err());
    }

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }
}
