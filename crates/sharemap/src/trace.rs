//! The trace model and its files: what a program needs to write a trace of its own, read
//! one, or look inside one.

pub use sharemap_trace::exclude::Ranges;
pub use sharemap_trace::output::{AtomicOutput, OutputDir, flush, remove_temporaries, write_whole};
pub use sharemap_trace::summary::{SharingSummary, ThreadSummary, TraceSummary};
pub use sharemap_trace::{
    Access, AccessBatch, Burst, Chunk, Event, EventKind, Format, Kind, MAX_BURST, MemoryTrace, Metadata, Source,
    TraceError, TraceReader, TraceSource, TraceWriter, WriteReport,
};

/// The native format's own pieces: its reader, chunk index and defaults.
pub mod native {
    pub use sharemap_trace::native::{
        CHUNK_HEADER_LEN, DEFAULT_CHUNK_ACCESSES, DEFAULT_ZSTD_LEVEL, NativeReader, with_header_metadata,
    };
}
