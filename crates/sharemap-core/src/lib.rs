//! sharemap-core: the domain types every analysis shares. No trace I/O here, so the mapping
//! crate (which needs only matrices and machines) compiles without arrow or zstd.

pub mod index;
pub mod matrix;
pub mod page_size;
pub mod pages;
pub mod placement;
pub mod spec;

pub use index::{DenseIndex, RecentPerThread};
pub use matrix::{MatrixError, SharingMatrix};
pub use page_size::{PageSize, PageSizeError};
pub use pages::{PageCounter, PageUsage};
pub use placement::{PlacementError, ThreadPlacement};
pub use spec::{Param, Spec, SpecError};
