//! One pass over a trace feeding any number of detectors, each chunk to all of them (in
//! parallel when there are several), with the sharing optionally cut into windows.

use crate::detector::{self, Detection, Detector, DetectorContext, fit};
use sharemap_core::{PageSizeError, SharingMatrix, SpecError};
use sharemap_machine::ThreadPlacement;
use sharemap_trace::{Chunk, TraceError, TraceSource};

/// What one detector found over the trace.
pub struct Found {
    pub detection: Detection,
    /// The sharing detected in each window of accesses (empty without windows).
    pub windows: Vec<SharingMatrix>,
}

#[derive(Debug, thiserror::Error)]
pub enum DetectError {
    #[error(transparent)]
    Spec(#[from] SpecError),
    #[error(transparent)]
    Trace(#[from] TraceError),
    #[error("the trace's {0}")]
    PageSize(#[from] PageSizeError),
}

/// Builds the detector `spec` names for this trace and runs it.
pub fn detect(source: &mut dyn TraceSource, spec: &str, placement: &ThreadPlacement) -> Result<Detection, DetectError> {
    let spec = detector::parse(spec)?;
    let ctx = DetectorContext::new(source.metadata(), placement)?;
    let d = detector::build(&spec, &ctx)?;
    Ok(detect_many(source, vec![d], 0, &|_| {})?.pop().expect("one detector").detection)
}

/// `detect` with pages of `page_size` bytes instead of the trace's.
pub fn detect_with_page_size(
    source: &mut dyn TraceSource,
    spec: &str,
    placement: &ThreadPlacement,
    page_size: u64,
) -> Result<Detection, DetectError> {
    let spec = detector::parse(spec)?;
    let mut ctx = DetectorContext::new(source.metadata(), placement)?;
    ctx.page_size = sharemap_core::PageSize::new(page_size)?;
    let d = detector::build(&spec, &ctx)?;
    Ok(detect_many(source, vec![d], 0, &|_| {})?.pop().expect("one detector").detection)
}

/// Runs the detectors over the rest of the trace. With `window` > 0 each detector's sharing
/// is also cut into windows of that many accesses (the last one may be shorter). Matrices
/// come out sized to the trace's threads. `progress` is told the accesses read so far.
///
/// Without windows, detectors that fork (`Detector::fork`) read one run of chunks per worker
/// at the same time, and the runs are joined in order.
///
/// A burst-sampled trace's sharing is weighted by what a recorded unit stands for
/// (`Burst::sharing_weight`), so that it estimates the whole run's; its page usage keeps the
/// accesses recorded.
pub fn detect_many(
    source: &mut dyn TraceSource,
    detectors: Vec<Box<dyn Detector>>,
    window: u64,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Vec<Found>, TraceError> {
    let burst = source.metadata().burst.clone();
    let mut found = run_unweighted(source, detectors, window, progress)?;
    if let Some(b) = burst {
        // One weight for every pair: scaling pairs by their threads' own weights (the mean of
        // the two) turned cg's matrix upside down (correlation -0.996 with the complete
        // trace's): the master's serial work lowers its weight, not its sharing's.
        let w = b.sharing_weight();
        for f in &mut found {
            f.detection.matrix.scale_pairs(|_, _| w);
            f.windows.iter_mut().for_each(|m| m.scale_pairs(|_, _| w));
        }
    }
    Ok(found)
}

fn run_unweighted(
    source: &mut dyn TraceSource,
    detectors: Vec<Box<dyn Detector>>,
    window: u64,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Vec<Found>, TraceError> {
    let runs = rayon::current_num_threads();
    if window == 0 && runs > 1 && detectors.iter().all(|d| d.fork().is_some()) {
        return run_in_parts(source, detectors, runs, progress);
    }
    let mut states: Vec<State> =
        detectors.into_iter().map(|d| State { d, previous: SharingMatrix::new(0), windows: Vec::new() }).collect();
    let mut threads = 0usize;
    let mut end = 0u64;
    let mut part = Chunk::default();
    source.for_each_chunk(&mut |chunk| {
        if let Some(&t) = chunk.accesses.thread.iter().max() {
            threads = threads.max(t as usize + 1);
        }
        end = chunk.first_access + chunk.accesses.len() as u64;
        if window == 0 {
            feed(&mut states, chunk);
        } else {
            // Cut before each access at a multiple of the window.
            let mut lo = 0usize;
            while lo < chunk.accesses.len() {
                let at = chunk.first_access + lo as u64;
                if at > 0 && at.is_multiple_of(window) {
                    states.iter_mut().for_each(State::cut);
                }
                let next = (at / window + 1) * window;
                let hi = ((next - chunk.first_access) as usize).min(chunk.accesses.len());
                slice(chunk, lo, hi, &mut part);
                feed(&mut states, &part);
                lo = hi;
            }
        }
        progress(end);
        Ok(())
    })?;
    if window > 0 && end > 0 {
        states.iter_mut().for_each(State::cut);
    }
    let threads = threads.max(source.metadata().threads as usize);
    Ok(states
        .into_iter()
        .map(|s| {
            let mut detection = s.d.finish();
            detection.matrix = fit(&detection.matrix, threads);
            Found { detection, windows: s.windows.iter().map(|w| fit(w, threads)).collect() }
        })
        .collect())
}

/// Every detector reads each of `runs` runs of the trace in a copy of its own (run 0 in the
/// detector itself), the runs at the same time; the copies are then joined in run order.
fn run_in_parts(
    source: &mut dyn TraceSource,
    detectors: Vec<Box<dyn Detector>>,
    runs: usize,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Vec<Found>, TraceError> {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
    let forks = |ds: &[Box<dyn Detector>]| ds.iter().map(|d| d.fork().expect("checked")).collect::<Vec<_>>();
    let mut parts: Vec<Mutex<Vec<Box<dyn Detector>>>> = (1..runs).map(|_| Mutex::new(forks(&detectors))).collect();
    parts.insert(0, Mutex::new(detectors));
    let (threads, read) = (AtomicUsize::new(0), AtomicU64::new(0));
    source.for_each_chunk_in_parts(runs, &|run, chunk| {
        if let Some(&t) = chunk.accesses.thread.iter().max() {
            threads.fetch_max(t as usize + 1, Ordering::Relaxed);
        }
        let mut ds = parts[run].lock().unwrap_or_else(|e| e.into_inner());
        if let [one] = ds.as_mut_slice() {
            one.chunk(chunk);
        } else {
            use rayon::prelude::*;
            ds.par_iter_mut().for_each(|d| d.chunk(chunk));
        }
        let n = chunk.accesses.len() as u64;
        progress(read.fetch_add(n, Ordering::Relaxed) + n);
        Ok(())
    })?;
    let mut parts = parts.into_iter().map(|p| p.into_inner().unwrap_or_else(|e| e.into_inner()));
    let mut joined = parts.next().expect("run 0");
    for later in parts {
        joined.iter_mut().zip(later).for_each(|(d, l)| d.join(l));
    }
    let threads = threads.into_inner().max(source.metadata().threads as usize);
    Ok(joined
        .into_iter()
        .map(|d| {
            let mut detection = d.finish();
            detection.matrix = fit(&detection.matrix, threads);
            Found { detection, windows: Vec::new() }
        })
        .collect())
}

struct State {
    d: Box<dyn Detector>,
    previous: SharingMatrix,
    windows: Vec<SharingMatrix>,
}

impl State {
    /// Ends a window: the sharing detected since the last cut.
    fn cut(&mut self) {
        let current = self.d.matrix();
        let n = current.threads();
        self.previous.grow(n);
        let mut w = SharingMatrix::new(n);
        for i in 0..n {
            for j in i + 1..n {
                w.add(i, j, current.get(i, j) - self.previous.get(i, j));
            }
        }
        self.windows.push(w);
        self.previous = current.clone();
    }
}

fn feed(states: &mut [State], chunk: &Chunk) {
    if let [one] = states {
        one.d.chunk(chunk);
    } else {
        use rayon::prelude::*;
        states.par_iter_mut().for_each(|s| s.d.chunk(chunk));
    }
}

/// Accesses `lo..hi` of `chunk` and the events among them (those at `hi` go to the next
/// slice, unless `hi` ends the chunk).
fn slice(chunk: &Chunk, lo: usize, hi: usize, out: &mut Chunk) {
    out.clear();
    out.first_access = chunk.first_access + lo as u64;
    let a = &chunk.accesses;
    for i in lo..hi {
        out.accesses.push(a.get(i));
    }
    let (from, to) = (chunk.first_access + lo as u64, chunk.first_access + hi as u64);
    let last = hi == a.len();
    out.events.extend(chunk.events.iter().filter(|e| e.at >= from && (e.at < to || (last && e.at == to))).cloned());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detector::{DETECTORS, build, parse};
    use sharemap_machine::Machine;
    use sharemap_trace::{Access, MemoryTrace};

    fn one_core() -> ThreadPlacement {
        ThreadPlacement::identity(&Machine::from_spec("pu:1").unwrap())
    }

    fn detect_on(accesses: &[Access], spec: &str) -> Detection {
        detect(&mut MemoryTrace::from_accesses(accesses.iter().copied()), spec, &one_core()).unwrap()
    }

    #[test]
    fn names_parse_and_round_trip() {
        let placement = one_core();
        let ctx = DetectorContext { line_size: 64, page_size: Default::default(), threads: 0, placement: &placement };
        let spec_of = |text: &str| build(&parse(text).unwrap(), &ctx).map(|d| d.spec());
        for spec in [
            "oracle:line",
            "oracle:page",
            "sampled:every=7",
            "sampled:cache=16",
            "sampled:tlb=32",
            "sampled:window=50,gap=450",
            "faults:window=500",
            "stmap:si=10,mi=500,da=20,thread=0",
            "sammu:l1=32,l1ways=4,l2=256,l2ways=8,ac=16,nc=4,nt=8",
        ] {
            assert_eq!(spec_of(spec).unwrap(), spec);
        }
        assert_eq!(spec_of("sampled").unwrap(), "sampled:every=100");
        assert_eq!(spec_of("sampled:cache").unwrap(), "sampled:cache=32");
        assert!(spec_of("sampled:every=0").unwrap_err().to_string().contains("positive integer"));
        assert_eq!(spec_of("sampled:window").unwrap(), "sampled:window=1000,gap=9000");
        assert_eq!(spec_of("sampled:gap=5").unwrap(), "sampled:window=1000,gap=5");
        assert!(spec_of("sampled:tlb,gap=5").unwrap_err().to_string().contains("give one of"));
        assert!(spec_of("sampled:every=5,window=5").unwrap_err().to_string().contains("give one of"));
        assert!(parse("oracle:x").unwrap_err().to_string().contains("unknown option 'x'"));
        assert!(parse("stmp").unwrap_err().to_string().contains("unknown detector 'stmp'"));
        // Every registered detector builds with its defaults.
        for d in DETECTORS {
            assert!(build(&parse(d.name).unwrap(), &ctx).is_ok(), "{}", d.name);
        }
    }

    #[test]
    fn every_kth_access_per_thread() {
        // Threads 0 and 1 alternate on one line: with every=2 each thread's 2nd, 4th... count.
        let acc: Vec<Access> = (0..8).map(|i| Access::read(i % 2, 0x1000, 8)).collect();
        let all = detect_on(&acc, "oracle:line");
        let half = detect_on(&acc, "sampled:every=2");
        assert_eq!(all.seen, 8);
        assert_eq!(half.seen, 4);
        assert_eq!(all.matrix.get(0, 1), 7.0);
        assert_eq!(half.matrix.get(0, 1), 3.0);
    }

    #[test]
    fn windows_keep_one_run_per_stretch() {
        // 10,000 accesses, thread i % 3 on its own page: windows of 7 in every 7 + 43.
        let acc: Vec<Access> = (0..10_000u64).map(|i| Access::read((i % 3) as u32, 0x1000 * (i % 3 + 1), 8)).collect();
        let w = detect_on(&acc, "sampled:window=7,gap=43");
        assert_eq!(w.seen, 200 * 7, "7 accesses in each of the 200 stretches");
        // The kept accesses of each stretch are one run of 7 inside it, at varying offsets.
        let mut offsets = std::collections::BTreeSet::new();
        for k in 0..200u64 {
            let kept: Vec<u64> = (50 * k..50 * (k + 1)).filter(|&i| crate::sampled::in_window(i, 7, 43)).collect();
            assert_eq!(kept.len(), 7, "stretch {k}");
            assert_eq!(kept[6] - kept[0], 6, "stretch {k}: one run");
            offsets.insert(kept[0] - 50 * k);
        }
        assert!(offsets.len() > 20, "offsets vary: {offsets:?}");
        // Page usage counts what the windows kept: each thread a third of them, on its page.
        let pages = w.pages.sorted();
        assert_eq!(pages.len(), 3);
        for (t, (page, e)) in pages.into_iter().enumerate() {
            let n: u64 = e.accesses.iter().sum();
            assert_eq!(n, e.accesses[t], "page {page} holds thread {t}'s accesses only");
            assert!((440..=500).contains(&n), "page {page}: {n} of 1,400");
        }
    }

    #[test]
    fn faults_see_first_touches_per_window() {
        // Thread 0 touches page 0x1000 10 times, then thread 1 does; windows of 5 accesses.
        let mut acc: Vec<Access> = (0..10).map(|_| Access::read(0, 0x1000, 8)).collect();
        acc.extend((0..10).map(|_| Access::read(1, 0x1008, 8)));
        let f = detect_on(&acc, "faults:window=5");
        // One fault per thread per window: windows 0, 1 for thread 0; 2, 3 for thread 1.
        assert_eq!(f.seen, 4);
        assert_eq!(f.matrix.get(0, 1), 1.0);
    }

    #[test]
    fn windows_and_phase_changes() {
        // 0-1 share for 40 accesses, then 2-3 do: two windows of 40 each, one phase change.
        let mut acc: Vec<Access> = (0..40u64).map(|i| Access::read((i % 2) as u32, 0x1000, 8)).collect();
        acc.extend((0..40u64).map(|i| Access::read(2 + (i % 2) as u32, 0x2000, 8)));
        // Chunks of 7 accesses: window edges fall inside chunks.
        for chunk in [7, 1 << 14] {
            let mut trace = MemoryTrace::new(Default::default()).with_chunk_accesses(chunk);
            acc.iter().for_each(|a| trace.access(*a));
            let placement = one_core();
            let ctx = DetectorContext::new(trace.metadata(), &placement).unwrap();
            let d = build(&parse("oracle").unwrap(), &ctx).unwrap();
            let found = detect_many(&mut trace, vec![d], 20, &|_| {}).unwrap().pop().unwrap();
            let (all, windows) = (found.detection, found.windows);
            assert_eq!(windows.len(), 4);
            let sum: f64 = windows.iter().map(|w| w.total()).sum();
            assert_eq!(sum, all.matrix.total(), "windows add up to the whole");
            assert_eq!(windows[0].get(0, 1), 19.0);
            assert_eq!(windows[1].get(0, 1), 20.0);
            assert_eq!(windows[2].get(2, 3), 19.0);
            assert_eq!(crate::phases::phase_changes(&windows, 0.5), vec![2]);
        }
    }

    #[test]
    fn cache_misses_only() {
        // A thread rereading one line misses once.
        let acc: Vec<Access> = (0..50).map(|_| Access::read(0, 0x40, 8)).collect();
        assert_eq!(detect_on(&acc, "sampled:cache=32").seen, 1);
    }

    #[test]
    fn several_detectors_in_one_pass_match_separate_runs() {
        let acc: Vec<Access> = (0..5000u64).map(|i| Access::read((i * 7 % 5) as u32, (i * 97) % 8192, 8)).collect();
        let specs = ["oracle", "sampled:every=3", "faults:window=100", "stmap:si=1,mi=50", "sammu:l1=4,l2=8"];
        let placement = one_core();
        let mut trace = MemoryTrace::from_accesses(acc.iter().copied()).with_chunk_accesses(333);
        let ctx = DetectorContext::new(trace.metadata(), &placement).unwrap();
        let all: Vec<Box<dyn Detector>> = specs.iter().map(|s| build(&parse(s).unwrap(), &ctx).unwrap()).collect();
        let together = detect_many(&mut trace, all, 0, &|_| {}).unwrap();
        for (spec, found) in specs.iter().zip(together) {
            let alone = detect_on(&acc, spec);
            assert_eq!(found.detection.matrix, alone.matrix, "{spec}");
            assert_eq!(found.detection.seen, alone.seen, "{spec}");
            assert_eq!(found.detection.report, alone.report, "{spec}");
        }
    }

    /// SAMMU's end-of-trace flush is off unless asked for; the report says where the
    /// statistics updates came from. Two threads on one core walk four pages once: nothing
    /// leaves the 64 + 512-entry TLB, so only the flush would update anything.
    #[test]
    fn sammu_flushes_only_when_asked_and_counts_each_cause() {
        let acc: Vec<Access> = (0..400u64).map(|i| Access::read((i % 2) as u32, (i % 4) * 4096, 8)).collect();
        let report = |spec: &str| detect_on(&acc, spec).report.unwrap().json;
        let off = report("sammu");
        assert_eq!((off["updates"].as_u64(), off["flushed"].as_u64()), (Some(0), Some(0)));
        let on = report("sammu:flush");
        assert_eq!(on["flushed"].as_u64(), Some(4));
        assert_eq!(on["updates_from_flush"].as_u64(), Some(4));
        assert_eq!(on["updates_from_evictions"].as_u64(), Some(0));
        assert_eq!(report("sammu:flush=0"), off);
        // Eight pages through 2 + 2 entries: evictions update too, and the counts add up.
        let wide: Vec<Access> = (0..400u64).map(|i| Access::read((i % 2) as u32, (i % 8) * 4096, 8)).collect();
        let small = detect_on(&wide, "sammu:l1=2,l1ways=2,l2=2,l2ways=2,flush=1").report.unwrap().json;
        let sum: u64 = ["updates_from_evictions", "updates_from_saturations", "updates_from_flush"]
            .iter()
            .map(|k| small[*k].as_u64().unwrap())
            .sum();
        assert_eq!(Some(sum), small["updates"].as_u64());
        assert!(small["updates_from_evictions"].as_u64().unwrap() > 0);
    }
}
