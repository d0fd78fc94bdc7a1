//! One entry point to read or write a trace in any supported format, chosen by file
//! extension or explicitly.

use crate::batch::Chunk;
use crate::csv::{CsvReader, CsvWriter};
use crate::din::DinWriter;
use crate::error::{Result, TraceError};
use crate::model::{Access, EventKind, Metadata};
use crate::native::{NativeReader, NativeWriter};
use crate::output::AtomicOutput;
#[cfg(feature = "parquet")]
use crate::parquet::{ParquetReader, ParquetWriter};
use crate::source::TraceSource;
use std::fs::File;
use std::io::{BufWriter, Read};
use std::path::Path;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Native,
    Csv,
    Parquet,
    Din,
}

impl Format {
    pub const NAMES: &'static str = "native, csv, parquet, din";
    /// The formats a trace can be read from (din has no threads).
    pub const READABLE: &'static str = "native, csv, parquet";

    pub fn from_name(name: &str) -> Option<Format> {
        match name.to_ascii_lowercase().as_str() {
            "native" | "trace" | "sharemap" => Some(Format::Native),
            "csv" => Some(Format::Csv),
            "parquet" | "pq" => Some(Format::Parquet),
            "din" | "dinero" => Some(Format::Din),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Format::Native => "native",
            Format::Csv => "csv",
            Format::Parquet => "parquet",
            Format::Din => "din",
        }
    }

    /// By extension: .trace (native), .csv, .parquet/.pq, .din.
    pub fn from_extension(path: &Path) -> Option<Format> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "trace" | "smt" => Some(Format::Native),
            "csv" => Some(Format::Csv),
            "parquet" | "pq" => Some(Format::Parquet),
            "din" => Some(Format::Din),
            _ => None,
        }
    }

    /// Input format: explicit, else by content (magic bytes), else by extension.
    pub fn detect(path: &Path) -> Result<Format> {
        let mut head = [0u8; 8];
        let mut f = File::open(path).map_err(|e| TraceError::io(path, e))?;
        let n = f.read(&mut head).map_err(|e| TraceError::io(path, e))?;
        if n >= 8 && &head == crate::native::FILE_MAGIC {
            return Ok(Format::Native);
        }
        if n >= 4 && &head[..4] == b"PAR1" {
            return Ok(Format::Parquet);
        }
        match Format::from_extension(path) {
            Some(Format::Din) => {
                Err(TraceError::invalid(path, "din traces can be written but not read (they have no threads)"))
            }
            Some(f) => Ok(f),
            None if head[..n].starts_with(b"thread") || head[..n].starts_with(b"#") => Ok(Format::Csv),
            None => Err(TraceError::invalid(
                path,
                format!("cannot tell the trace format; name it with --from ({})", Format::READABLE),
            )),
        }
    }
}

/// A trace file being read, in any format.
pub enum TraceReader {
    Native(Box<NativeReader>),
    Csv(Box<CsvReader>),
    #[cfg(feature = "parquet")]
    Parquet(Box<ParquetReader>),
}

impl TraceReader {
    pub fn open(path: &Path, format: Option<Format>) -> Result<TraceReader> {
        let format = match format {
            Some(f) => f,
            None => Format::detect(path)?,
        };
        Ok(match format {
            Format::Native => TraceReader::Native(Box::new(NativeReader::open(path)?)),
            Format::Csv => TraceReader::Csv(Box::new(CsvReader::open(path)?)),
            #[cfg(feature = "parquet")]
            Format::Parquet => TraceReader::Parquet(Box::new(ParquetReader::open(path)?)),
            #[cfg(not(feature = "parquet"))]
            Format::Parquet => {
                return Err(TraceError::invalid(path, "this sharemap was built without Parquet support"));
            }
            Format::Din => {
                return Err(TraceError::invalid(path, "din traces can be written but not read (they have no threads)"));
            }
        })
    }

    pub fn format(&self) -> Format {
        match self {
            TraceReader::Native(_) => Format::Native,
            TraceReader::Csv(_) => Format::Csv,
            #[cfg(feature = "parquet")]
            TraceReader::Parquet(_) => Format::Parquet,
        }
    }

