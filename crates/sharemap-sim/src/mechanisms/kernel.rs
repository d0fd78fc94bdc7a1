//! The kernel's and runtimes' data mapping on simulated time: Linux's automatic NUMA
//! balancing, kMAF (with its thread mapping from the same faults) and Carrefour. Their
//! periods are simulated milliseconds; each fault they take costs its thread `fault-us`.

use super::remap::Remapper;
use super::{Context, Mechanism, MechanismError, Start};
use crate::sim::{FirstPlacement, Sim};
use rustc_hash::FxHashMap;
use sharemap_core::Params;
use sharemap_core::SharingMatrix;
use sharemap_core::spec::SpecError;
use sharemap_decide::carrefour::{self, Decision};
use sharemap_decide::kmaf;
use sharemap_decide::numa_balancing::{self, TwoStageFilter};

fn os_start(ctx: &Context) -> Start {
    Start { pus: super::os_pus(ctx), placement: FirstPlacement::FirstTouch, homes: Vec::new() }
}

fn node_of(sim: &mut Sim, thread: usize) -> usize {
    let pu = sim.pu_of(thread);
    sim.model().pu_node[pu]
}

/// Linux's automatic NUMA balancing: after `scan-delay-ms`, every `scan-period-ms` the
/// scanner marks the next `scan-size-mb` of pages (in address order, wrapping); the first
/// access to a marked page is a hinting fault; the page moves to the faulting node when the
/// page's previous hinting fault came from that node too (the kernel's two-stage filter).
pub fn build_numa_balancing(p: &Params, _seed: u64) -> Result<Box<dyn Mechanism>, SpecError> {
    Ok(Box::new(NumaBalancing {
        next_scan_ns: p.number("scan-delay-ms") * 1e6,
        period_ns: p.number("scan-period-ms") * 1e6,
        scan_mb: p.number("scan-size-mb"),
        fault_ns: p.number("fault-us") * 1e3,
        pages: FxHashMap::default(),
        cursor: 0,
        first_scan_ns: p.number("scan-delay-ms") * 1e6,
        scans: 0,
        hinting_faults: 0,
    }))
}

struct NumaBalancing {
    next_scan_ns: f64,
    period_ns: f64,
    scan_mb: f64,
    fault_ns: f64,
    /// Per page seen: marked, and its two-stage filter.
    pages: FxHashMap<u64, (bool, TwoStageFilter)>,
    /// The next page (number) the scanner marks.
    cursor: u64,
    /// When the first scan comes, and scans and hinting faults so far.
    first_scan_ns: f64,
    scans: u64,
    hinting_faults: u64,
}

impl Mechanism for NumaBalancing {
    fn start(&mut self, ctx: &Context) -> Result<Start, MechanismError> {
        Ok(os_start(ctx))
    }

    fn online(&self) -> bool {
        true
    }

    fn after_access(&mut self, sim: &mut Sim, thread: usize, addr: u64, _write: bool, _ns: f64) {
        let page = addr >> sim.page_shift();
        let state = self.pages.entry(page).or_insert((false, TwoStageFilter::default()));
        if state.0 {
            state.0 = false;
            self.hinting_faults += 1;
            let node = node_of(sim, thread);
            sim.fault(thread, self.fault_ns);
            if state.1.fault(node as u16, sim.home_of(page) == Some(node)) {
                sim.move_page(page, node, thread);
            }
        }
        if sim.thread_clock(thread) >= self.next_scan_ns {
            self.next_scan_ns = sim.time_ns() + self.period_ns;
            self.scans += 1;
            self.scan(sim.page_shift());
        }
    }

    fn note(&self, time_ns: f64) -> Option<String> {
        Some(if self.scans == 0 {
            never_fired("NUMA balancing", "first scan", self.first_scan_ns, time_ns, "scan-delay-ms")
        } else {
            format!("NUMA balancing: {} scans, {} hinting faults", self.scans, self.hinting_faults)
        })
    }
}

/// A time-driven mechanism whose first action comes after the run's end, said with the
/// figures that show it and the setting that would change it.
fn never_fired(who: &str, what: &str, at_ns: f64, time_ns: f64, setting: &str) -> String {
    format!(
        "{who} never fired: its {what} comes at {:.3} ms, after the end of this {:.3} ms run, so it equals os (a run of seconds, or a smaller {setting}, lets it act)",
        at_ns / 1e6,
        time_ns / 1e6
    )
}

