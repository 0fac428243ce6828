//! The Arrow buffers a scan fills: validity bitmaps, fixed-width, boolean and variable-width
//! columns, and one chunk of rows ([`Columns`]).

/// An Arrow validity bitmap (LSB first), or a boolean column's values.
#[derive(Debug, Default, Clone)]
pub struct Bitmap {
    pub bytes: Vec<u8>,
    pub len: usize,
    /// Bits that are 0 (nulls, for a validity bitmap).
    pub unset: usize,
}

impl Bitmap {
    #[inline(always)]
    pub fn push(&mut self, v: bool) {
        let bit = self.len & 7;
        if bit == 0 {
            self.bytes.push(0);
        }
        if v {
            *self.bytes.last_mut().unwrap() |= 1 << bit;
        } else {
            self.unset += 1;
        }
        self.len += 1;
    }
    pub fn get(&self, i: usize) -> bool {
        self.bytes[i >> 3] & (1 << (i & 7)) != 0
    }
    fn clear(&mut self) {
        self.bytes.clear();
        self.len = 0;
        self.unset = 0;
    }
}

/// A nullable fixed-width column.
#[derive(Debug, Default, Clone)]
pub struct Prim<T> {
    pub values: Vec<T>,
    pub validity: Bitmap,
}

impl<T: Copy + Default> Prim<T> {
    fn clear(&mut self) {
        self.values.clear();
        self.validity.clear();
    }
    #[inline(always)]
    pub(super) fn push(&mut self, v: Option<T>) {
        self.validity.push(v.is_some());
        self.values.push(v.unwrap_or_default());
    }
}

/// A nullable boolean column.
#[derive(Debug, Default, Clone)]
pub struct Bools {
    pub values: Bitmap,
    pub validity: Bitmap,
}

impl Bools {
    fn clear(&mut self) {
        self.values.clear();
        self.validity.clear();
    }
    #[inline(always)]
    pub(super) fn push(&mut self, v: Option<bool>) {
        self.validity.push(v.is_some());
        self.values.push(v.unwrap_or(false));
    }
}

/// A nullable variable-width column (utf8 or binary): i32 offsets and the bytes.
#[derive(Debug, Clone)]
pub struct Var {
    pub offsets: Vec<i32>,
    pub data: Vec<u8>,
    pub validity: Bitmap,
}

impl Default for Var {
    fn default() -> Self {
        Var { offsets: vec![0], data: Vec::new(), validity: Bitmap::default() }
    }
}

impl Var {
    #[inline(always)]
    pub fn push(&mut self, v: Option<&[u8]>) {
        self.validity.push(v.is_some());
        if let Some(b) = v {
            self.data.extend_from_slice(b);
        }
        self.offsets.push(self.data.len() as i32);
    }
    pub fn get(&self, i: usize) -> Option<&[u8]> {
        if !self.validity.get(i) {
            return None;
        }
        Some(&self.data[self.offsets[i] as usize..self.offsets[i + 1] as usize])
    }
    pub fn len(&self) -> usize {
        self.validity.len
    }
    fn clear(&mut self) {
        self.offsets.clear();
        self.offsets.push(0);
        self.data.clear();
        self.validity.clear();
    }
    pub fn is_empty(&self) -> bool {
        self.validity.len == 0
    }
}

/// One chunk of rows; columns not asked for stay empty.
#[derive(Debug, Default, Clone)]
pub struct Columns {
    pub rows: usize,
    pub base_offset: Prim<i64>,
    pub offset: Prim<i64>,
    pub epoch: Prim<i32>,
    pub timestamp: Prim<i64>,
    pub crc_valid: Bools,
    pub is_control: Bools,
    pub control_type: Var,
    pub record_type: Var,
    pub record_version: Prim<i32>,
    pub record: Var,
    pub value: Var,
    pub position: Prim<i64>,
    pub error: Var,
    /// Bytes of record data in this chunk (a budget, so a chunk's offsets stay far from i32).
    pub(super) bytes: usize,
}

impl Columns {
    /// No rows, the buffers' room kept for the next chunk.
    pub fn clear(&mut self) {
        self.rows = 0;
        self.bytes = 0;
        for p in [&mut self.base_offset, &mut self.offset, &mut self.timestamp, &mut self.position] {
            p.clear();
        }
        self.epoch.clear();
        self.record_version.clear();
        self.crc_valid.clear();
        self.is_control.clear();
        for v in [&mut self.control_type, &mut self.record_type, &mut self.record, &mut self.value, &mut self.error] {
            v.clear();
        }
    }
}
