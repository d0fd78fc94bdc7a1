//! sharemap's experiments on real programs, returned as data for a front end to render:
//! `demo` (the main job on the embedded default) and `recordings` (the programs `reproduce`
//! builds and records before its claims run). Both drive sharemap-run's actors and the
//! facade's `Session`; they spawn only the programs they build.

pub mod demo;
pub mod recordings;
