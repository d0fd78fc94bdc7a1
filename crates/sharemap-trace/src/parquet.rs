//! Parquet traces: one row per access with columns thread (uint32), addr (uint64),
//! size (uint32), kind ("R"/"W"), so pandas, polars and duckdb read them directly.
//! The trace metadata and the events (with their positions) are kept in the file's
//! key-value metadata under `sharemap.metadata` and `sharemap.events` (JSON), which makes
//! native -> Parquet -> native lossless.

use crate::batch::Chunk;
use crate::error::{Result, TraceError, excerpt};
use crate::model::{Access, Event, Kind, MAX_THREADS, Metadata, Source};
use arrow_array::{Array, ArrayRef, RecordBatch, StringArray, UInt32Array, UInt64Array};
use arrow_schema::{DataType, Field, Schema};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::{ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder};
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub const META_KEY: &str = "sharemap.metadata";
pub const EVENTS_KEY: &str = "sharemap.events";
/// CRC-32 (hex) of the rows as sharemap wrote them. The crate writes no page checksums, so
/// this is what lets a reader notice a damaged file; files from other writers lack it.
pub const ROWS_CRC_KEY: &str = "sharemap.rows-crc32";

thread_local! {
    /// Set while this thread runs the Parquet decoders under `contained`.
    static DECODING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs Parquet decoding with its panics turned into errors. The crate asserts on some
/// damaged inputs (a run-length header of more than 10 bytes, for one); a damaged file must
/// give the user one line, not a panic. Panics of contained code are not printed.
fn contained<T>(path: &Path, f: impl FnOnce() -> Result<T>) -> Result<T> {
    static QUIET_HOOK: std::sync::Once = std::sync::Once::new();
    QUIET_HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !DECODING.with(|d| d.get()) {
                previous(info)
            }
        }));
    });
    DECODING.with(|d| d.set(true));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    DECODING.with(|d| d.set(false));
    result.unwrap_or_else(|panic| {
        let why = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        Err(TraceError::invalid(path, format!("damaged Parquet file (the decoder stopped: {})", excerpt(&why))))
    })
}

/// CRC-32 over every row in order (thread, addr, size as little-endian integers, then 'R' or
/// 'W'), whatever the batches the rows arrive in.
#[derive(Default)]
struct RowDigest {
    hasher: crc32fast::Hasher,
    buf: Vec<u8>,
}

impl RowDigest {
    fn add(&mut self, a: &crate::batch::AccessBatch) {
        self.buf.clear();
        for i in 0..a.len() {
            self.buf.extend_from_slice(&a.thread[i].to_le_bytes());
            self.buf.extend_from_slice(&a.addr[i].to_le_bytes());
            self.buf.extend_from_slice(&a.size(i).to_le_bytes());
            self.buf.push(if a.op[i] & 0x80 != 0 { b'W' } else { b'R' });
        }
        self.hasher.update(&self.buf);
    }

    fn hex(self) -> String {
        format!("{:08x}", self.hasher.finalize())
    }
}

fn schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("thread", DataType::UInt32, false),
        Field::new("addr", DataType::UInt64, false),
        Field::new("size", DataType::UInt32, false),
        Field::new("kind", DataType::Utf8, false),
    ]))
}

pub struct ParquetWriter<W: Write + Send> {
    writer: ArrowWriter<W>,
    meta: Metadata,
    events: Vec<Event>,
    digest: RowDigest,
}

impl<W: Write + Send> ParquetWriter<W> {
    pub fn new(out: W, meta: Metadata) -> std::result::Result<Self, parquet::errors::ParquetError> {
        let props = WriterProperties::builder()
            .set_compression(Compression::ZSTD(ZstdLevel::try_new(3)?))
            .set_max_row_group_row_count(Some(1 << 20))
            .build();
        Ok(ParquetWriter {
            writer: ArrowWriter::try_new(out, schema(), Some(props))?,
            meta,
            events: Vec::new(),
            digest: RowDigest::default(),
        })
    }

