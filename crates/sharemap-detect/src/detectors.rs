//! Detectors by name: what part of the access stream each one sees, all fed to the oracle's
//! sharing rule. `oracle` sees everything; `sampled` what a hardware profile would (every
//! k-th access of each thread, or the misses of a per-thread cache or TLB); `faults` what
//! a page-fault based mechanism would (a thread's first access to a page in each window).

use crate::cache::PerThreadCache;
use crate::matrix::SharingMatrix;
use crate::oracle::{Granularity, Oracle};
use crate::pages::PageUsage;
use crate::sammu::{SammuParams, SammuReport, sammu};
use crate::stmap::{StmapDecision, StmapParams, stmap};
use rustc_hash::FxHashMap;
use sharemap_trace::{Chunk, TraceError, TraceSource};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Detector {
    Oracle(Granularity),
    /// Every k-th access of each thread.
    Every(u64),
    /// Accesses missing a per-thread cache of `kb` KiB (8-way, the trace's line size).
    CacheMiss {
        kb: u64,
    },
    /// Accesses missing a per-thread data TLB of `entries` entries (4-way), page granularity.
    TlbMiss {
        entries: u64,
    },
    /// A thread's first access to a page in each window of `window` accesses (page granularity).
    Faults {
        window: u64,
    },
    /// STMap (seed 002): address granularity, sampled, with the mapping decision.
    Stmap(StmapParams),
    /// SAMMU (seed 000): per-core TLBs, page history table, NUMA counters.
    Sammu(SammuParams),
}

/// Where threads run, for detectors that model hardware per core (SAMMU).
#[derive(Clone, Debug)]
pub struct Cores {
    /// Core index of thread t's PU (thread t uses entry t mod length).
    pub core_of_thread: Vec<usize>,
    /// NUMA node of each core.
    pub node_of_core: Vec<usize>,
    pub nodes: usize,
}

impl Default for Cores {
    fn default() -> Self {
        Cores { core_of_thread: vec![0], node_of_core: vec![0], nodes: 1 }
    }
}

impl Detector {
    /// `oracle[:line|page]`, `sampled[:every=K|cache[=KB]|tlb[=ENTRIES]]`, `faults[:window=N]`.
    pub fn parse(spec: &str) -> Result<Detector, String> {
        let (name, opt) = spec.split_once(':').map_or((spec, ""), |(n, o)| (n, o));
        let num = |s: &str, what: &str| {
            s.parse::<u64>()
                .ok()
                .filter(|&v| v > 0)
                .ok_or_else(|| format!("detector '{spec}': {what} must be a positive integer"))
        };
        match (name, opt) {
            ("oracle", "" | "line") => Ok(Detector::Oracle(Granularity::Line)),
            ("oracle", "page") => Ok(Detector::Oracle(Granularity::Page)),
            ("sampled", "") => Ok(Detector::Every(100)),
            ("sampled", o) if o.starts_with("every=") => Ok(Detector::Every(num(&o[6..], "every")?)),
            ("sampled", "cache") => Ok(Detector::CacheMiss { kb: 32 }),
            ("sampled", o) if o.starts_with("cache=") => Ok(Detector::CacheMiss { kb: num(&o[6..], "cache")? }),
            ("sampled", "tlb") => Ok(Detector::TlbMiss { entries: 64 }),
            ("sampled", o) if o.starts_with("tlb=") => Ok(Detector::TlbMiss { entries: num(&o[4..], "tlb")? }),
            ("faults", "") => Ok(Detector::Faults { window: 1_000_000 }),
            ("sammu", o) => {
                let mut p = SammuParams::default();
                for kv in o.split(',').filter(|s| !s.is_empty()) {
                    let (k, v) = kv
                        .split_once('=')
                        .ok_or_else(|| format!("detector '{spec}': expected key=value, got '{kv}'"))?;
                    let n = num(v, k)?;
                    match k {
                        "l1" => p.l1_entries = n as usize,
                        "l1ways" => p.l1_ways = n as usize,
                        "l2" => p.l2_entries = n as usize,
                        "l2ways" => p.l2_ways = n as usize,
                        "ac" => p.ac_bits = n.clamp(1, 32) as u32,
                        "nc" => p.nc_bits = n.min(16) as u32,
                        "nt" => p.nt = n as u32,
                        other => {
                            return Err(format!(
                                "detector '{spec}': unknown option '{other}' (l1, l1ways, l2, l2ways, ac, nc, nt)"
                            ));
                        }
                    }
                }
                Ok(Detector::Sammu(p))
            }
            ("stmap", o) => {
                let mut p = StmapParams::default();
                for kv in o.split(',').filter(|s| !s.is_empty()) {
                    let (k, v) = kv
                        .split_once('=')
                        .ok_or_else(|| format!("detector '{spec}': expected key=value, got '{kv}'"))?;
                    match k {
                        "si" => p.si = v.parse().map_err(|_| format!("detector '{spec}': si must be an integer"))?,
                        "mi" => p.mi = num(v, "mi")?,
                        "da" => p.da_threshold = num(v, "da")?,
                        "thread" => {
                            p.counting_thread =
                                v.parse().map_err(|_| format!("detector '{spec}': thread must be an integer"))?
                        }
                        other => {
                            return Err(format!("detector '{spec}': unknown option '{other}' (si, mi, da, thread)"));
                        }
                    }
                }
                Ok(Detector::Stmap(p))
            }
            ("faults", o) if o.starts_with("window=") => Ok(Detector::Faults { window: num(&o[7..], "window")? }),
            ("oracle" | "sampled" | "faults", o) => Err(format!("detector '{spec}': unknown option '{o}'")),
            _ => Err(format!("unknown detector '{name}' (detectors: oracle, sampled, faults, stmap, sammu)")),
        }
    }