    /// Complete chunks of a native trace (None for other formats).
    pub fn native_chunks(&self) -> Option<usize> {
        match self {
            TraceReader::Native(r) => Some(r.chunks().len()),
            _ => None,
        }
    }

    /// The region and phase marks a window is resolved from (see `events`; a native file
    /// lists them in its footer).
    pub fn marks(&self) -> Result<Vec<crate::Event>> {
        match self {
            TraceReader::Native(r) => r.marks(),
            TraceReader::Csv(_) => Ok(Vec::new()),
            #[cfg(feature = "parquet")]
            TraceReader::Parquet(r) => {
                Ok(r.events().iter().filter(|e| crate::native::is_mark(e.kind)).cloned().collect())
            }
        }
    }

    /// Every event of the trace without reading its accesses where the format allows: a
    /// native file decodes only the chunks that hold events, Parquet keeps them in its
    /// metadata and CSV has none.
    pub fn events(&self) -> Result<Vec<crate::Event>> {
        match self {
            TraceReader::Native(r) => r.events(),
            TraceReader::Csv(_) => Ok(Vec::new()),
            #[cfg(feature = "parquet")]
            TraceReader::Parquet(r) => Ok(r.events().to_vec()),
        }
    }

    fn inner(&self) -> &dyn TraceSource {
        match self {
            TraceReader::Native(r) => r.as_ref(),
            TraceReader::Csv(r) => r.as_ref(),
            #[cfg(feature = "parquet")]
            TraceReader::Parquet(r) => r.as_ref(),
        }
    }

    fn inner_mut(&mut self) -> &mut dyn TraceSource {
        match self {
            TraceReader::Native(r) => r.as_mut(),
            TraceReader::Csv(r) => r.as_mut(),
            #[cfg(feature = "parquet")]
            TraceReader::Parquet(r) => r.as_mut(),
        }
    }
}

impl TraceSource for TraceReader {
    fn metadata(&self) -> &Metadata {
        self.inner().metadata()
    }
    fn next_chunk(&mut self, out: &mut Chunk) -> Result<bool> {
        self.inner_mut().next_chunk(out)
    }
    fn access_count_hint(&self) -> Option<u64> {
        self.inner().access_count_hint()
    }
    fn truncated_at(&self) -> Option<u64> {
        self.inner().truncated_at()
    }
    fn for_each_chunk(&mut self, sink: &mut dyn FnMut(&Chunk) -> Result<()>) -> Result<()> {
        self.inner_mut().for_each_chunk(sink)
    }
    fn for_each_chunk_unordered(&mut self, sink: &(dyn Fn(usize, &Chunk) -> Result<()> + Sync)) -> Result<()> {
        self.inner_mut().for_each_chunk_unordered(sink)
    }
    fn for_each_chunk_in_parts(
        &mut self,
        parts: usize,
        sink: &(dyn Fn(usize, &Chunk) -> Result<()> + Sync),
    ) -> Result<()> {
        self.inner_mut().for_each_chunk_in_parts(parts, sink)
    }
}

enum Inner {
    Native(Box<NativeWriter<BufWriter<File>>>),
    Csv(CsvWriter<BufWriter<File>>),
    #[cfg(feature = "parquet")]
    Parquet(Box<ParquetWriter<BufWriter<File>>>),
    Din(DinWriter<BufWriter<File>>),
}

/// A trace being written, in any format, atomically: nothing appears at the destination
/// unless `finish` succeeds.
pub struct TraceWriter {
    inner: Inner,
    output: AtomicOutput,
    /// Buffer for formats written chunk by chunk.
    pending: Chunk,
    accesses: u64,
    events: u64,
}

/// What a finished writer reports.
#[derive(Clone, Debug, Default)]
pub struct WriteReport {
    pub accesses: u64,
    pub events: u64,
    /// Events the format cannot hold (CSV, din).
    pub dropped_events: u64,
    pub bytes: u64,
}