impl NumaBalancing {
    fn scan(&mut self, page_shift: u32) {
        let mut seen: Vec<u64> = self.pages.keys().copied().collect();
        if seen.is_empty() {
            return;
        }
        seen.sort_unstable();
        let per_scan = numa_balancing::pages_per_scan(self.scan_mb, 1 << page_shift);
        let count = (per_scan.min(seen.len() as u64) as usize).max(1);
        let start = seen.partition_point(|&p| p < self.cursor) % seen.len();
        for k in 0..count {
            let p = seen[(start + k) % seen.len()];
            if let Some(s) = self.pages.get_mut(&p) {
                s.0 = true;
            }
        }
        self.cursor = seen[(start + count - 1) % seen.len()] + 1;
    }
}

/// kMAF: page faults seen once per node, page and window (the first access in each window);
/// after each, the page moves to the node with the most faults when that count exceeds
/// 2 x (second count + 1). Threads faulting on one page in one window share: every
/// `period-ms` that sharing remaps the threads (gate and hysteresis, as SAMMU's).
pub fn build_kmaf(p: &Params, _seed: u64) -> Result<Box<dyn Mechanism>, SpecError> {
    Ok(Box::new(Kmaf {
        window_ns: p.number("window-ms") * 1e6,
        period_ns: p.number("period-ms") * 1e6,
        fault_ns: p.number("fault-us") * 1e3,
        state: None,
    }))
}

struct Kmaf {
    window_ns: f64,
    period_ns: f64,
    fault_ns: f64,
    state: Option<KmafState>,
}

struct KmafState {
    nodes: usize,
    /// Per page: faults per node, the window of each node's last fault, and the threads that
    /// faulted on it in the current window (up to 8).
    pages: FxHashMap<u64, KmafPage>,
    matrix: SharingMatrix,
    faults: u64,
    /// Faults on a page another thread faulted on in the same window.
    sharing_faults: u64,
    remap: Remapper,
    next_decision_ns: f64,
    decisions: u64,
    remaps: u64,
}

struct KmafPage {
    faults: Vec<u32>,
    window: Vec<u64>,
    faulted: Vec<u32>,
    faulted_window: u64,
}

impl Mechanism for Kmaf {
    fn start(&mut self, ctx: &Context) -> Result<Start, MechanismError> {
        self.state = Some(KmafState {
            nodes: ctx.model.nodes,
            pages: FxHashMap::default(),
            matrix: SharingMatrix::new(ctx.threads.max(1)),
            faults: 0,
            sharing_faults: 0,
            remap: Remapper::new(ctx, sharemap_mapping::potential::DEFAULT_THRESHOLD, 0.1)?,
            next_decision_ns: self.period_ns,
            decisions: 0,
            remaps: 0,
        });
        Ok(os_start(ctx))
    }

    fn online(&self) -> bool {
        true
    }

    fn after_access(&mut self, sim: &mut Sim, thread: usize, addr: u64, _write: bool, _ns: f64) {
        let Some(st) = self.state.as_mut() else { return };
        let page = addr >> sim.page_shift();
        let node = node_of(sim, thread);
        let now = sim.thread_clock(thread);
        let window = (now / self.window_ns) as u64 + 1;
        let nodes = st.nodes;
        let p = st.pages.entry(page).or_insert_with(|| KmafPage {
            faults: vec![0; nodes],
            window: vec![0; nodes],
            faulted: Vec::new(),
            faulted_window: 0,
        });
        // Windows only advance: the threads of a node run on clocks of their own, and one
        // behind another must not reopen a window the node has left.
        if window > p.window[node] {
            p.window[node] = window;
            st.faults += 1;
            sim.fault(thread, self.fault_ns);
            if window > p.faulted_window {
                p.faulted_window = window;
                p.faulted.clear();
            }
            let t = thread as u32;
            st.sharing_faults += p.faulted.iter().any(|&o| o != t) as u64;
            if !p.faulted.contains(&t) {
                if st.matrix.threads() <= thread {
                    st.matrix.grow(thread + 1);
                }
                for &other in &p.faulted {
                    st.matrix.add(thread, other as usize, 1.0);
                }
                if p.faulted.len() < 8 {
                    p.faulted.push(t);
                }
            }
            if let Some(best) = kmaf::fault(&mut p.faults, node)
                && sim.home_of(page) != Some(best)
            {
                sim.move_page(page, best, thread);
            }
        }
        if now >= st.next_decision_ns {
            st.next_decision_ns = sim.time_ns() + self.period_ns;
            st.decisions += 1;
            let share = st.sharing_faults as f64 / st.faults.max(1) as f64;
            st.remaps += st.remap.consider(&st.matrix, share, sim) as u64;
        }
    }