    pub fn name(&self) -> String {
        match self {
            Detector::Oracle(Granularity::Line) => "oracle:line".into(),
            Detector::Oracle(Granularity::Page) => "oracle:page".into(),
            Detector::Every(k) => format!("sampled:every={k}"),
            Detector::CacheMiss { kb } => format!("sampled:cache={kb}"),
            Detector::TlbMiss { entries } => format!("sampled:tlb={entries}"),
            Detector::Faults { window } => format!("faults:window={window}"),
            Detector::Stmap(p) => {
                format!("stmap:si={},mi={},da={},thread={}", p.si, p.mi, p.da_threshold, p.counting_thread)
            }
            Detector::Sammu(p) => format!(
                "sammu:l1={},l1ways={},l2={},l2ways={},ac={},nc={},nt={}",
                p.l1_entries, p.l1_ways, p.l2_entries, p.l2_ways, p.ac_bits, p.nc_bits, p.nt
            ),
        }
    }
}

/// What a detector saw: its matrix, the page usage of the accesses it saw, and how many.
pub struct Detection {
    pub matrix: SharingMatrix,
    pub pages: PageUsage,
    pub seen: u64,
    pub accesses: u64,
}

/// What a detector reports besides its matrix.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Extra {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stmap: Option<StmapDecision>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sammu: Option<SammuReport>,
}

/// One pass over a trace, with what the detector reports besides the matrix.
pub fn detect_with(
    reader: &mut dyn TraceSource,
    det: Detector,
    cores: &Cores,
    progress: impl FnMut(u64),
) -> Result<(Detection, Extra), TraceError> {
    if let Detector::Stmap(p) = det {
        let (d, decision) = stmap(reader, p, progress)?;
        return Ok((d, Extra { stmap: Some(decision), ..Extra::default() }));
    }
    if let Detector::Sammu(p) = det {
        let n_cores = cores.node_of_core.len().max(1);
        let (d, report) = sammu(
            reader,
            p,
            n_cores,
            cores.nodes,
            |t| cores.core_of_thread[t as usize % cores.core_of_thread.len().max(1)],
            |c| cores.node_of_core.get(c).copied().unwrap_or(0),
            progress,
        )?;
        return Ok((d, Extra { sammu: Some(report), ..Extra::default() }));
    }
    Ok((detect(reader, det, progress)?, Extra::default()))
}

