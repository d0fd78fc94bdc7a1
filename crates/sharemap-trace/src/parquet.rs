//! Parquet traces: one row per access with columns thread (uint32), addr (uint64),
//! size (uint32), kind ("R"/"W"), so pandas, polars and duckdb read them directly.
//! The trace metadata and the events (with their positions) are kept in the file's
//! key-value metadata under `sharemap.metadata` and `sharemap.events` (JSON), which makes
//! native -> Parquet -> native lossless.

use crate::batch::Chunk;
use crate::error::{Result, TraceError, excerpt};
use crate::model::{Access, Event, Kind, MAX_THREADS, Metadata, Source};
use parquet::basic::{Compression, ConvertedType, LogicalType, Type as PhysicalType, ZstdLevel};
use parquet::column::reader::{ColumnReader, ColumnReaderImpl};
use parquet::data_type::{ByteArray, ByteArrayType, DataType, Int32Type, Int64Type};
use parquet::errors::ParquetError;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::ColumnDescriptor;
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

/// The columns, as pandas and pyarrow read them: uint32, uint64, uint32 and string.
const SCHEMA: &str = "message trace {
    required int32 thread (INTEGER(32, false));
    required int64 addr (INTEGER(64, false));
    required int32 size (INTEGER(32, false));
    required binary kind (STRING);
}";

/// Rows per row group: the writer buffers this many before writing them out.
const ROW_GROUP_ROWS: usize = 1 << 20;

pub struct ParquetWriter<W: Write + Send> {
    writer: SerializedFileWriter<W>,
    meta: Metadata,
    events: Vec<Event>,
    digest: RowDigest,
    // The row group being gathered, column by column (unsigned values in Parquet's signed
    // physical types, as the schema's logical types say).
    threads: Vec<i32>,
    addrs: Vec<i64>,
    sizes: Vec<i32>,
    kinds: Vec<ByteArray>,
}

