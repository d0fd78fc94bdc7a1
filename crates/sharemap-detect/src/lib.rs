//! Sharing detection: who shares data with whom (the sharing matrix) and how each page is
//! used (page usage), from a trace, by the mechanisms of the research sharemap builds on.

pub mod cache;
pub mod detectors;
pub mod matrix;
pub mod oracle;
pub mod pages;
pub mod sammu;
pub mod stmap;

pub use detectors::{Cores, Detection, Detector, Extra, detect, detect_windows, detect_with, phase_changes};
pub use matrix::SharingMatrix;
pub use oracle::{Granularity, Oracle};
pub use pages::PageUsage;
