//! JNI entry points of the core's record scan (`_core::arrow::RecordScanner`) for the JVM Spark
//! reader (`python/kraftkit/spark/jvm/src/io/kraftkit/spark/KraftNative.java`). Glue only: the
//! core walks the batches and builds the Arrow column buffers (validity bitmaps, offsets,
//! values); this library hands them to Java by copying them into the buffers of Arrow vectors
//! Java allocated at the sizes `next` reports. No policy here: which files and byte ranges to
//! read is planned in Python (`kraftkit.spark.datasource`), what to do with the rows in Java.
//!
//! A scan is a handle (a boxed [`Scan`] as a `long`): `open`/`openBytes`, then `next` until it
//! returns 0, `fill` for each column of each chunk, and `close` once (Java guarantees it).
//! Errors are Java exceptions (`java.io.IOException` naming the file, `IllegalArgumentException`
//! for a bad column), never a crash: a panic in the core is caught and thrown as
//! `IllegalStateException`.

use _core::arrow::{self, Bitmap, Bools, ColumnMask, Columns, Prim, RecordScanner, ScanOptions, Var};
use _core::fsutil;
use jni::objects::{JByteArray, JClass, JIntArray, JString};
use jni::sys::{jint, jlong};
use jni::JNIEnv;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

enum Data {
    Map(memmap2::Mmap),
    Vec(Vec<u8>),
}

impl Data {
    fn bytes(&self) -> &[u8] {
        match self {
            Data::Map(m) => m,
            Data::Vec(v) => v,
        }
    }
}

/// One scan of a byte range of one file, and the chunk `next` made last.
pub struct Scan {
    data: Data,
    pos: usize,
    end: usize,
    opts: ScanOptions,
    done: bool,
    chunk: Option<Columns>,
}

impl Scan {
    fn next(&mut self) -> Option<&Columns> {
        self.chunk = None;
        while !self.done {
            let mut s = RecordScanner::new(self.data.bytes(), self.pos, self.end, self.opts);
            let c = s.next_chunk();
            self.pos = s.position();
            self.done = s.is_done() || c.is_none();
            if let Some(c) = c.filter(|c| c.rows > 0) {
                self.chunk = Some(c);
                break;
            }
        }
        self.chunk.as_ref()
    }
}

fn options(mask: jint, min_offset: jlong, max_offset: jlong, chunk_rows: jint) -> Result<ScanOptions, String> {
    let all = ColumnMask::ALL.0;
    let m = u32::try_from(mask).map_err(|_| format!("column mask {mask}"))?;
    if m & !all != 0 {
        return Err(format!("column mask {mask} names columns beyond the {} the core builds", arrow::COLUMNS.len()));
    }
    if chunk_rows < 1 {
        return Err(format!("chunk rows must be positive, not {chunk_rows}"));
    }
    Ok(ScanOptions { columns: ColumnMask(m), min_offset, max_offset, chunk_rows: chunk_rows as usize, ..ScanOptions::default() })
}

fn range(len: usize, start: jlong, end: jlong) -> (usize, usize) {
    let end = if end < 0 { len } else { (end as u64).min(len as u64) as usize };
    let start = (start.max(0) as u64).min(end as u64) as usize;
    (start, end)
}

/// Runs `f`, turning a panic into a Java exception (and `fallback` as the value).
fn guarded<T>(env: &mut JNIEnv, fallback: T, f: impl FnOnce(&mut JNIEnv) -> T) -> T {
    match catch_unwind(AssertUnwindSafe(|| f(env))) {
        Ok(v) => v,
        Err(p) => {
            let what = p.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| p.downcast_ref::<String>().cloned()).unwrap_or_default();
            let _ = env.throw_new("java/lang/IllegalStateException", format!("kraftkit core panicked: {what}"));
            fallback
        }
    }
}

fn into_handle(scan: Scan) -> jlong {
    Box::into_raw(Box::new(scan)) as jlong
}

/// # Safety
/// `h` is a handle from `open`/`openBytes` not yet closed.
unsafe fn scan_of<'a>(h: jlong) -> &'a mut Scan {
    &mut *(h as *mut Scan)
}

