//! sharemap-core: the domain types every analysis shares, at the bottom of the crates (it
//! depends on none of sharemap's). No trace I/O here, so the mapping crate (which needs only
//! matrices and machines) compiles without arrow or zstd.

pub mod index;
pub mod matrix;
pub mod names;
pub mod output;
pub mod page_size;
pub mod pages;
pub mod plugin;
pub mod spec;

pub use index::{DenseIndex, RecentPerThread};
pub use matrix::{MatrixError, MatrixErrorKind, SharingMatrix};
pub use names::{closest, did_you_mean};
pub use page_size::{PageSize, PageSizeError};
pub use pages::{PageCounter, PageUsage};
pub use plugin::{Caps, Param, ParamKind, Params, Plugin};
pub use spec::{Spec, SpecError};

/// Most threads a trace may hold (thread ids 0..MAX_THREADS). Readers refuse larger ids and
/// analyses size their per-thread tables (a sharing matrix is n² counters: 128 MiB at this
/// maximum) by the ids a trace holds, so a hostile id cannot ask for terabytes.
pub const MAX_THREADS: u32 = 4096;

/// 12345678 as "12,345,678": counts a reader takes in at once.
pub fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A well-mixed hash of a number (one step of splitmix64): seeded choices that must not
/// follow the numbers' order, such as a random page's node or a window's offset.
pub fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e3779b97f4a7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d049bb133111eb);
    x ^ (x >> 31)
}
