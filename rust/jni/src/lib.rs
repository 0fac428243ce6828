//! JNI entry points of the core's record scan (`_core::arrow::RecordScanner`) for the JVM Spark
//! reader (`python/kraftkit/spark/jvm/src/io/kraftkit/spark/KraftNative.java`). Glue only: the
//! core walks the batches and builds the Arrow column buffers (validity bitmaps, offsets,
//! values); this library hands Java their addresses, which it reads in place until the next
//! chunk (`NativeColumn`). No policy here: which files and byte ranges to
//! read is planned in Python (`kraftkit.spark.datasource`), what to do with the rows in Java.
//!
//! A scan is a handle (a boxed [`Scan`] as a `long`): `open`/`openBytes`, then `next` until it
//! returns 0, `columns` for each chunk, and `close` once (Java guarantees it).
//! Errors are Java exceptions (`java.io.IOException` naming the file, `IllegalArgumentException`
//! for a bad column), never a crash: a panic in the core is caught and thrown as
//! `IllegalStateException`.

use _core::arrow::{self, Bitmap, Bools, ColumnMask, Columns, Prim, RecordScanner, ScanOptions, Var};
use _core::fsutil;
use jni::objects::{JByteArray, JClass, JLongArray, JString};
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

/// One scan of a byte range of one file, and the chunk `next` made last (its buffers reused
/// from chunk to chunk).
pub struct Scan {
    data: Data,
    pos: usize,
    end: usize,
    opts: ScanOptions,
    done: bool,
    chunk: Columns,
    has_chunk: bool,
}

impl Scan {
    fn new(data: Data, start: jlong, end: jlong, opts: ScanOptions) -> Scan {
        let (pos, end) = range(data.bytes().len(), start, end);
        if let Data::Map(m) = &data {
            // the range's pages mapped in one call rather than one fault each (Linux 5.14 or
            // later; elsewhere the scan faults them in as it goes)
            let _ = m.advise_range(memmap2::Advice::PopulateRead, pos, end - pos);
        }
        Scan { data, pos, end, opts, done: false, chunk: Columns::default(), has_chunk: false }
    }

    fn next(&mut self) -> Option<&Columns> {
        self.has_chunk = false;
        while !self.done {
            let mut s = RecordScanner::new(self.data.bytes(), self.pos, self.end, self.opts);
            let more = s.fill_chunk(&mut self.chunk);
            self.pos = s.position();
            self.done = s.is_done() || !more;
            if more && self.chunk.rows > 0 {
                self.has_chunk = true;
                break;
            }
        }
        self.has_chunk.then_some(&self.chunk)
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
        into_handle(Scan::new(data, start, end, opts))
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
        into_handle(Scan::new(data, start, end, opts))
    })
}

/// `next(handle)`: the next chunk's row count (0: the scan is done).
#[no_mangle]
pub extern "system" fn Java_io_kraftkit_spark_KraftNative_next<'l>(mut env: JNIEnv<'l>, _cls: JClass<'l>, handle: jlong) -> jint {
    guarded(&mut env, 0, |_env| {
        // SAFETY: Java passes a live handle
        let scan = unsafe { scan_of(handle) };
        scan.next().map_or(0, |c| c.rows as jint)
    })
}

/// A column's buffers: the validity bitmap, the offsets (variable-width columns; else null),
/// the values (or data), and how many rows are null.
fn buffers<'a>(v: &'a Bitmap, offsets: Option<&'a [i32]>, values: *const u8) -> [jlong; 4] {
    let at = |p: *const u8| p as usize as jlong;
    [at(v.bytes.as_ptr()), offsets.map_or(0, |o| at(o.as_ptr().cast())), at(values), v.unset as jlong]
}

fn prim<T: Copy>(p: &Prim<T>) -> [jlong; 4] {
    buffers(&p.validity, None, p.values.as_ptr().cast())
}

fn bools(b: &Bools) -> [jlong; 4] {
    buffers(&b.validity, None, b.values.bytes.as_ptr())
}

fn var(v: &Var) -> [jlong; 4] {
    buffers(&v.validity, Some(&v.offsets), v.data.as_ptr())
}

/// `columns(handle, out)`: where the last chunk's columns are, read in place by Java
/// (`NativeColumn`): for core column i, `out[4i..4i+4]` = the address of its validity bitmap
/// (Arrow layout, LSB first), of its `rows + 1` i32 offsets (strings and bytes; else 0), of its
/// values (i64 or i32 little-endian, a bitmap for booleans, the bytes of strings), and its null
/// count; zeros for a column not asked for. The buffers stay put until the next `next` or
/// `close`.
#[no_mangle]
pub extern "system" fn Java_io_kraftkit_spark_KraftNative_columns<'l>(mut env: JNIEnv<'l>, _cls: JClass<'l>, handle: jlong, out: JLongArray<'l>) {
    guarded(&mut env, (), |env| {
        // SAFETY: Java passes a live handle
        let scan = unsafe { scan_of(handle) };
        let Some(c) = scan.has_chunk.then_some(&scan.chunk) else {
            let _ = env.throw_new("java/lang/IllegalStateException", "columns without a chunk");
            return;
        };
        let mut addrs = [0 as jlong; 4 * arrow::COLUMNS.len()];
        for (i, a) in addrs.chunks_exact_mut(4).enumerate() {
            if !scan.opts.columns.has(i) {
                continue;
            }
            a.copy_from_slice(&match i {
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
                _ => var(&c.error),
            });
        }
        let _ = env.set_long_array_region(&out, 0, &addrs);
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