    /// The recorded run's wall-clock time, for the file's metadata.
    pub fn set_run_ns(&mut self, ns: u64) {
        self.meta.run_ns = Some(ns.max(1));
    }

    /// The recording host's NUMA node of each CPU, for the file's metadata.
    pub fn set_host_cpu_nodes(&mut self, nodes: Vec<u32>) {
        self.meta.host_cpu_nodes = nodes;
    }

    pub fn write_chunk(&mut self, chunk: &Chunk) -> std::result::Result<(), parquet::errors::ParquetError> {
        self.events.extend(chunk.events.iter().cloned());
        let a = &chunk.accesses;
        if a.is_empty() {
            return Ok(());
        }
        for &t in &a.thread {
            self.meta.threads = self.meta.threads.max(t + 1);
        }
        self.digest.add(a);
        let kinds: StringArray = a.op.iter().map(|&op| Some(if op & 0x80 != 0 { "W" } else { "R" })).collect();
        let sizes: Vec<u32> = (0..a.len()).map(|i| a.size(i)).collect();
        let columns: Vec<ArrayRef> = vec![
            Arc::new(UInt32Array::from(a.thread.clone())),
            Arc::new(UInt64Array::from(a.addr.clone())),
            Arc::new(UInt32Array::from(sizes)),
            Arc::new(kinds),
        ];
        let batch = RecordBatch::try_new(schema(), columns)?;
        self.writer.write(&batch)
    }

    pub fn finish(mut self) -> std::result::Result<W, parquet::errors::ParquetError> {
        let meta =
            serde_json::to_string(&self.meta).map_err(|e| parquet::errors::ParquetError::General(e.to_string()))?;
        let events =
            serde_json::to_string(&self.events).map_err(|e| parquet::errors::ParquetError::General(e.to_string()))?;
        self.writer.append_key_value_metadata(KeyValue::new(META_KEY.to_string(), meta));
        self.writer.append_key_value_metadata(KeyValue::new(EVENTS_KEY.to_string(), events));
        let crc = std::mem::take(&mut self.digest).hex();
        self.writer.append_key_value_metadata(KeyValue::new(ROWS_CRC_KEY.to_string(), crc));
        self.writer.into_inner()
    }
}

pub struct ParquetReader {
    path: PathBuf,
    batches: ParquetRecordBatchReader,
    meta: Metadata,
    events: Vec<Event>,
    next_event: usize,
    next_index: u64,
    total: u64,
    /// The CRC the writer stored, checked once the last row is read.
    expected_crc: Option<String>,
    digest: RowDigest,
}

impl ParquetReader {
    pub fn open(path: &Path) -> Result<Self> {
        contained(path, || Self::open_inner(path))
    }

