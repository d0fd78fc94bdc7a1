//! sharemap-sim: a NUMA machine simulated access by access, on a trace's own order: private
//! and shared caches with LRU replacement, MESI coherence through a directory, TLBs, DRAM at
//! the node holding each page, per-thread clocks, thread and page migrations. Mechanisms
//! (thread and data mapping, online or static) run inside it on simulated time.

pub mod cache;
mod directory;
pub mod mechanisms;
pub mod model;
mod params;
pub mod pass;
pub mod sim;
pub mod stats;
#[cfg(test)]
mod tests_support;

pub use mechanisms::MechanismError;
pub use mechanisms::{Context, MECHANISMS, Mechanism, MechanismInfo, Profile, RecordedSchedule, Start};
pub use model::{Model, ModelError, ParamError, Params};
pub use params::ParamErrorKind;
pub use pass::{SimError, memory_profile, simulate, starts};
pub use sim::{FirstPlacement, Sim};
pub use stats::{Outcome, Stats};
#[cfg(test)]
mod tests;

/// Asks the host to bring the line at `p` into its caches: a hint, with no effect on any
/// result (nothing off x86-64).
#[inline(always)]
pub(crate) fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch does not fault, whatever the address, and changes no memory.
    unsafe {
        std::arch::x86_64::_mm_prefetch(p as *const i8, std::arch::x86_64::_MM_HINT_T0)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
