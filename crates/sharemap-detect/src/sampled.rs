//! The `sampled` detector: what a hardware profile would see, fed to the oracle's rule:
//! every k-th access of each thread (event sampling), or the accesses that miss a
//! per-thread cache or data TLB (the long-latency-load proxies of seed 001), or every access
//! inside windows of the whole trace (the time windows of a burst-sampled build, ideal: the
//! same share of every thread's work, with no instrumented code slowing a window down).

use crate::cache::PerThreadCache;
use crate::detector::{Detection, Detector, DetectorContext, DetectorInfo};
use crate::oracle::Seen;
use sharemap_core::SharingMatrix;
use sharemap_core::plugin::{Caps, MAX_CACHE_KB, MAX_TLB_ENTRIES, count, ranged};
use sharemap_trace::Chunk;

pub(crate) const INFO: DetectorInfo = DetectorInfo {
    name: "sampled",
    source: "Marathe & Mueller (seed 001) and STMap's (seed 002) sampling: hardware-style profiles",
    summary: "the oracle's rule on a sample: every k-th access of each thread (line blocks), the misses of a per-thread 8-way cache (line blocks), or of a per-thread 4-way data TLB (page blocks)",
    params: &[
        count("every", "100", "keep every k-th access of each thread (the default, k = 100)"),
        ranged("cache", "32", 1, MAX_CACHE_KB, "keep misses of a per-thread cache of this many KiB"),
        ranged("tlb", "64", 1, MAX_TLB_ENTRIES, "keep misses of a per-thread data TLB of this many entries"),
        count("window", "1000", "keep every access in windows of this many accesses of the whole trace"),
        count("gap", "9000", "accesses between windows (one window per window + gap, hashed offset)"),
    ],
    caps: Caps::WINDOWS,
    build: |params, ctx| {
        // `gap` alone chooses windows too, of the default length.
        let windows = params.is_set("window") || params.is_set("gap");
        let chosen = ["every", "cache", "tlb"].into_iter().filter(|k| params.is_set(k)).count() + windows as usize;
        if chosen > 1 {
            return Err(params.error("give one of every, cache, tlb or window"));
        }
        let filter = if windows {
            Filter::Windows { on: params.integer("window"), off: params.integer("gap") }
        } else if params.is_set("cache") {
            Filter::CacheMiss { kb: params.integer("cache") }
        } else if params.is_set("tlb") {
            Filter::TlbMiss { entries: params.integer("tlb") }
        } else {
            Filter::Every(params.integer("every"))
        };
        Ok(Box::new(Sampled::new(filter, ctx)))
    },
};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Filter {
    /// Every k-th access of each thread.
    Every(u64),
    /// Accesses missing a per-thread cache of `kb` KiB (8-way, the trace's line size).
    CacheMiss { kb: u64 },
    /// Accesses missing a per-thread data TLB of `entries` entries (4-way), page blocks.
    TlbMiss { entries: u64 },
    /// Every access inside one window of `on` accesses (counted over the whole trace) in
    /// each stretch of `on + off`.
    Windows { on: u64, off: u64 },
}

/// Whether access number `at` of the trace falls in a window of `on` accesses placed in its
/// stretch of `on + off` at an offset hashed from the stretch's number.
pub fn in_window(at: u64, on: u64, off: u64) -> bool {
    let period = on + off;
    (at % period).wrapping_sub(sharemap_core::mix(at / period) % (off + 1)) < on
}

pub struct Sampled {
    filter: Filter,
    seen: Seen,
    per_thread: Vec<u64>,
    cache: Option<PerThreadCache>,
}

impl Sampled {
    pub fn new(filter: Filter, ctx: &DetectorContext) -> Self {
        let (line, page) = (ctx.line_size, ctx.page_size.bytes());
        let (block, cache) = match filter {
            Filter::Every(_) | Filter::Windows { .. } => (line, None),
            Filter::CacheMiss { kb } => (line, Some(PerThreadCache::new((kb * 1024 / line) as usize, 8, line))),
            Filter::TlbMiss { entries } => (page, Some(PerThreadCache::new(entries as usize, 4, page))),
        };
        Sampled { filter, seen: Seen::new(block, ctx), per_thread: Vec::new(), cache }
    }
}

impl Detector for Sampled {
    fn spec(&self) -> String {
        match self.filter {
            Filter::Every(k) => format!("sampled:every={k}"),
            Filter::CacheMiss { kb } => format!("sampled:cache={kb}"),
            Filter::TlbMiss { entries } => format!("sampled:tlb={entries}"),
            Filter::Windows { on, off } => format!("sampled:window={on},gap={off}"),
        }
    }

    fn granularity(&self) -> crate::Granularity {
        match self.filter {
            Filter::TlbMiss { .. } => crate::Granularity::Page,
            _ => crate::Granularity::Line,
        }
    }

    fn chunk(&mut self, chunk: &Chunk) {
        let (filter, per_thread, cache) = (self.filter, &mut self.per_thread, &mut self.cache);
        self.seen.filter(chunk, |at, t, addr| match filter {
            Filter::Every(k) => {
                if per_thread.len() <= t as usize {
                    per_thread.resize(t as usize + 1, 0);
                }
                let n = &mut per_thread[t as usize];
                *n += 1;
                (*n).is_multiple_of(k)
            }
            Filter::Windows { on, off } => in_window(at, on, off),
            Filter::CacheMiss { .. } | Filter::TlbMiss { .. } => {
                cache.as_mut().expect("built with the filter").misses(t as usize, addr)
            }
        });
    }

    fn matrix(&self) -> &SharingMatrix {
        self.seen.matrix()
    }

    fn finish(self: Box<Self>) -> Detection {
        self.seen.finish()
    }
}
