//! sharemap's software transactional memory, the core of `libsharemap_stm` (issue 17; the
//! TinySTM-compatible C API and STMap's mapping come on top of it).
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

mod core;

pub use crate::core::{Abort, Stm, Tx, Word};
