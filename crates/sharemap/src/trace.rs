//! The trace model and its files: what a program needs to write a trace of its own, read
//! one, or look inside one.

pub use sharemap_trace::exclude::Ranges;
pub use sharemap_trace::output::{AtomicOutput, Listed, OutputDir, flush, make_dir, remove_temporaries, write_whole};
pub use sharemap_trace::summary::{SharingSummary, ThreadSummary, TraceSummary};
pub use sharemap_trace::{
    ACCESS_SITE_PERIOD, Access, AccessBatch, Burst, Chunk, CodeSite, Event, EventKind, Format, Kind, MAX_BURST,
    MemoryTrace, Metadata, ProgramInfo, Source, StaticObject, TraceError, TraceReader, TraceSource, TraceWriter,
    WriteReport,
};

/// The native format's own pieces: its reader, chunk index and defaults.
pub mod native {
    pub use sharemap_trace::native::{
        CHUNK_HEADER_LEN, DEFAULT_CHUNK_ACCESSES, DEFAULT_ZSTD_LEVEL, NativeReader, with_header_metadata,
    };
}

/// Refuses a trace that holds a sample of the program's accesses (`record --sample`, a
/// burst-sampled build), for an analysis that needs them all: `why` says what it needs.
pub(crate) fn needs_every_access(meta: &Metadata, why: &str) -> crate::Result<()> {
    let sampled = match (&meta.burst, meta.sampling_period) {
        (Some(b), _) => {
            format!("burst-sampled ({}:{}: a window of {} µs in every {})", b.on, b.off, b.on, b.on + b.off)
        }
        (None, k) if k > 1 => format!("sampled (one access in {k})"),
        _ => return Ok(()),
    };
    Err(crate::Error::new(
        crate::ErrorKind::SampledTrace,
        format!(
            "this trace is {sampled}, and {why}: record the program whole (`sharemap record` without --sample; a burst-sampled build with `--burst all`)"
        ),
    ))
}
