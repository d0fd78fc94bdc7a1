//! sharemap-trace: the trace model every stage reads, the native chunked format, and
//! conversions to and from CSV, Parquet and DineroIV.

pub mod batch;
pub mod error;
pub mod model;
pub mod native;
pub mod varint;

pub use batch::{AccessBatch, Chunk};
pub use error::{Result, TraceError};
pub use model::{Access, Event, EventKind, Kind, Metadata, Source};
