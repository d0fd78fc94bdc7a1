//! sharemap's software transactional memory, `libsharemap_stm`: a word-based STM with the C
//! API of TinySTM 1.0.5 (headers in `include/stm`, TL2's macro layer in `include/stm-tl2`),
//! and STMap (seed 002) built in: sharing detection on the load/store path, online thread
//! mapping, and data mapping (docs/stm.md).
//!
//! Design, as the best word-based STMs (TinySTM's write-back, encounter-time locking; LSA's
//! snapshot extension):
//! - a **global version clock**, advanced by each committing writer;
//! - a **lock array** of versioned locks, an address hashed to one: unlocked it holds the
//!   version (clock value) of the last commit that wrote under it; locked, its owner;
//! - **writes** lock at encounter (a second writer aborts at once, so no work is wasted on
//!   a doomed transaction) and are buffered (write-back): memory changes only at commit;
//! - **reads** are checked against the transaction's snapshot: a location newer than the
//!   snapshot extends it when every read so far is still valid, else the transaction aborts.
//!   Every value a transaction sees belongs to one consistent snapshot (opacity).

pub mod capi;
pub mod core;
pub mod hooks;
pub mod mem;
pub mod stats;
pub mod stmap;
pub mod thread;
pub mod wrappers;

pub use crate::core::{Abort, Tx, Word};
