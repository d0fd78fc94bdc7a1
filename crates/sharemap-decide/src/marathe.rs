//! Marathe & Mueller (seed 001): a hardware profile of the run, and each profiled page lives,
//! for the whole run, on the node whose threads took most of its samples (ties: the lower
//! node). The profile is what a PMU reports (the `Profiler`, one for every layer): by
//! default the long-latency loads, loads that miss a per-thread cache (the paper finds them
//! the better indicator); or the accesses that miss a per-thread data TLB of the trace's
//! pages; or one access in `every` (the first, then each `every`-th), which no PMU gives.

use crate::cache::PerThreadCache;
use sharemap_core::plugin::{MAX_CACHE_KB, MAX_TLB_ENTRIES, Param, ParamKind, choice, count, given, ranged, switch};

pub const SOURCE: Param = choice(
    "source",
    "cache-miss",
    &["cache-miss", "tlb-miss", "every"],
    "cache-miss (loads missing a per-thread cache: the long-latency-load proxy), tlb-miss (accesses missing a per-thread data TLB of the trace's pages) or every (each k-th access)",
);
pub const EVERY: Param =
    count("every", "100", "source=every: profile one access in this many (the first, then every n-th)");
pub const CACHE_KB: Param =
    ranged("cache-kb", "32", 1, MAX_CACHE_KB, "source=cache-miss: per-thread cache (KiB, 8-way, the trace's lines)");
pub const TLB_ENTRIES: Param =
    ranged("tlb-entries", "64", 1, MAX_TLB_ENTRIES, "source=tlb-miss: per-thread data TLB entries (4-way)");
pub const STORES: Param = switch(
    "stores",
    "0",
    "source=cache-miss: count the stores that miss too (a PMU sampling every memory operation's data source, not only load latency)",
);

/// Every parameter of the profile, as each layer's row lists them.
pub const PROFILE: [Param; 5] = [SOURCE, EVERY, CACHE_KB, TLB_ENTRIES, STORES];

/// The profile of the layers that read the whole trace in order before the run (simulate,
/// run): every access of the run's first share, instead of `source`'s samples.
pub const PREFIX: Param =
    given("prefix", "-", ParamKind::Share, "profile instead every access of the first share (0-1] of the run");

/// `PROFILE` and `PREFIX`: the rows of simulate's and run's marathe.
pub const WHOLE_TRACE_PROFILE: [Param; 6] = [SOURCE, EVERY, CACHE_KB, TLB_ENTRIES, STORES, PREFIX];

/// Which accesses the profile sees.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Source {
    /// Loads (and with `stores` stores too) missing a per-thread cache of `kb` KiB.
    CacheMiss { kb: u64, stores: bool },
    /// Accesses missing a per-thread data TLB of `entries` entries.
    TlbMiss { entries: u32 },
    /// One access in `k`.
    Every { k: u64 },
    /// Every access of the run's first `per_million` millionths.
    Prefix { per_million: u32 },
}

impl Source {
    /// From a row's parameters (`PROFILE`'s keys).
    pub fn from_params(p: &sharemap_core::Params) -> Source {
        if let Some(share) = p.has("prefix").then(|| p.get_number("prefix")).flatten() {
            return Source::Prefix { per_million: (share * 1e6).round() as u32 };
        }
        match p.text("source") {
            "tlb-miss" => Source::TlbMiss { entries: p.integer("tlb-entries") as u32 },
            "every" => Source::Every { k: p.integer("every").max(1) },
            _ => Source::CacheMiss { kb: p.integer("cache-kb"), stores: p.has("stores") && p.switch("stores") },
        }
    }

    /// In words: "loads missing a 32 KiB cache".
    pub fn describe(&self) -> String {
        match self {
            Source::CacheMiss { kb, stores: false } => format!("loads missing a {kb} KiB per-thread cache"),
            Source::CacheMiss { kb, stores: true } => format!("loads and stores missing a {kb} KiB per-thread cache"),
            Source::TlbMiss { entries } => format!("accesses missing a {entries}-entry per-thread TLB"),
            Source::Every { k } => format!("1 in {k} accesses"),
            Source::Prefix { per_million } => format!("the first {:.0}% of accesses", *per_million as f64 / 1e4),
        }
    }
}

/// A profile being taken, in trace order: whether each access is one of its samples.
pub struct Profiler {
    source: Source,
    cache: Option<PerThreadCache>,
    position: u64,
    /// With `Prefix`: the accesses it takes.
    prefix: u64,
}