    fn open_inner(path: &Path) -> Result<Self> {
        let file = File::open(path).map_err(|e| TraceError::io(path, e))?;
        let bad =
            |e: parquet::errors::ParquetError| TraceError::invalid(path, format!("not a readable Parquet file: {e}"));
        let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(bad)?;
        let schema = builder.schema().clone();
        for name in ["thread", "addr", "size", "kind"] {
            if schema.field_with_name(name).is_err() {
                return Err(TraceError::invalid(
                    path,
                    format!("Parquet trace lacks column '{name}' (needs thread, addr, size, kind)"),
                ));
            }
        }
        let file_meta = builder.metadata().file_metadata();
        let total = file_meta.num_rows().max(0) as u64;
        let kv = |key: &str| {
            file_meta.key_value_metadata().and_then(|v| v.iter().find(|k| k.key == key).and_then(|k| k.value.clone()))
        };
        let meta = match kv(META_KEY) {
            Some(json) => {
                let meta: Metadata = serde_json::from_str(&json)
                    .map_err(|e| TraceError::invalid(path, format!("bad {META_KEY}: {e}")))?;
                meta.check().map_err(|what| TraceError::invalid(path, format!("bad {META_KEY}: {what}")))?;
                meta
            }
            None => Metadata::with_source(Source {
                kind: "import".into(),
                name: path.display().to_string(),
                ..Source::default()
            }),
        };
        let events: Vec<Event> = match kv(EVENTS_KEY) {
            Some(json) => {
                serde_json::from_str(&json).map_err(|e| TraceError::invalid(path, format!("bad {EVENTS_KEY}: {e}")))?
            }
            None => Vec::new(),
        };
        if events.iter().any(|e| e.thread >= MAX_THREADS) {
            return Err(TraceError::invalid(path, format!("{EVENTS_KEY}: thread id beyond {MAX_THREADS}")));
        }
        if events.windows(2).any(|w| w[0].at > w[1].at) || events.last().is_some_and(|e| e.at > total) {
            return Err(TraceError::invalid(
                path,
                format!("{EVENTS_KEY}: event positions out of order or past the end"),
            ));
        }
        let expected_crc = kv(ROWS_CRC_KEY);
        let batches = builder.with_batch_size(crate::native::DEFAULT_CHUNK_ACCESSES).build().map_err(bad)?;
        Ok(ParquetReader {
            path: path.to_path_buf(),
            batches,
            meta,
            events,
            next_event: 0,
            next_index: 0,
            total,
            expected_crc,
            digest: RowDigest::default(),
        })
    }
}

/// The kind column as "is a write", whatever string layout the writer chose
/// (pyarrow and polars use plain, large, view or dictionary-encoded strings).
fn kinds(a: &ArrayRef, path: &Path, row: u64) -> Result<Vec<bool>> {
    use arrow_array::cast::AsArray;
    let parse = |i: usize, v: Option<&str>| match v {
        Some("W") | Some("w") => Ok(true),
        Some("R") | Some("r") => Ok(false),
        other => Err(TraceError::invalid(
            path,
            format!("row {}: bad kind '{}' (R or W)", row + i as u64, other.unwrap_or("")),
        )),
    };
    match a.data_type() {
        DataType::Utf8 => a.as_string::<i32>().iter().enumerate().map(|(i, v)| parse(i, v)).collect(),
        DataType::LargeUtf8 => a.as_string::<i64>().iter().enumerate().map(|(i, v)| parse(i, v)).collect(),
        DataType::Utf8View => a.as_string_view().iter().enumerate().map(|(i, v)| parse(i, v)).collect(),
        DataType::Dictionary(_, _) => {
            let d = a.as_any_dictionary();
            let values = kinds(d.values(), path, row)?;
            let keys = d.normalized_keys();
            keys.iter().enumerate().map(|(i, &k)| if a.is_null(i) { parse(i, None) } else { Ok(values[k]) }).collect()
        }
        other => Err(TraceError::invalid(path, format!("column 'kind' must hold strings R or W, not {other}"))),
    }
}

impl crate::source::TraceSource for ParquetReader {
    fn metadata(&self) -> &Metadata {
        &self.meta
    }

    fn access_count_hint(&self) -> Option<u64> {
        Some(self.total)
    }

    fn next_chunk(&mut self, out: &mut Chunk) -> Result<bool> {
        let path = self.path.clone();
        contained(&path, || self.next_chunk_inner(out))
    }
}