impl TraceWriter {
    pub fn create(path: &Path, format: Option<Format>, meta: Metadata) -> Result<TraceWriter> {
        let format = match format.or_else(|| Format::from_extension(path)) {
            Some(f) => f,
            None => {
                return Err(TraceError::invalid(
                    path,
                    format!(
                        "cannot tell the output format from the extension; use .trace, .csv, .parquet or .din, or --to ({})",
                        Format::NAMES
                    ),
                ));
            }
        };
        Self::to_output(AtomicOutput::create(path)?, format, meta)
    }

    /// A writer of `format` on an output already made (a file of an [`crate::output::OutputDir`]).
    pub fn to_output(output: AtomicOutput, format: Format, meta: Metadata) -> Result<TraceWriter> {
        let path = &output.path().to_path_buf();
        let w = output.writer()?;
        let io = |e| TraceError::io(path, e);
        let inner = match format {
            Format::Native => Inner::Native(Box::new(NativeWriter::new(w, meta).map_err(io)?)),
            Format::Csv => Inner::Csv(CsvWriter::new(w).map_err(io)?),
            #[cfg(feature = "parquet")]
            Format::Parquet => Inner::Parquet(Box::new(
                ParquetWriter::new(w, meta).map_err(|e| TraceError::invalid(path, e.to_string()))?,
            )),
            #[cfg(not(feature = "parquet"))]
            Format::Parquet => {
                return Err(TraceError::invalid(path, "this sharemap was built without Parquet support"));
            }
            Format::Din => Inner::Din(DinWriter::new(w)),
        };
        Ok(TraceWriter { inner, output, pending: Chunk::default(), accesses: 0, events: 0 })
    }

    #[inline]
    pub fn access(&mut self, a: Access) -> Result<()> {
        self.accesses += 1;
        match &mut self.inner {
            Inner::Native(w) => w.push(a).map_err(|e| TraceError::io(self.output.path(), e)),
            _ => {
                self.pending.accesses.push(a);
                if self.pending.accesses.len() >= crate::native::DEFAULT_CHUNK_ACCESSES {
                    self.flush_pending()?;
                }
                Ok(())
            }
        }
    }

    pub fn event(&mut self, thread: u32, kind: EventKind, arg: u64, label: &str) -> Result<()> {
        self.push_event(&crate::Event::new(0, thread, kind, arg, label))
    }

    /// Writes `e` just before the next access (its own position is not used).
    pub fn push_event(&mut self, e: &crate::Event) -> Result<()> {
        self.events += 1;
        match &mut self.inner {
            Inner::Native(w) => w.push_event(e).map_err(|err| TraceError::io(self.output.path(), err)),
            _ => {
                self.pending.events.push(crate::Event { at: self.accesses, ..e.clone() });
                Ok(())
            }
        }
    }

    /// Appends a chunk read from another trace (events keep their relative positions),
    /// taking its contents: it is left empty, for the caller to fill again.
    pub fn chunk(&mut self, chunk: &mut Chunk) -> Result<()> {
        if let Inner::Native(w) = &mut self.inner
            && chunk.first_access == self.accesses
        {
            self.accesses += chunk.accesses.len() as u64;
            self.events += chunk.events.len() as u64;
            return w.write_chunk(chunk).map_err(|e| TraceError::io(self.output.path(), e));
        }
        for item in chunk.items() {
            match item {
                crate::batch::ChunkItem::Access(a) => self.access(a)?,
                crate::batch::ChunkItem::Event(e) => self.push_event(e)?,
            }
        }
        chunk.clear();
        Ok(())
    }

    /// Thread count and OS thread ids for the trace metadata (native and Parquet).
    pub fn set_threads(&mut self, threads: u32, os_tids: Vec<u64>) {
        if let Inner::Native(w) = &mut self.inner {
            w.set_threads(threads, os_tids);
        }
    }

    /// For a recording: native traces flush their header now and every chunk as it is
    /// written, so a recorder killed with SIGKILL leaves a readable truncated trace.
    pub fn flush_each_chunk(&mut self) -> Result<()> {
        let path = self.output.path().to_path_buf();
        match &mut self.inner {
            Inner::Native(w) => w.flush_each_chunk().map_err(|e| TraceError::io(&path, e)),
            _ => Ok(()),
        }
    }