impl Profiler {
    /// For a trace of `line`-byte lines and `page`-byte pages, `accesses` long (what a
    /// `Prefix` needs: it is refused without).
    pub fn new(source: Source, line: u64, page: u64, accesses: Option<u64>) -> Result<Profiler, String> {
        let cache = match source {
            Source::CacheMiss { kb, .. } => Some(PerThreadCache::new((kb * 1024 / line.max(1)) as usize, 8, line)),
            Source::TlbMiss { entries } => Some(PerThreadCache::new(entries as usize, 4, page)),
            Source::Every { .. } | Source::Prefix { .. } => None,
        };
        let prefix = match (source, accesses) {
            (Source::Prefix { per_million: 0 }, _) => return Err("marathe:prefix=0: expected a share in (0, 1]".into()),
            (Source::Prefix { per_million }, Some(n)) => (per_million as f64 / 1e6 * n as f64).ceil() as u64,
            (Source::Prefix { .. }, None) => return Err("marathe:prefix needs a trace whose length is known".into()),
            _ => 0,
        };
        Ok(Profiler { source, cache, position: 0, prefix })
    }

    /// The next access of the trace: whether the profile samples it. A store still fills
    /// the cache but is no long-latency load.
    pub fn sample(&mut self, thread: usize, addr: u64, write: bool) -> bool {
        let at = self.position;
        self.position += 1;
        match (&self.source, self.cache.as_mut()) {
            (Source::Every { k }, _) => sampled(at, *k),
            (Source::Prefix { .. }, _) => at < self.prefix,
            (Source::CacheMiss { stores, .. }, Some(c)) => c.misses(thread, addr) && (*stores || !write),
            (Source::TlbMiss { .. }, Some(c)) => c.misses(thread, addr),
            _ => false,
        }
    }
}

/// `every`'s default: where a layer samples without a parameter of its own.
pub fn default_every() -> u64 {
    EVERY.default.parse().expect("EVERY's default is a number")
}

/// Whether the access at position `index` (from 0) of the run is in the profile.
pub fn sampled(index: u64, every: u64) -> bool {
    index.is_multiple_of(every.max(1))
}

/// The node a page's samples per node place it on.
pub fn home<T: Copy + Ord>(samples: &[T]) -> usize {
    crate::most(samples)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Long-latency loads: a load's miss is a sample, a store's miss is not (but fills the
    /// line); a TLB profile counts misses of either, per page.
    #[test]
    fn the_profilers_sample_what_a_pmu_reports() {
        let mut p = Profiler::new(Source::CacheMiss { kb: 1, stores: false }, 64, 4096, None).unwrap();
        // A store misses (not sampled), the load after it hits; another line's load misses.
        assert!(!p.sample(0, 0, true));
        assert!(!p.sample(0, 8, false));
        assert!(p.sample(0, 64, false));
        let mut all = Profiler::new(Source::CacheMiss { kb: 1, stores: true }, 64, 4096, None).unwrap();
        assert!(all.sample(0, 0, true), "a store's miss counts with stores");
        let mut t = Profiler::new(Source::TlbMiss { entries: 4 }, 64, 8192, None).unwrap();
        assert!(t.sample(0, 0, true));
        assert!(!t.sample(0, 8000, false), "the same 8 KiB page");
        assert!(t.sample(0, 8192, false));
        let mut e = Profiler::new(Source::Every { k: 3 }, 64, 4096, None).unwrap();
        let got: Vec<bool> = (0..7).map(|i| e.sample(0, i * 64, false)).collect();
        assert_eq!(got, [true, false, false, true, false, false, true]);
        // The first 2 of 7 accesses (a share of 2/7, rounded up).
        let share = Source::Prefix { per_million: (2e6f64 / 7.0).round() as u32 };
        let mut p = Profiler::new(share, 64, 4096, Some(7)).unwrap();
        let got: Vec<bool> = (0..7).map(|i| p.sample(0, i * 64, true)).collect();
        assert_eq!(got, [true, true, false, false, false, false, false]);
        assert!(Profiler::new(share, 64, 4096, None).is_err(), "a prefix needs the length");
        assert!(Profiler::new(Source::Prefix { per_million: 0 }, 64, 4096, Some(7)).is_err());
    }

    #[test]
    fn the_first_access_and_every_nth_are_sampled() {
        let s: Vec<u64> = (0..10).filter(|&i| super::sampled(i, 4)).collect();
        assert_eq!(s, [0, 4, 8]);
        assert_eq!(super::home(&[2u64, 7, 7]), 1);
        assert_eq!(super::default_every(), 100);
    }
}
