//! The `faults` detector: what a page-fault based mechanism sees (kMAF, first-touch
//! sampling): a thread's first access to a page in each window of accesses, fed to the
//! oracle's rule at page granularity.

use crate::detector::{Detection, Detector, DetectorContext, DetectorInfo};
use crate::oracle::Seen;
use rustc_hash::FxHashMap;
use sharemap_core::SharingMatrix;
use sharemap_core::plugin::{Caps, count};
use sharemap_trace::Chunk;

pub(crate) const INFO: DetectorInfo = DetectorInfo {
    name: "faults",
    source: "page-fault sampling (kMAF; `sharemap record --backend faults`)",
    summary: "a thread's first access to a page in each window of accesses, as faults on pages made inaccessible every window would show",
    params: &[count("window", "1000000", "accesses per window")],
    caps: Caps::WINDOWS,
    build: |params, ctx| Ok(Box::new(Faults::new(params.integer("window"), ctx))),
};

pub struct Faults {
    window: u64,
    page_shift: u32,
    seen: Seen,
    /// (page, thread) -> the window of its last fault.
    faulted: FxHashMap<(u64, u32), u64>,
}

impl Faults {
    pub fn new(window: u64, ctx: &DetectorContext) -> Self {
        Faults {
            window,
            page_shift: ctx.page_size.shift(),
            seen: Seen::new(ctx.page_size.bytes(), ctx),
            faulted: FxHashMap::default(),
        }
    }
}

impl Detector for Faults {
    fn spec(&self) -> String {
        format!("faults:window={}", self.window)
    }

    fn granularity(&self) -> crate::Granularity {
        crate::Granularity::Page
    }

    fn chunk(&mut self, chunk: &Chunk) {
        let (window, shift, faulted) = (self.window, self.page_shift, &mut self.faulted);
        self.seen.filter(chunk, |at, t, addr| {
            let last = faulted.entry((addr >> shift, t)).or_insert(u64::MAX);
            let fault = *last != at / window;
            *last = at / window;
            fault
        });
    }

    fn matrix(&self) -> &SharingMatrix {
        self.seen.matrix()
    }

    fn finish(self: Box<Self>) -> Detection {
        self.seen.finish()
    }
}
