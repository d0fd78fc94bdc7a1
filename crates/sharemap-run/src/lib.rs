//! Real runs: a program started with a thread mapping and a memory policy, which the
//! preloaded actor (`libsharemap_pin.so`, crates/sharemap-pin) applies from inside it, and
//! configurations measured against each other as the papers measure: each one several
//! times, interleaved, with a mean and a 95 % confidence interval. docs/run.md says how.

pub mod cc;
pub mod counters;
pub mod mechanism;
mod observe;
mod placer;
pub mod record;
mod symbols;
pub mod sysctl;
pub mod thp;
pub mod timeline;
pub mod vm;

mod config;
mod measure;
mod program;
pub mod request;
mod runner;
pub mod runs;

pub use config::{Configuration, DataPlacement, MemoryPolicy, Pinning, map_threads, page_size, pinning};
pub use measure::{AutopinChoices, ConfigurationResult, FailedRun, Failure, compare, mean_ci95, measure};
pub use observe::{Observed, ThreadSeen, cpu_list, cpu_ranges};
pub use placer::{OffNode, PlanOutcome};
pub use program::{INSTALLED_LIBRARIES, Tools, is_static, preload_value, resolve_program};
pub use request::{PreparedRun, RunReport, RunRequest, Stopped};
pub use runner::{RunOutcome, Runner, counters_unavailable, needs_tracing};
pub use sharemap::plan::{Plan, optimal_plan};