/// One pass over a trace.
pub fn detect(reader: &mut dyn TraceSource, det: Detector, progress: impl FnMut(u64)) -> Result<Detection, TraceError> {
    Ok(detect_windows(reader, det, 0, progress)?.0)
}

/// One pass, also cutting the matrix into windows of `window` accesses (0: none): the
/// sharing detected in each window (the last one may be shorter).
pub fn detect_windows(
    reader: &mut dyn TraceSource,
    det: Detector,
    window: u64,
    mut progress: impl FnMut(u64),
) -> Result<(Detection, Vec<SharingMatrix>), TraceError> {
    if matches!(det, Detector::Stmap(_) | Detector::Sammu(_)) {
        return Ok((detect_with(reader, det, &Cores::default(), progress)?.0, Vec::new()));
    }
    let mut windows: Vec<SharingMatrix> = Vec::new();
    let mut previous = SharingMatrix::new(0);
    let mut cut = |current: &SharingMatrix, windows: &mut Vec<SharingMatrix>| {
        let n = current.threads();
        previous.grow(n);
        let mut w = SharingMatrix::new(n);
        for i in 0..n {
            for j in i + 1..n {
                w.add(i, j, current.get(i, j) - previous.get(i, j));
            }
        }
        windows.push(w);
        previous = current.clone();
    };
    let meta = reader.metadata().clone();
    let (line, page) = (meta.line_size.max(1).next_power_of_two(), meta.page_size.max(1).next_power_of_two());
    let block = match det {
        Detector::Oracle(Granularity::Line) | Detector::Every(_) | Detector::CacheMiss { .. } => line,
        _ => page,
    };
    let mut oracle = Oracle::new(block);
    let mut usage = PageUsage::new(page);
    let mut per_thread: Vec<u64> = Vec::new();
    let mut cache = match det {
        Detector::CacheMiss { kb } => Some(PerThreadCache::new((kb * 1024 / line) as usize, 8, line)),
        Detector::TlbMiss { entries } => Some(PerThreadCache::new(entries as usize, 4, page)),
        _ => None,
    };
    let mut faulted: FxHashMap<(u64, u32), u64> = FxHashMap::default();
    let (mut seen, mut accesses, mut threads) = (0u64, 0u64, meta.threads as usize);
    let mut chunk = Chunk::default();
    while reader.next_chunk(&mut chunk)? {
        let a = &chunk.accesses;
        for (i, (&t, &addr)) in a.thread.iter().zip(&a.addr).enumerate() {
            let at = chunk.first_access + i as u64;
            if window > 0 && at > 0 && at.is_multiple_of(window) {
                cut(&oracle.matrix, &mut windows);
            }
            threads = threads.max(t as usize + 1);
            let keep = match det {
                Detector::Oracle(_) => true,
                Detector::Every(k) => {
                    if per_thread.len() <= t as usize {
                        per_thread.resize(t as usize + 1, 0);
                    }
                    per_thread[t as usize] += 1;
                    per_thread[t as usize].is_multiple_of(k)
                }
                Detector::CacheMiss { .. } | Detector::TlbMiss { .. } => {
                    cache.as_mut().expect("built").misses(t as usize, addr)
                }
                Detector::Stmap(_) | Detector::Sammu(_) => unreachable!("handled above"),
                Detector::Faults { window } => {
                    let w = at / window;
                    let last = faulted.entry((addr / page, t)).or_insert(u64::MAX);
                    let fault = *last != w;
                    *last = w;
                    fault
                }
            };
            if keep {
                oracle.access(t, addr);
                usage.access(t, addr);
                seen += 1;
            }
        }
        accesses = chunk.first_access + a.len() as u64;
        progress(accesses);
    }
    if window > 0 && accesses > 0 {
        cut(&oracle.matrix, &mut windows);
    }
    let fit = |m: &SharingMatrix| {
        let mut out = SharingMatrix::new(threads);
        let k = m.threads().min(threads);
        for i in 0..k {
            for j in i + 1..k {
                out.add(i, j, m.get(i, j));
            }
        }
        out
    };
    let windows = windows.iter().map(fit).collect();
    Ok((Detection { matrix: fit(&oracle.matrix), pages: usage, seen, accesses }, windows))
}