impl<W: Write + Send> ParquetWriter<W> {
    pub fn new(out: W, meta: Metadata) -> std::result::Result<Self, ParquetError> {
        let schema = Arc::new(parquet::schema::parser::parse_message_type(SCHEMA)?);
        // Addresses are too many for a dictionary: building one cost a quarter of the writing.
        let props = WriterProperties::builder()
            .set_compression(Compression::ZSTD(ZstdLevel::try_new(3)?))
            .set_column_dictionary_enabled(parquet::schema::types::ColumnPath::from("addr"), false)
            .build();
        let props = Arc::new(props);
        Ok(ParquetWriter {
            writer: SerializedFileWriter::new(out, schema, props)?,
            meta,
            events: Vec::new(),
            digest: RowDigest::default(),
            threads: Vec::new(),
            addrs: Vec::new(),
            sizes: Vec::new(),
            kinds: Vec::new(),
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

    pub fn set_burst(&mut self, burst: Option<crate::Burst>) {
        self.meta.burst = burst;
    }

    pub fn set_program(&mut self, program: Option<crate::ProgramInfo>) {
        self.meta.program = program;
    }

    pub fn write_chunk(&mut self, chunk: &Chunk) -> std::result::Result<(), ParquetError> {
        self.events.extend(chunk.events.iter().cloned());
        let a = &chunk.accesses;
        if a.is_empty() {
            return Ok(());
        }
        for &t in &a.thread {
            self.meta.threads = self.meta.threads.max(t + 1);
        }
        self.digest.add(a);
        let read = ByteArray::from(bytes::Bytes::from_static(b"R"));
        let write = ByteArray::from(bytes::Bytes::from_static(b"W"));
        for i in 0..a.len() {
            self.threads.push(a.thread[i] as i32);
            self.addrs.push(a.addr[i] as i64);
            self.sizes.push(a.size(i) as i32);
            self.kinds.push(if a.op[i] & 0x80 != 0 { write.clone() } else { read.clone() });
            if self.threads.len() == ROW_GROUP_ROWS {
                self.write_row_group()?;
            }
        }
        Ok(())
    }

    /// Writes the gathered rows as one row group.
    fn write_row_group(&mut self) -> std::result::Result<(), ParquetError> {
        if self.threads.is_empty() {
            return Ok(());
        }
        let mut group = self.writer.next_row_group()?;
        let mut k = 0;
        while let Some(mut column) = group.next_column()? {
            match k {
                0 => column.typed::<Int32Type>().write_batch(&self.threads, None, None)?,
                1 => column.typed::<Int64Type>().write_batch(&self.addrs, None, None)?,
                2 => column.typed::<Int32Type>().write_batch(&self.sizes, None, None)?,
                _ => column.typed::<ByteArrayType>().write_batch(&self.kinds, None, None)?,
            };
            column.close()?;
            k += 1;
        }
        group.close()?;
        self.threads.clear();
        self.addrs.clear();
        self.sizes.clear();
        self.kinds.clear();
        Ok(())
    }

    pub fn finish(mut self) -> std::result::Result<W, ParquetError> {
        self.write_row_group()?;
        let meta = serde_json::to_string(&self.meta).map_err(|e| ParquetError::General(e.to_string()))?;
        let events = serde_json::to_string(&self.events).map_err(|e| ParquetError::General(e.to_string()))?;
        self.writer.append_key_value_metadata(KeyValue::new(META_KEY.to_string(), meta));
        self.writer.append_key_value_metadata(KeyValue::new(EVENTS_KEY.to_string(), events));
        let crc = std::mem::take(&mut self.digest).hex();
        self.writer.append_key_value_metadata(KeyValue::new(ROWS_CRC_KEY.to_string(), crc));
        self.writer.into_inner()
    }
}

pub struct ParquetReader {
    path: PathBuf,
    file: SerializedFileReader<File>,
    /// Where thread, addr, size and kind are among the file's columns.
    columns: [usize; 4],
    /// The next row group to open, and the columns of the one being read.
    next_group: usize,
    group: Option<Group>,
    meta: Metadata,
    events: Vec<Event>,
    next_event: usize,
    next_index: u64,
    total: u64,
    /// The CRC the writer stored, checked once the last row is read.
    expected_crc: Option<String>,
    digest: RowDigest,
    // Reused buffers.
    levels: Vec<i16>,
    values: [Vec<u64>; 3],
    kinds: Vec<ByteArray>,
    raw: Raw,
}

/// Column values as read, before they become u64s.
#[derive(Default)]
struct Raw {
    i32s: Vec<i32>,
    i64s: Vec<i64>,
}

/// An integer column, in whichever physical type the writer chose (pandas writes int64),
/// and whether its logical type is unsigned.
enum Ints {
    I32(ColumnReaderImpl<Int32Type>, bool),
    I64(ColumnReaderImpl<Int64Type>, bool),
}

/// The column readers of one row group and the rows it has left.
struct Group {
    ints: [Ints; 3],
    kind: ColumnReaderImpl<ByteArrayType>,
    /// Which of thread, addr, size and kind may hold nulls (none may be null).
    nullable: [bool; 4],
    rows_left: u64,
}

const INT_COLUMNS: [&str; 3] = ["thread", "addr", "size"];

fn is_unsigned(d: &ColumnDescriptor) -> bool {
    matches!(d.logical_type_ref(), Some(LogicalType::Integer(i)) if !i.is_signed)
        || matches!(
            d.converted_type(),
            ConvertedType::UINT_8 | ConvertedType::UINT_16 | ConvertedType::UINT_32 | ConvertedType::UINT_64
        )
}

impl ParquetReader {
    /// The trace's events, as the file's metadata holds them.
    pub fn events(&self) -> &[Event] {
        &self.events
    }

    pub fn open(path: &Path) -> Result<Self> {
        contained(path, || Self::open_inner(path))
    }

    fn open_inner(path: &Path) -> Result<Self> {
        let file = File::open(path).map_err(|e| TraceError::io(path, e))?;
        let bad = |e: ParquetError| TraceError::invalid(path, format!("not a readable Parquet file: {e}"));
        let file = SerializedFileReader::new(file).map_err(bad)?;
        let schema = file.metadata().file_metadata().schema_descr_ptr();
        let mut columns = [0; 4];
        for (k, name) in ["thread", "addr", "size", "kind"].into_iter().enumerate() {
            let Some(i) = schema.columns().iter().position(|c| c.path().string() == name) else {
                return Err(TraceError::invalid(
                    path,
                    format!("Parquet trace lacks column '{name}' (needs thread, addr, size, kind)"),
                ));
            };
            let d = schema.column(i);
            let physical = d.physical_type();
            let fits = if k < 3 {
                matches!(physical, PhysicalType::INT32 | PhysicalType::INT64)
            } else {
                physical == PhysicalType::BYTE_ARRAY
            };
            if !fits {
                let want = if k < 3 { "must be integers" } else { "must hold strings R or W" };
                return Err(TraceError::invalid(path, format!("column '{name}' {want}, not {physical}")));
            }
            columns[k] = i;
        }
        let file_meta = file.metadata().file_metadata();
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
        Ok(ParquetReader {
            path: path.to_path_buf(),
            file,
            columns,
            next_group: 0,
            group: None,
            meta,
            events,
            next_event: 0,
            next_index: 0,
            total,
            expected_crc,
            digest: RowDigest::default(),
            levels: Vec::new(),
            values: Default::default(),
            kinds: Vec::new(),
            raw: Raw::default(),
        })
    }

    /// Opens the next row group that has rows; None after the last.
    fn open_group(&mut self) -> std::result::Result<Option<Group>, ParquetError> {
        while self.next_group < self.file.num_row_groups() {
            let group = self.file.get_row_group(self.next_group)?;
            self.next_group += 1;
            let rows = group.metadata().num_rows().max(0) as u64;
            if rows == 0 {
                continue;
            }
            let schema = group.metadata().schema_descr_ptr();
            let ints = |k: usize| -> std::result::Result<Ints, ParquetError> {
                let unsigned = is_unsigned(schema.column(self.columns[k]).as_ref());
                match group.get_column_reader(self.columns[k])? {
                    ColumnReader::Int32ColumnReader(r) => Ok(Ints::I32(r, unsigned)),
                    ColumnReader::Int64ColumnReader(r) => Ok(Ints::I64(r, unsigned)),
                    _ => Err(ParquetError::General(format!("column '{}' is not integers", INT_COLUMNS[k]))),
                }
            };
            let kind = match group.get_column_reader(self.columns[3])? {
                ColumnReader::ByteArrayColumnReader(r) => r,
                _ => return Err(ParquetError::General("column 'kind' is not strings".into())),
            };
            let nullable = self.columns.map(|c| schema.column(c).max_def_level() > 0);
            return Ok(Some(Group { ints: [ints(0)?, ints(1)?, ints(2)?], kind, nullable, rows_left: rows }));
        }
        Ok(None)
    }
}

/// Reads `n` rows of one column into `out` (appending), refusing empty values: a nullable
/// column (pandas writes them) is fine as long as every value is there.
#[allow(clippy::too_many_arguments)]
fn read_column<T: DataType>(
    reader: &mut ColumnReaderImpl<T>,
    nullable: bool,
    n: usize,
    levels: &mut Vec<i16>,
    out: &mut Vec<T::T>,
    name: &str,
    path: &Path,
    row: u64,
) -> Result<()> {
    let start = out.len();
    let mut rows = 0;
    while rows < n {
        levels.clear();
        let (records, _, _) = reader
            .read_records(n - rows, nullable.then_some(&mut *levels), None, out)
            .map_err(|e| TraceError::invalid(path, format!("reading column '{name}' near row {row}: {e}")))?;
        if records == 0 {
            return Err(TraceError::invalid(
                path,
                format!("column '{name}' ends early, near row {}", row + rows as u64),
            ));
        }
        if nullable && levels.contains(&0) {
            return Err(TraceError::invalid(path, format!("column '{name}' has empty values near row {row}")));
        }
        rows += records;
    }
    debug_assert_eq!(out.len() - start, n);
    Ok(())
}

/// `n` values of an integer column as u64, refusing negative values of a signed column.
#[allow(clippy::too_many_arguments)]
fn read_ints(
    column: &mut Ints,
    raw: &mut Raw,
    nullable: bool,
    n: usize,
    levels: &mut Vec<i16>,
    out: &mut Vec<u64>,
    name: &str,
    path: &Path,
    row: u64,
) -> Result<()> {
    out.clear();
    let neg = || TraceError::invalid(path, format!("column '{name}' has negative values near row {row}"));
    match column {
        Ints::I32(r, unsigned) => {
            let v = &mut raw.i32s;
            v.clear();
            read_column(r, nullable, n, levels, v, name, path, row)?;
            if *unsigned {
                out.extend(v.iter().map(|&x| x as u32 as u64));
            } else {
                for &x in v.iter() {
                    out.push(u64::try_from(x).map_err(|_| neg())?);
                }
            }
        }
        Ints::I64(r, unsigned) => {
            let v = &mut raw.i64s;
            v.clear();
            read_column(r, nullable, n, levels, v, name, path, row)?;
            if *unsigned {
                out.extend(v.iter().map(|&x| x as u64));
            } else {
                for &x in v.iter() {
                    out.push(u64::try_from(x).map_err(|_| neg())?);
                }
            }
        }
    }
    Ok(())
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
        if self.group.as_ref().is_none_or(|g| g.rows_left == 0) {
            let row = self.next_index;
            self.group = self
                .open_group()
                .map_err(|e| TraceError::invalid(&self.path, format!("reading Parquet rows near row {row}: {e}")))?;
        }
        let Some(group) = self.group.as_mut() else {
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
        };
        let n = group.rows_left.min(crate::native::DEFAULT_CHUNK_ACCESSES as u64) as usize;
        let row = self.next_index;
        let path = &self.path;
        for (k, name) in INT_COLUMNS.iter().enumerate() {
            let (column, values) = (&mut group.ints[k], &mut self.values[k]);
            let nullable = group.nullable[k];
            read_ints(column, &mut self.raw, nullable, n, &mut self.levels, values, name, path, row)?;
        }
        self.kinds.clear();
        read_column(&mut group.kind, group.nullable[3], n, &mut self.levels, &mut self.kinds, "kind", path, row)?;
        group.rows_left -= n as u64;
        let [threads, addrs, sizes] = &self.values;
        for i in 0..n {
            let bad = |what: String| TraceError::invalid(path, format!("row {}: {what}", row + i as u64));
            let thread = u32::try_from(threads[i]).ok().filter(|&t| t < MAX_THREADS).ok_or_else(|| {
                bad(format!("thread {} out of range (a trace holds at most {MAX_THREADS} threads)", threads[i]))
            })?;
            let size = u32::try_from(sizes[i]).map_err(|_| bad(format!("size {} out of range", sizes[i])))?;
            let kind = match self.kinds[i].data() {
                b"W" | b"w" => Kind::Write,
                b"R" | b"r" => Kind::Read,
                other => return Err(bad(format!("bad kind '{}' (R or W)", excerpt(&String::from_utf8_lossy(other))))),
            };
            self.meta.threads = self.meta.threads.max(thread + 1);
            out.accesses.push(Access { thread, addr: addrs[i], size, kind });
        }
        if self.expected_crc.is_some() {
            self.digest.add(&out.accesses);
        }
        self.next_index += n as u64;
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