impl ParquetReader {
    fn next_chunk_inner(&mut self, out: &mut Chunk) -> Result<bool> {
        out.clear();
        out.first_access = self.next_index;
        let batch = match self.batches.next() {
            Some(b) => b.map_err(|e| {
                TraceError::invalid(&self.path, format!("reading Parquet rows near row {}: {e}", self.next_index))
            })?,
            None => {
                if let Some(expected) = self.expected_crc.take() {
                    let found = std::mem::take(&mut self.digest).hex();
                    if found != expected {
                        return Err(TraceError::invalid(
                            &self.path,
                            format!(
                                "rows differ from what was written (checksum {found}, stored {expected}): the file is damaged"
                            ),
                        ));
                    }
                }
                // Events after the last access.
                out.events.extend(self.events.drain(self.next_event..));
                self.next_event = 0;
                return Ok(!out.events.is_empty());
            }
        };
        let row = self.next_index;
        let col = |name: &str| batch.column_by_name(name).cloned().unwrap();
        let threads = ints(&col("thread"), "thread", &self.path, row)?;
        let addrs = ints(&col("addr"), "addr", &self.path, row)?;
        let sizes = ints(&col("size"), "size", &self.path, row)?;
        let writes = kinds(&col("kind"), &self.path, row)?;
        for i in 0..batch.num_rows() {
            let bad = |what: String| TraceError::invalid(&self.path, format!("row {}: {what}", row + i as u64));
            let thread = u32::try_from(threads[i]).ok().filter(|&t| t < MAX_THREADS).ok_or_else(|| {
                bad(format!("thread {} out of range (a trace holds at most {MAX_THREADS} threads)", threads[i]))
            })?;
            let size = u32::try_from(sizes[i]).map_err(|_| bad(format!("size {} out of range", sizes[i])))?;
            let kind = if writes[i] { Kind::Write } else { Kind::Read };
            self.meta.threads = self.meta.threads.max(thread + 1);
            out.accesses.push(Access { thread, addr: addrs[i], size, kind });
        }
        if self.expected_crc.is_some() {
            self.digest.add(&out.accesses);
        }
        self.next_index += batch.num_rows() as u64;
        let end = self.next_index;
        while let Some(e) =
            self.events.get(self.next_event).filter(|e| e.at < end || (e.at == end && end == self.total))
        {
            out.events.push(e.clone());
            self.next_event += 1;
        }
        if self.next_event == self.events.len() {
            self.events.clear();
            self.next_event = 0;
        }
        Ok(true)
    }
}

/// An integer column of any width as u64 values (pandas writes int64 by default).
fn ints(a: &ArrayRef, name: &str, path: &Path, row: u64) -> Result<Vec<u64>> {
    use arrow_array::cast::AsArray;
    use arrow_array::types::*;
    if a.null_count() > 0 {
        return Err(TraceError::invalid(path, format!("column '{name}' has empty values near row {row}")));
    }
    let neg = || TraceError::invalid(path, format!("column '{name}' has negative values near row {row}"));
    Ok(match a.data_type() {
        DataType::UInt64 => a.as_primitive::<UInt64Type>().values().to_vec(),
        DataType::UInt32 => a.as_primitive::<UInt32Type>().values().iter().map(|&x| x as u64).collect(),
        DataType::UInt16 => a.as_primitive::<UInt16Type>().values().iter().map(|&x| x as u64).collect(),
        DataType::UInt8 => a.as_primitive::<UInt8Type>().values().iter().map(|&x| x as u64).collect(),
        DataType::Int64 => a
            .as_primitive::<Int64Type>()
            .values()
            .iter()
            .map(|&x| u64::try_from(x).map_err(|_| neg()))
            .collect::<Result<_>>()?,
        DataType::Int32 => a
            .as_primitive::<Int32Type>()
            .values()
            .iter()
            .map(|&x| u64::try_from(x).map_err(|_| neg()))
            .collect::<Result<_>>()?,
        DataType::Int16 => a
            .as_primitive::<Int16Type>()
            .values()
            .iter()
            .map(|&x| u64::try_from(x).map_err(|_| neg()))
            .collect::<Result<_>>()?,
        DataType::Int8 => a
            .as_primitive::<Int8Type>()
            .values()
            .iter()
            .map(|&x| u64::try_from(x).map_err(|_| neg()))
            .collect::<Result<_>>()?,
        other => return Err(TraceError::invalid(path, format!("column '{name}' must be integers, not {other}"))),
    })
}