/// Windows over which a change must hold: a candidate window and the ones after it.
pub const PHASE_CONFIRM_WINDOWS: usize = 3;

/// Windows where the sharing pattern changes. A window starts a new phase when its pairs
/// correlate below `threshold` with the sharing accumulated since the last change, and so
/// do the candidate and the next windows taken together (`PHASE_CONFIRM_WINDOWS` in all).
/// The confirmation matters: one window often holds only part of a phase's pattern (a
/// thread meets its left neighbour at the start of its sweep and its right one at the end),
/// which alone correlates poorly with the whole. Windows without sharing are skipped.
/// Returns window indexes.
pub fn phase_changes(windows: &[SharingMatrix], threshold: f64) -> Vec<usize> {
    let mut out = Vec::new();
    let mut phase: Option<SharingMatrix> = None;
    let add = |acc: &mut SharingMatrix, w: &SharingMatrix| {
        let n = w.threads();
        acc.grow(n);
        for i in 0..n {
            for j in i + 1..n {
                acc.add(i, j, w.get(i, j));
            }
        }
    };
    for (k, w) in windows.iter().enumerate() {
        if w.total() == 0.0 {
            continue;
        }
        let Some(acc) = phase.as_mut() else {
            phase = Some(w.clone());
            continue;
        };
        let changed = acc.correlation(w) < threshold && {
            let mut ahead = w.clone();
            for next in windows.iter().skip(k + 1).take(PHASE_CONFIRM_WINDOWS - 1) {
                add(&mut ahead, next);
            }
            acc.correlation(&ahead) < threshold
        };
        if changed {
            out.push(k);
            phase = Some(w.clone());
        } else {
            add(acc, w);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use sharemap_trace::{Access, Metadata, TraceReader, TraceWriter};

    fn trace(dir: &tempfile::TempDir, accesses: &[Access]) -> std::path::PathBuf {
        let path = dir.path().join("t.trace");
        let mut w = TraceWriter::create(&path, None, Metadata::default()).unwrap();
        accesses.iter().for_each(|a| w.access(*a).unwrap());
        w.finish().unwrap();
        path
    }

    #[test]
    fn names_parse_and_round_trip() {
        for spec in [
            "oracle:line",
            "oracle:page",
            "sampled:every=7",
            "sampled:cache=16",
            "sampled:tlb=32",
            "faults:window=500",
            "stmap:si=10,mi=500,da=20,thread=0",
            "sammu:l1=32,l1ways=4,l2=256,l2ways=8,ac=16,nc=4,nt=8",
        ] {
            assert_eq!(Detector::parse(spec).unwrap().name(), spec);
        }
        assert_eq!(Detector::parse("sampled").unwrap(), Detector::Every(100));
        assert!(Detector::parse("sampled:every=0").unwrap_err().contains("positive integer"));
        assert!(Detector::parse("oracle:x").unwrap_err().contains("unknown option 'x'"));
        assert!(Detector::parse("stmp").unwrap_err().contains("unknown detector 'stmp'"));
    }

    #[test]
    fn every_kth_access_per_thread() {
        let d = tempfile::tempdir().unwrap();
        // Threads 0 and 1 alternate on one line: with every=2 each thread's 2nd, 4th... count.
        let acc: Vec<Access> = (0..8).map(|i| Access::read(i % 2, 0x1000, 8)).collect();
        let p = trace(&d, &acc);
        let all =
            detect(&mut TraceReader::open(&p, None).unwrap(), Detector::Oracle(Granularity::Line), |_| {}).unwrap();
        let half = detect(&mut TraceReader::open(&p, None).unwrap(), Detector::Every(2), |_| {}).unwrap();
        assert_eq!(all.seen, 8);
        assert_eq!(half.seen, 4);
        assert_eq!(all.matrix.get(0, 1), 7.0);
        assert_eq!(half.matrix.get(0, 1), 3.0);
    }

    #[test]
    fn faults_see_first_touches_per_window() {
        let d = tempfile::tempdir().unwrap();
        // Thread 0 touches page 0x1000 10 times, then thread 1 does; windows of 5 accesses.
        let mut acc: Vec<Access> = (0..10).map(|_| Access::read(0, 0x1000, 8)).collect();
        acc.extend((0..10).map(|_| Access::read(1, 0x1008, 8)));
        let p = trace(&d, &acc);
        let f = detect(&mut TraceReader::open(&p, None).unwrap(), Detector::Faults { window: 5 }, |_| {}).unwrap();
        // One fault per thread per window: windows 0, 1 for thread 0; 2, 3 for thread 1.
        assert_eq!(f.seen, 4);
        assert_eq!(f.matrix.get(0, 1), 1.0);
    }

    #[test]
    fn a_change_must_hold_over_the_next_windows() {
        let pairs = |list: &[(usize, usize)]| {
            let mut m = SharingMatrix::new(8);
            list.iter().for_each(|&(a, b)| m.add(a, b, 10.0));
            m
        };
        // A chain 0-1-2-3 whose windows each show part of it, with one window that shows
        // only 2-3: no change. Then 4-5 for good: one change, where it starts.
        let part_a = pairs(&[(0, 1), (1, 2)]);
        let part_b = pairs(&[(1, 2), (2, 3)]);
        let other = pairs(&[(4, 5)]);
        let windows = [
            part_a.clone(),
            part_b.clone(),
            pairs(&[(2, 3)]),
            part_a.clone(),
            part_b,
            other.clone(),
            other.clone(),
            other,
        ];
        assert_eq!(phase_changes(&windows, 0.5), vec![5]);
        // The lone 2-3 window alone correlates poorly with the phase so far (the two windows
        // before it): it is the confirmation that keeps it from being a change.
        let so_far = pairs(&[(0, 1), (1, 2), (1, 2), (2, 3)]);
        assert!(so_far.correlation(&pairs(&[(2, 3)])) < 0.5);
    }

    #[test]
    fn windows_and_phase_changes() {
        let d = tempfile::tempdir().unwrap();
        // 0-1 share for 40 accesses, then 2-3 do: two windows of 40 each, one phase change.
        let mut acc: Vec<Access> = (0..40u64).map(|i| Access::read((i % 2) as u32, 0x1000, 8)).collect();
        acc.extend((0..40u64).map(|i| Access::read(2 + (i % 2) as u32, 0x2000, 8)));
        let p = trace(&d, &acc);
        let (all, windows) =
            detect_windows(&mut TraceReader::open(&p, None).unwrap(), Detector::Oracle(Granularity::Line), 20, |_| {})
                .unwrap();
        assert_eq!(windows.len(), 4);
        let sum: f64 = windows.iter().map(|w| w.total()).sum();
        assert_eq!(sum, all.matrix.total(), "windows add up to the whole");
        assert_eq!(windows[0].get(0, 1), 19.0);
        assert_eq!(windows[1].get(0, 1), 20.0);
        assert_eq!(windows[2].get(2, 3), 19.0);
        assert_eq!(phase_changes(&windows, 0.5), vec![2]);
    }

    #[test]
    fn cache_misses_only() {
        let d = tempfile::tempdir().unwrap();
        // A thread rereading one line misses once.
        let acc: Vec<Access> = (0..50).map(|_| Access::read(0, 0x40, 8)).collect();
        let p = trace(&d, &acc);
        let c = detect(&mut TraceReader::open(&p, None).unwrap(), Detector::CacheMiss { kb: 32 }, |_| {}).unwrap();
        assert_eq!(c.seen, 1);
    }
}
