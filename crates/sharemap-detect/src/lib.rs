//! Sharing detection: who shares data with whom (the sharing matrix) and how each page is
//! used (page usage), from a trace, by the mechanisms of the research sharemap builds on.
//! Each detector is one module behind the [`Detector`] trait, listed in [`DETECTORS`].

/// The per-thread caches and TLBs profiles and sampled detectors model (sharemap-decide's).
pub use sharemap_decide::cache;
pub mod detector;
pub mod faults;
pub mod oracle;
pub mod pass;
pub mod phases;
pub mod sammu;
pub mod sampled;
pub mod shared;
pub mod stmap;

pub use detector::{DETECTORS, Detection, Detector, DetectorContext, DetectorInfo, MappingDecision, Report};
pub use oracle::{Granularity, Oracle};
pub use pass::{DetectError, Found, detect, detect_many, detect_with_page_size};
pub use phases::{PHASE_CONFIRM_WINDOWS, phase_changes};
pub use shared::WhatIsShared;
pub use sharemap_core::{PageUsage, SharingMatrix};