    fn note(&self, time_ns: f64) -> Option<String> {
        let st = self.state.as_ref()?;
        let faults = format!(
            "kMAF: {} faults ({:.1} % on pages another thread faulted on in the window), {} pages",
            st.faults,
            100.0 * st.sharing_faults as f64 / st.faults.max(1) as f64,
            st.pages.len()
        );
        let windows = (time_ns / self.window_ns).ceil().max(1.0);
        let decided = if st.decisions == 0 {
            never_fired("its thread mapping", "first remap decision", self.period_ns, time_ns, "period-ms")
        } else {
            format!("{} remap decisions, {} moved threads", st.decisions, st.remaps)
        };
        Some(format!("{faults} in {windows:.0} windows of {} ms; {decided}", self.window_ns / 1e6))
    }
}

/// Carrefour: every `epoch-ms`, each page with at least `min-accesses` accesses in the epoch
/// moves to a node that made at least `share` of them; else, unwritten in the epoch, it is
/// replicated on every node that read it; else it is interleaved (page number mod nodes).
/// Every access counts (Carrefour samples with IBS; its machine-wide triggers are left out).
pub fn build_carrefour(p: &Params, _seed: u64) -> Result<Box<dyn Mechanism>, SpecError> {
    Ok(Box::new(Carrefour {
        epoch_ns: p.number("epoch-ms") * 1e6,
        share: p.number("share"),
        min_accesses: p.integer("min-accesses"),
        next_epoch_ns: 0.0,
        nodes: 1,
        counts: FxHashMap::default(),
        epochs: 0,
    }))
}

struct Carrefour {
    epoch_ns: f64,
    share: f64,
    min_accesses: u64,
    next_epoch_ns: f64,
    nodes: usize,
    /// Per page, this epoch: accesses per node, and whether it was written.
    counts: FxHashMap<u64, (Vec<u32>, bool)>,
    epochs: u64,
}

impl Mechanism for Carrefour {
    fn start(&mut self, ctx: &Context) -> Result<Start, MechanismError> {
        self.nodes = ctx.model.nodes;
        self.next_epoch_ns = self.epoch_ns;
        Ok(os_start(ctx))
    }

    fn online(&self) -> bool {
        true
    }

    fn after_access(&mut self, sim: &mut Sim, thread: usize, addr: u64, write: bool, _ns: f64) {
        let page = addr >> sim.page_shift();
        let node = node_of(sim, thread);
        let nodes = self.nodes;
        let c = self.counts.entry(page).or_insert_with(|| (vec![0; nodes], false));
        c.0[node] += 1;
        c.1 |= write;
        if sim.thread_clock(thread) >= self.next_epoch_ns {
            self.next_epoch_ns = sim.time_ns() + self.epoch_ns;
            self.epochs += 1;
            self.decide(sim, thread);
        }
    }

    fn note(&self, time_ns: f64) -> Option<String> {
        Some(if self.epochs == 0 {
            never_fired("Carrefour", "first epoch", self.epoch_ns, time_ns, "epoch-ms")
        } else {
            format!("Carrefour: {} epochs of {} ms", self.epochs, self.epoch_ns / 1e6)
        })
    }
}

impl Carrefour {
    fn decide(&mut self, sim: &mut Sim, thread: usize) {
        let mut pages: Vec<(u64, (Vec<u32>, bool))> = self.counts.drain().collect();
        pages.sort_unstable_by_key(|p| p.0);
        for (page, (per_node, written)) in pages {
            match carrefour::decide(&per_node, written, page, self.share, self.min_accesses) {
                Some(Decision::Migrate(n)) | Some(Decision::Interleave(n)) => sim.move_page(page, n, thread),
                Some(Decision::Replicate(set)) => sim.replicate(page, set as u64, thread),
                None => {}
            }
        }
    }
}

/// Its configuration (the run's state is left out).
impl std::fmt::Debug for NumaBalancing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NumaBalancing")
            .field("next_scan_ns", &self.next_scan_ns)
            .field("period_ns", &self.period_ns)
            .field("scan_mb", &self.scan_mb)
            .field("fault_ns", &self.fault_ns)
            .finish_non_exhaustive()
    }
}

/// Its configuration (the run's state is left out).
impl std::fmt::Debug for Kmaf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kmaf")
            .field("window_ns", &self.window_ns)
            .field("period_ns", &self.period_ns)
            .field("fault_ns", &self.fault_ns)
            .finish_non_exhaustive()
    }
}

/// Its configuration (the run's state is left out).
impl std::fmt::Debug for Carrefour {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Carrefour")
            .field("epoch_ns", &self.epoch_ns)
            .field("share", &self.share)
            .field("min_accesses", &self.min_accesses)
            .finish_non_exhaustive()
    }
}