/// `open(path, start, end, mask, minOffset, maxOffset, chunkRows)`: a scan of the local file
/// `path` (memory-mapped), bytes `[start, end)` (`end` < 0: to the end; `start` a batch
/// boundary), the columns of `mask` (bit i: `arrow::COLUMNS[i]`), offsets in
/// `[minOffset, maxOffset)`.
#[no_mangle]
pub extern "system" fn Java_io_kraftkit_spark_KraftNative_open<'l>(
    mut env: JNIEnv<'l>,
    _cls: JClass<'l>,
    path: JString<'l>,
    start: jlong,
    end: jlong,
    mask: jint,
    min_offset: jlong,
    max_offset: jlong,
    chunk_rows: jint,
) -> jlong {
    guarded(&mut env, 0, |env| {
        let path: String = match env.get_string(&path) {
            Ok(s) => s.into(),
            Err(_) => return 0, // a NullPointerException is pending
        };
        let opts = match options(mask, min_offset, max_offset, chunk_rows) {
            Ok(o) => o,
            Err(e) => {
                let _ = env.throw_new("java/lang/IllegalArgumentException", e);
                return 0;
            }
        };
        let data = match fsutil::map_input(Path::new(&path)) {
            Ok(Some(m)) => Data::Map(m),
            Ok(None) => Data::Vec(Vec::new()),
            Err(e) => {
                let _ = env.throw_new("java/io/IOException", format!("{path}: {e}"));
                return 0;
            }
        };
        let (pos, end) = range(data.bytes().len(), start, end);
        into_handle(Scan { data, pos, end, opts, done: false, chunk: None })
    })
}

/// `openBytes(bytes, start, end, mask, minOffset, maxOffset, chunkRows)`: as `open`, over a
/// file's bytes read by Java (a file system the core cannot map).
#[no_mangle]
pub extern "system" fn Java_io_kraftkit_spark_KraftNative_openBytes<'l>(
    mut env: JNIEnv<'l>,
    _cls: JClass<'l>,
    bytes: JByteArray<'l>,
    start: jlong,
    end: jlong,
    mask: jint,
    min_offset: jlong,
    max_offset: jlong,
    chunk_rows: jint,
) -> jlong {
    guarded(&mut env, 0, |env| {
        let opts = match options(mask, min_offset, max_offset, chunk_rows) {
            Ok(o) => o,
            Err(e) => {
                let _ = env.throw_new("java/lang/IllegalArgumentException", e);
                return 0;
            }
        };
        let Ok(v) = env.convert_byte_array(&bytes) else {
            return 0; // an exception is pending
        };
        let data = Data::Vec(v);
        let (pos, end) = range(data.bytes().len(), start, end);
        into_handle(Scan { data, pos, end, opts, done: false, chunk: None })
    })
}

fn var_len(v: &Var) -> usize {
    v.data.len()
}

/// `next(handle, sizes)`: the next chunk's row count (0: the scan is done); `sizes[i]` is set to
/// the data bytes of variable-width column i (the other entries to 0).
#[no_mangle]
pub extern "system" fn Java_io_kraftkit_spark_KraftNative_next<'l>(mut env: JNIEnv<'l>, _cls: JClass<'l>, handle: jlong, sizes: JIntArray<'l>) -> jint {
    guarded(&mut env, 0, |env| {
        // SAFETY: Java passes a live handle
        let scan = unsafe { scan_of(handle) };
        let mut out = [0i32; arrow::COLUMNS.len()];
        let rows = match scan.next() {
            None => 0,
            Some(c) => {
                for (i, v) in [(arrow::CONTROL_TYPE, &c.control_type), (arrow::RECORD_TYPE, &c.record_type), (arrow::RECORD, &c.record), (arrow::VALUE, &c.value), (arrow::ERROR, &c.error)] {
                    // a chunk ends at 64 MiB of strings (ScanOptions::chunk_bytes) plus one batch
                    out[i] = i32::try_from(var_len(v)).unwrap_or(i32::MAX);
                }
                c.rows as jint
            }
        };
        let _ = env.set_int_array_region(&sizes, 0, &out);
        rows
    })
}

