//! sharemap-trace: the trace model every stage reads, the native chunked format, and
//! conversions to and from CSV, Parquet and DineroIV.

pub mod batch;
pub mod csv;
pub mod din;
pub mod error;
pub mod exclude;
pub mod formats;
pub mod model;
pub mod native;
/// Outputs written whole or not at all (sharemap-core's, shared with the STM).
pub mod output {
    pub use sharemap_core::output::*;
}
#[cfg(feature = "parquet")]
pub mod parquet;
pub mod source;
pub mod summary;
pub mod varint;
pub mod window;

pub use batch::{AccessBatch, Chunk};
pub use error::{Result, TraceError};
pub use formats::{Format, TraceReader, TraceWriter, WriteReport};
pub use model::{
    ACCESS_SITE_PERIOD, Access, Burst, CodeSite, Event, EventKind, FORMAT_VERSION, Kind, MAX_BURST, MAX_HOST_CPUS,
    Metadata, ProgramInfo, Source, StaticObject,
};
pub use source::{MemoryTrace, TraceSource};
