//! What records are decoded from, shared by the batch objects (`batch`) and the record objects
//! (`record`): the bytes batches point into, a batch's records area, and one record's fields.

use super::errors::to_pyerr;
use crate::batch::{self, BatchHeader, RecordView};
use pyo3::prelude::*;
use std::sync::Arc;

/// Bytes that batches and records point into: a mapped file or an owned buffer.
pub enum Backing {
    Mmap(memmap2::Mmap),
    Vec(Vec<u8>),
}

impl Backing {
    /// Faults the whole mapping in at once before a full pass over it (madvise calls instead of a
    /// page fault per 4 KiB page), on every core. Best effort: older kernels lack
    /// MADV_POPULATE_READ. Call it without the GIL: a large file takes milliseconds.
    pub fn prefetch(&self) {
        if let Backing::Mmap(m) = self {
            #[cfg(target_os = "linux")]
            {
                // in 16 MiB pieces spread over the cores: the kernel fills page tables in parallel
                use rayon::prelude::*;
                const PIECE: usize = 16 << 20;
                (0..m.len().div_ceil(PIECE)).into_par_iter().for_each(|i| {
                    let start = i * PIECE;
                    let _ = m.advise_range(memmap2::Advice::PopulateRead, start, PIECE.min(m.len() - start));
                });
            }
        }
    }

    #[inline]
    pub fn bytes(&self) -> &[u8] {
        match self {
            Backing::Mmap(m) => m,
            Backing::Vec(v) => v,
        }
    }
}

/// Where a record's bytes live: inside the batch's backing (uncompressed) or a decompressed copy.
#[derive(Clone)]
pub enum RecBuf {
    Shared(Arc<Backing>, usize),
    Owned(Arc<Vec<u8>>),
}

impl RecBuf {
    #[inline]
    pub fn bytes(&self) -> &[u8] {
        match self {
            RecBuf::Shared(b, start) => &b.bytes()[*start..],
            RecBuf::Owned(v) => v,
        }
    }
}

/// The fields of one record, as decoded from its batch.
pub struct Fields<'a> {
    pub offset: i64,
    pub timestamp: i64,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub sequence: i32,
    pub attributes: i8,
    pub size_in_bytes: u32,
    /// Set when the record has headers: the bytes and view to decode them from.
    pub headers: Option<(RecBuf, RecordView)>,
    /// (control_type, key_version) for a record of a control batch.
    pub control: Option<(i16, i16)>,
}

/// What the records of one batch are decoded from: its header and its records area.
pub struct RecordSource {
    pub h: BatchHeader,
    pub buf: RecBuf,
    pub len: usize,
    pub position: u64,
    pub file: Option<Arc<str>>,
}

impl RecordSource {
    /// The records area.
    #[inline]
    pub fn data(&self) -> &[u8] {
        &self.buf.bytes()[..self.len]
    }

    /// The fields of the record `v` of this batch (a control record's key is decoded).
    #[inline(always)]
    pub fn fields(&self, v: batch::RecordView) -> Result<Fields<'_>, crate::error::Error> {
        let h = &self.h;
        let d = self.data();
        let offset = h.base_offset + v.offset_delta as i64;
        let timestamp = if h.is_log_append_time() { h.max_timestamp } else { h.base_timestamp.wrapping_add(v.timestamp_delta) };
        let key = slice(d, &v.key);
        let control = if h.is_control() {
            let (ver, t) = batch::parse_control_key(key)
                .map_err(|reason| crate::error::Error::corrupt(self.position, Some(h.base_offset), format!("record at offset {offset}: {reason}")))?;
            Some((t, ver))
        } else {
            None
        };
        Ok(Fields {
            offset,
            timestamp,
            key,
            value: slice(d, &v.value),
            sequence: h.record_sequence(v.offset_delta),
            attributes: v.attributes,
            size_in_bytes: v.size,
            control,
            headers: if v.header_count > 0 { Some((self.buf.clone(), v)) } else { None },
        })
    }

    /// `e` as the Python exception, naming this batch's file.
    pub fn error(&self, py: Python<'_>, e: &crate::error::Error) -> PyErr {
        to_pyerr(py, e, self.file.as_deref())
    }
}

#[inline]
fn slice<'a>(d: &'a [u8], r: &Option<std::ops::Range<u32>>) -> Option<&'a [u8]> {
    r.as_ref().map(|r| &d[r.start as usize..r.end as usize])
}