/// Copies `src` to the `dst` address (nothing for a null address).
///
/// # Safety
/// `dst` is null or writable for `src.len()` bytes.
unsafe fn put(dst: jlong, src: &[u8]) {
    if dst != 0 && !src.is_empty() {
        std::ptr::copy_nonoverlapping(src.as_ptr(), dst as *mut u8, src.len());
    }
}

fn bytes_of<T: Copy>(v: &[T]) -> &[u8] {
    // SAFETY: plain integers (i32/i64) seen as their bytes
    unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) }
}

fn bitmap(b: &Bitmap) -> &[u8] {
    &b.bytes
}

fn prim<T: Copy>(p: &Prim<T>) -> (&[u8], &[u8], &[u8]) {
    (bitmap(&p.validity), &[], bytes_of(&p.values))
}

fn bools(b: &Bools) -> (&[u8], &[u8], &[u8]) {
    (bitmap(&b.validity), &[], bitmap(&b.values))
}

fn var(v: &Var) -> (&[u8], &[u8], &[u8]) {
    (bitmap(&v.validity), bytes_of(&v.offsets), &v.data)
}

/// `fill(handle, column, validity, offsets, values)`: copies column `column` of the last chunk
/// into Arrow buffers at these addresses: the validity bitmap (`(rows + 7) / 8` bytes), the
/// offsets of a variable-width column (`(rows + 1) * 4` bytes; 0 for the others) and the
/// values (`rows` x 8 or 4 bytes, a bitmap for booleans, `sizes[column]` bytes of data).
#[no_mangle]
pub extern "system" fn Java_io_kraftkit_spark_KraftNative_fill<'l>(
    mut env: JNIEnv<'l>,
    _cls: JClass<'l>,
    handle: jlong,
    column: jint,
    validity: jlong,
    offsets: jlong,
    values: jlong,
) {
    guarded(&mut env, (), |env| {
        // SAFETY: Java passes a live handle
        let scan = unsafe { scan_of(handle) };
        let Some(c) = scan.chunk.as_ref() else {
            let _ = env.throw_new("java/lang/IllegalStateException", "fill without a chunk");
            return;
        };
        let parts = match column as usize {
            arrow::BASE_OFFSET => prim(&c.base_offset),
            arrow::OFFSET => prim(&c.offset),
            arrow::EPOCH => prim(&c.epoch),
            arrow::TIMESTAMP => prim(&c.timestamp),
            arrow::CRC_VALID => bools(&c.crc_valid),
            arrow::IS_CONTROL => bools(&c.is_control),
            arrow::CONTROL_TYPE => var(&c.control_type),
            arrow::RECORD_TYPE => var(&c.record_type),
            arrow::RECORD_VERSION => prim(&c.record_version),
            arrow::RECORD => var(&c.record),
            arrow::VALUE => var(&c.value),
            arrow::POSITION => prim(&c.position),
            arrow::ERROR => var(&c.error),
            _ => {
                let _ = env.throw_new("java/lang/IllegalArgumentException", format!("no column {column}"));
                return;
            }
        };
        if !scan.opts.columns.has(column as usize) {
            let _ = env.throw_new("java/lang/IllegalArgumentException", format!("column {} was not asked for", arrow::COLUMNS[column as usize]));
            return;
        }
        // SAFETY: Java allocated the buffers at the sizes `next` reported for this chunk
        unsafe {
            put(validity, parts.0);
            put(offsets, parts.1);
            put(values, parts.2);
        }
    })
}

/// `close(handle)`: frees the scan (the file's map with it).
#[no_mangle]
pub extern "system" fn Java_io_kraftkit_spark_KraftNative_close<'l>(_env: JNIEnv<'l>, _cls: JClass<'l>, handle: jlong) {
    if handle != 0 {
        // SAFETY: Java closes each handle once
        drop(unsafe { Box::from_raw(handle as *mut Scan) });
    }
}