    /// The recorded run's wall-clock time (kept by native and Parquet traces).
    pub fn set_run_ns(&mut self, ns: u64) {
        match &mut self.inner {
            Inner::Native(w) => w.set_run_ns(ns),
            #[cfg(feature = "parquet")]
            Inner::Parquet(w) => w.set_run_ns(ns),
            _ => {}
        }
    }

    /// The recording host's NUMA node of each CPU (kept by native and Parquet traces).
    pub fn set_host_cpu_nodes(&mut self, nodes: Vec<u32>) {
        match &mut self.inner {
            Inner::Native(w) => w.set_host_cpu_nodes(nodes),
            #[cfg(feature = "parquet")]
            Inner::Parquet(w) => w.set_host_cpu_nodes(nodes),
            _ => {}
        }
    }

    /// A burst-sampled recording's setting (kept by native and Parquet traces; the other
    /// formats have no metadata, and `convert` says what it drops).
    pub fn set_burst(&mut self, burst: Option<crate::Burst>) {
        match &mut self.inner {
            Inner::Native(w) => w.set_burst(burst),
            #[cfg(feature = "parquet")]
            Inner::Parquet(w) => w.set_burst(burst),
            _ => {}
        }
    }

    /// The recorded program's static data and code sites (`Metadata::program`).
    pub fn set_program(&mut self, program: Option<crate::ProgramInfo>) {
        match &mut self.inner {
            Inner::Native(w) => w.set_program(program),
            #[cfg(feature = "parquet")]
            Inner::Parquet(w) => w.set_program(program),
            _ => {}
        }
    }

    fn flush_pending(&mut self) -> Result<()> {
        let path = self.output.path().to_path_buf();
        self.pending.first_access = self.accesses - self.pending.accesses.len() as u64;
        let r = match &mut self.inner {
            Inner::Native(_) => Ok(()),
            Inner::Csv(w) => w.write_chunk(&self.pending).map_err(|e| TraceError::io(&path, e)),
            Inner::Din(w) => w.write_chunk(&self.pending).map_err(|e| TraceError::io(&path, e)),
            #[cfg(feature = "parquet")]
            Inner::Parquet(w) => w.write_chunk(&self.pending).map_err(|e| TraceError::invalid(&path, e.to_string())),
        };
        self.pending.clear();
        r
    }

    pub fn finish(self) -> Result<WriteReport> {
        let (mut report, output) = self.close()?;
        // The size of the file written, not of whatever has the name.
        report.bytes = output.len()?;
        output.commit()?;
        Ok(report)
    }

    /// Finishes the trace as a whole, readable file but leaves it under its temporary
    /// `.NAME.*.partial` name rather than at the destination (a run that failed after
    /// recording something); returns the report and that path.
    pub fn finish_partial(self) -> Result<(WriteReport, std::path::PathBuf)> {
        let (mut report, output) = self.close()?;
        let kept = output.keep_temporary()?;
        report.bytes = std::fs::metadata(&kept).map(|m| m.len()).unwrap_or(0);
        Ok((report, kept))
    }

    /// Writes what is pending and the format's ending.
    fn close(mut self) -> Result<(WriteReport, AtomicOutput)> {
        self.flush_pending()?;
        let path = self.output.path().to_path_buf();
        let io = |e| TraceError::io(&path, e);
        let mut report = WriteReport { accesses: self.accesses, events: self.events, ..Default::default() };
        match self.inner {
            Inner::Native(w) => {
                let (mut out, _) = (*w).finish().map_err(io)?;
                crate::output::flush(&mut out, &path)?;
            }
            Inner::Csv(w) => {
                report.dropped_events = w.dropped_events;
                crate::output::flush(&mut w.into_inner(), &path)?;
            }
            Inner::Din(w) => {
                report.dropped_events = self.events;
                crate::output::flush(&mut w.into_inner(), &path)?;
            }
            #[cfg(feature = "parquet")]
            Inner::Parquet(w) => {
                let mut out = w.finish().map_err(|e| TraceError::invalid(&path, e.to_string()))?;
                crate::output::flush(&mut out, &path)?;
            }
        }
        Ok((report, self.output))
    }
}
