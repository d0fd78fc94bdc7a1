//! SAMMU (seed 000): TLB-based detection and the mechanisms it is compared with, at the
//! paper's design: one thread per PU on the 4 x Xeon X7550 (64 threads), NPB-like programs
//! whose footprints pass each core's TLB reach (64 + 512 entries, shared by its two SMT
//! threads), seed 000's parameters (32-bit counters, NT = 10). The papers' runs took seconds;
//! these take tens of simulated milliseconds, so the time-driven mechanisms' periods are
//! scaled to each run (each says so), and what SAMMU cannot do in so short a run is shown by
//! running it longer.

use super::{ClaimInfo, Diagnostic, Figure, Finding, Gen, Generated, Run, claim, faster, geomean, outcome};
use crate::{AnalyzeRequest, Machine, Result, Session, SimulateRequest, TraceInput};

const MACHINE: &str = "sammu";
const THREADS: u32 = 64;

/// The programs of figures 3 and 4: SP (neighbour sharing, a plane on each side: at 64
/// threads a thread's block is about one plane of SP's class A grid), CG (uniform sharing),
/// MG (V-cycles over grids 8x apart) and EP (no sharing).
const PROGRAMS: [(&str, &str); 4] =
    [("SP", "neighbor"), ("CG", "all-to-all"), ("MG", "phase-change"), ("EP", "private")];

/// 200 pages per thread: with SP's halo of 100 pages on each side a thread sweeps 400 pages,
/// and the two threads of a core 800, well past its 576 TLB entries (just past them, at 160
/// pages, SAMMU's matrix comes out noisier: 0.895 against 0.990).
fn program(run: &Run, pattern: &'static str, iterations: u64) -> Result<Generated> {
    let g = Gen::new(pattern, THREADS, 200, iterations);
    run.generated(&if pattern == "neighbor" { g.halo(100) } else { g })
}

/// SP 6 iterations, CG 4 (two products), MG 8 (two V-cycles), EP 3 (it shares nothing).
fn iterations_of(pattern: &str) -> u64 {
    match pattern {
        "phase-change" => 8,
        "private" => 3,
        "all-to-all" => 4,
        _ => 6,
    }
}

/// The mechanisms of figure 3, with the time-driven ones scaled so that a run spans as many
/// of their periods as the papers' runs of about 20 s did (NUMA balancing's 1 s scans, kMAF's
/// 100 ms windows: 20 scans, 200 windows), and their faults' cost scaled alike (a fault of
/// 1 us in a 20 s run), so that faulting weighs on the run as it did there; Autopin's five
/// trials take 5 % of the run.
fn mechanisms(os_ms: f64) -> (String, String) {
    let factor = os_ms / 20_000.0;
    let scan = 1000.0 * factor;
    let window = 100.0 * factor;
    let fault_us = factor;
    let probation = os_ms / 100.0;
    let list = format!(
        "os,random,oracle,sammu,kmaf:window-ms={window},period-ms={scan},fault-us={fault_us},numa-balancing:scan-delay-ms={scan},scan-period-ms={scan},fault-us={fault_us},autopin:probation-ms={probation},warmup-ms={}",
        probation / 2.0
    );
    let said = format!(
        "time-driven mechanisms scaled to the {os_ms:.1} ms run as to the papers' 20 s (x {factor:.2e}): NUMA balancing scans every {scan:.3} ms, kMAF's windows {window:.4} ms and its remaps every {scan:.3} ms, faults {:.2} ns; Autopin's 5 trials {:.3} + {probation:.3} ms each",
        fault_us * 1e3,
        probation / 2.0
    );
    (list, said)
}

/// One program's figure-3 simulation, with what its periods were.
#[derive(Clone)]
struct Figure3 {
    sim: crate::Simulation,
    scale: String,
}

fn figure3(run: &Run, pattern: &'static str) -> Result<Figure3> {
    run.once(&format!("sammu-figure-3-{pattern}"), || {
        let g = program(run, pattern, iterations_of(pattern))?;
        let s = g.session(MACHINE)?;
        let os = s.simulate(&SimulateRequest { mechanisms: "os".into(), ..Default::default() })?;
        let (list, said) = mechanisms(outcome(&os, "os").time_ns / 1e6);
        let sim = s.simulate(&SimulateRequest { mechanisms: list, ..Default::default() })?;
        Ok(Figure3 { sim, scale: format!("{} on sammu-x7550; {said}", g.scale()) })
    })
}

fn name<'a>(sim: &'a crate::Simulation, prefix: &str) -> &'a crate::simulate::Outcome {
    sim.mechanisms.iter().find(|m| m.mechanism.split(':').next() == Some(prefix)).expect("simulated")
}

pub(super) const MATRIX: ClaimInfo = claim(
    "sammu-matrix",
    "SAMMU (seed 000), section 4.2 (figure 2)",
    "SAMMU's TLB-based detection gives a sharing matrix close to the oracle's (the full trace's)",
    sammu_matrix,
);

fn sammu_matrix(run: &Run) -> Result<Finding> {
    let g = program(run, "neighbor", iterations_of("neighbor"))?;
    let s = g.session(MACHINE)?;
    let a = s.analyze(&AnalyzeRequest {
        detector: "sammu".into(),
        compare: Some("oracle:page".into()),
        window: 0,
        // The matrices alone: what is shared by name is a pass of its own.
        objects: Some(false),
        ..Default::default()
    })?;
    let accuracy = a.accuracy.expect("compared");
    let report = a.detection.report.as_ref().map(|r| &r.json);
    let field = |k: &str| report.and_then(|r| r.get(k)).and_then(|v| v.as_u64()).unwrap_or(0);
    let (updates, evictions, saturations) = (field("updates"), field("evictions"), field("saturations"));
    let correlation = accuracy.correlation;
    let holds = correlation.is_finite() && correlation >= 0.9;
    Ok(Finding::new(
        "SAMMU's matrices similar to the oracle's (figure 2: SP's neighbours, CG's uniform sharing)",
        format!(
            "SP-like neighbour sharing, {THREADS} threads on sammu-x7550, seed 000's parameters: correlation {} with the oracle's page-level matrix ({updates} statistics updates from {evictions} TLB evictions and {saturations} counter saturations)",
            if correlation.is_finite() {
                format!("{correlation:.3}")
            } else {
                "undefined (SAMMU's matrix is empty)".into()
            }
        ),
        holds,
        if holds {
            "past the TLBs' reach every sweep evicts each page's entry: each eviction updates the page's sharers"
                .to_string()
        } else {
            format!("{updates} updates: with 32-bit counters only evictions update the statistics")
        },
        format!("{} on sammu-x7550", g.scale()),
    ))
}

pub(super) const CG_MATRIX: ClaimInfo = claim(
    "sammu-cg-matrix",
    "SAMMU (seed 000), section 4.2 (figure 2a)",
    "on CG SAMMU's matrix shows what the oracle's does: every pair of threads shares about alike",
    sammu_cg_matrix,
);

/// Of a matrix's pairs of threads: the share that share at all, and the coefficient of
/// variation of their sharing.
fn uniformity(m: &sharemap_core::SharingMatrix) -> (f64, f64) {
    let n = m.threads();
    let cells: Vec<f64> = (0..n).flat_map(|i| (0..i).map(move |j| (i, j))).map(|(i, j)| m.get(i, j)).collect();
    if cells.is_empty() {
        return (0.0, f64::NAN);
    }
    let sharing = cells.iter().filter(|&&c| c > 0.0).count() as f64 / cells.len() as f64;
    let mean = cells.iter().sum::<f64>() / cells.len() as f64;
    let sd = (cells.iter().map(|c| (c - mean).powi(2)).sum::<f64>() / cells.len() as f64).sqrt();
    (sharing, if mean > 0.0 { sd / mean } else { f64::NAN })
}

fn sammu_cg_matrix(run: &Run) -> Result<Finding> {
    // NPB CG class B's proportions at 64 threads: 176 nonzeros a row, and rows such that
    // the vector (8 bytes a row) is about class B's 75,000 rows, 146 pages: within the TLBs.
    let g = run.generated(&Gen::new("all-to-all", THREADS, 609, 2).nnz(176))?;
    let s = g.session(MACHINE)?;
    let matrix_of = |detector: &str| -> Result<(sharemap_core::SharingMatrix, u64)> {
        let a = s.analyze(&AnalyzeRequest { detector: detector.into(), objects: Some(false), ..Default::default() })?;
        let updates =
            a.detection.report.as_ref().and_then(|r| r.json.get("updates")).and_then(|v| v.as_u64()).unwrap_or(0);
        Ok((a.detection.matrix, updates))
    };
    let (oracle, _) = matrix_of("oracle:page")?;
    let (sammu, updates) = matrix_of("sammu")?;
    let (os, ocv) = uniformity(&oracle);
    let (ss, scv) = uniformity(&sammu);
    let holds = ss >= 0.99 && scv.is_finite() && scv <= 0.5;
    let said = |share: f64, cv: f64| {
        format!(
            "{:.1} % of pairs sharing, coefficient of variation {}",
            100.0 * share,
            if cv.is_finite() { format!("{cv:.2}") } else { "-".into() }
        )
    };
    let mut finding = Finding::new(
        "figure 2a: in CG each pair of threads shares a similar amount",
        format!(
            "NPB-CG-like sparse products, {THREADS} threads: the oracle's matrix {}; SAMMU's at seed 000's parameters {} ({updates} statistics updates)",
            said(os, ocv),
            said(ss, scv)
        ),
        holds,
        if holds {
            "the vector's pages leave the TLBs often enough for every pair to be seen".to_string()
        } else {
            "the vector every thread reads, 146 pages, stays resident in each core's 576 TLB entries while the rows stream through: no eviction ever shows its sharing, and with 32-bit counters no saturation either".to_string()
        },
        format!("{} on sammu-x7550", g.scale()),
    );
    if !holds {
        // The details the paper leaves open: what empties a TLB (a scheduler tick or a
        // context switch, here every 250,000 accesses of a core: 0.25 ms at an access a ns),
        // and counters narrower than table 1's (8 bits saturate every 255 uses).
        // The reason holds if a setting that lets the resident vector be seen (an eviction
        // or a saturation) brings the matrix most of the way to the oracle's: nine pairs in
        // ten sharing, a spread under half the mean. Figure 2a itself is the claim's bar.
        let mut tried = Vec::new();
        let mut any = false;
        for (setting, label) in [
            ("sammu:tick=250000", "a TLB flush every 250,000 accesses of a core"),
            ("sammu:ac=8", "8-bit access counters"),
        ] {
            let (m, u) = matrix_of(setting)?;
            let (sh, cv) = uniformity(&m);
            let seen = sh >= 0.9 && cv.is_finite() && cv <= 0.5;
            let as_figure = sh >= 0.99 && cv.is_finite() && cv <= 0.5;
            any |= seen;
            let mark = if as_figure {
                ", as figure 2a"
            } else if seen {
                ", most of the way to the oracle's"
            } else {
                ""
            };
            tried.push(format!("{label}: {} ({u} updates){mark}", said(sh, cv)));
        }
        finding = finding.with_diagnostic(Diagnostic {
            experiment: "the same with each detail the paper leaves open set otherwise, so that the resident vector can be seen: TLBs emptied at a scheduler tick, narrower access counters (confirmed when one brings 90 % of pairs sharing with a coefficient of variation under 0.5)".into(),
            found: tried.join("; "),
            confirms: any,
        });
    }
    Ok(finding)
}

pub(super) const TIME: ClaimInfo = claim(
    "sammu-time",
    "SAMMU (seed 000), section 4.3 (figure 3)",
    "on SP-like neighbour sharing SAMMU's time is within 5 % of the oracle's, and ahead of the OS's and a random mapping's",
    sammu_time,
);

fn sammu_time(run: &Run) -> Result<Finding> {
    let f = figure3(run, "neighbor")?;
    let sim = &f.sim;
    let time = |n: &str| name(sim, n).time_ns;
    let (os, random, oracle, sammu) = (time("os"), time("random"), time("oracle"), time("sammu"));
    let s = name(sim, "sammu");
    let holds = sammu < os && sammu < random && sammu <= 1.05 * oracle;
    let mut finding = Finding::new(
        "SAMMU close to the oracle (SP: 35.7 % faster than the OS), ahead of the OS and random (figure 3)",
        format!(
            "SP-like, simulated time over the OS's: oracle {:.3}, SAMMU {:.3}, random {:.3} (SAMMU: {} thread and {} page migrations, {:.0} % of its DRAM accesses local, the oracle's {:.0} %)",
            oracle / os,
            sammu / os,
            random / os,
            s.counts.thread_migrations,
            s.counts.page_migrations,
            100.0 * s.local_dram_share,
            100.0 * name(sim, "oracle").local_dram_share
        ),
        holds,
        s.note.clone().unwrap_or_default(),
        f.scale.clone(),
    );
    if !holds {
        // The reason to test: SAMMU acts late (its remap waits for TLB evictions, its pages
        // for NT updates each), so the gap must close as the run grows.
        let long = program(run, "neighbor", 2 * iterations_of("neighbor"))?;
        let sim2 = long
            .session(MACHINE)?
            .simulate(&SimulateRequest { mechanisms: "os,oracle,sammu".into(), ..Default::default() })?;
        let t2 = |n: &str| name(&sim2, n).time_ns;
        let (gap, gap2) = (sammu / oracle, t2("sammu") / t2("oracle"));
        // What each mechanism adds per iteration once past the first run's length.
        let marginal = (t2("sammu") - sammu) / (t2("oracle") - oracle);
        finding = finding.with_diagnostic(Diagnostic {
            experiment: format!(
                "the same program run twice as long ({} iterations, {:.1} ms)",
                2 * iterations_of("neighbor"),
                t2("os") / 1e6
            ),
            found: format!(
                "SAMMU over the oracle {gap:.3} at {} iterations, {gap2:.3} at {}; the iterations added cost SAMMU {marginal:.3} of what they cost the oracle; local DRAM accesses {:.0} % (oracle {:.0} %): its remap comes once its TLBs have seen the sharing, and each page follows only after NT = 10 more statistics updates from its new node than from its old, about one per TLB stay, so in tens of ms most pages stay behind; a run of seconds, as the paper's, amortises both",
                iterations_of("neighbor"),
                2 * iterations_of("neighbor"),
                100.0 * name(&sim2, "sammu").local_dram_share,
                100.0 * name(&sim2, "oracle").local_dram_share
            ),
            confirms: gap2 < gap,
        });
    }
    Ok(finding)
}

pub(super) const MPKI_TRAFFIC: ClaimInfo = claim(
    "sammu-mpki-traffic",
    "SAMMU (seed 000), section 4.2 (figure 4)",
    "SAMMU reduces L3 misses (MPKI, by 30.6 % on average) and interchip traffic (by 39 %) against the OS",
    sammu_mpki_traffic,
);

fn sammu_mpki_traffic(run: &Run) -> Result<Finding> {
    let mut mpki = Vec::new();
    let mut traffic = Vec::new();
    let mut shown = Vec::new();
    let mut scale = String::new();
    let mut figure = Figure {
        title: "SAMMU over the OS: L3 misses and interchip traffic".into(),
        x_label: "program".into(),
        y_label: "ratio to the OS".into(),
        ..Figure::default()
    };
    for (paper, pattern) in PROGRAMS {
        let f = figure3(run, pattern)?;
        if pattern == "neighbor" {
            scale = f.scale.clone();
        }
        let (os, s) = (name(&f.sim, "os"), name(&f.sim, "sammu"));
        let m = s.llc_mpka() / os.llc_mpka().max(1e-12);
        let t = (s.counts.interconnect_bytes as f64 + 1.0) / (os.counts.interconnect_bytes as f64 + 1.0);
        mpki.push(m);
        traffic.push(t);
        figure.x.push(paper.into());
        shown.push(format!("{paper} {m:.3} / {t:.3}"));
    }
    figure.series = vec![("L3 MPKA".into(), mpki.clone()), ("traffic".into(), traffic.clone())];
    let (gm, gt) = (geomean(mpki), geomean(traffic));
    let holds = gm < 1.0 && gt < 1.0;
    // The reason to test: SAMMU's decisions come late and its pages stay behind in runs this
    // short (sammu-time); what it would do acting at once from the whole trace, the oracle,
    // must reduce both.
    let (mut om, mut ot) = (Vec::new(), Vec::new());
    let mut local = Vec::new();
    for (paper, pattern) in PROGRAMS {
        let f = figure3(run, pattern)?;
        let (os, o, s) = (name(&f.sim, "os"), name(&f.sim, "oracle"), name(&f.sim, "sammu"));
        om.push(o.llc_mpka() / os.llc_mpka().max(1e-12));
        ot.push((o.counts.interconnect_bytes as f64 + 1.0) / (os.counts.interconnect_bytes as f64 + 1.0));
        local.push(format!("{paper} {:.0} % (OS {:.0} %)", 100.0 * s.local_dram_share, 100.0 * os.local_dram_share));
    }
    let (ogm, ogt) = (geomean(om), geomean(ot));
    let diagnostic = Diagnostic {
        experiment:
            "the same programs under the oracle, SAMMU's mapping made at once from the whole trace, pages included"
                .into(),
        found: format!(
            "oracle's geometric means over the OS's {ogm:.3} (L3) / {ogt:.3} (traffic); SAMMU's local DRAM accesses {}",
            local.join(", ")
        ),
        confirms: ogm < 1.0 && ogt < 1.0,
    };
    let finding = Finding::new(
        "L3 MPKI -30.6 %, interchip traffic -39.0 % (geometric means over NPB)",
        format!(
            "SAMMU's L3 misses per 1000 accesses / interchip bytes over the OS's: {} (geometric means {gm:.3} / {gt:.3})",
            shown.join(", ")
        ),
        holds,
        if holds {
            "grouping threads that share into one package turns their misses into L3 hits and their transfers into on-chip ones; pages moved to their users' nodes take DRAM traffic off the interconnect"
        } else {
            "SAMMU remaps MG's threads but its pages stay on the nodes the threads left (no page reaches NT = 10 in so short a run), so its DRAM traffic crosses the interconnect"
        },
        scale,
    )
    .with_figure(figure);
    Ok(if holds { finding } else { finding.with_diagnostic(diagnostic) })
}

pub(super) const OVERHEAD: ClaimInfo = claim(
    "sammu-overhead",
    "SAMMU (seed 000), section 4.4",
    "SAMMU's updates of its structures in memory add 1.43 % memory transactions",
    sammu_overhead,
);

fn sammu_overhead(run: &Run) -> Result<Finding> {
    let mut shown = Vec::new();
    let (mut extra, mut memory) = (0u64, 0u64);
    let mut scale = String::new();
    // Per program: extra accesses per TLB miss, per access, and TLB misses per 1000 accesses.
    let mut per_miss = Vec::new();
    for (paper, pattern) in PROGRAMS {
        let f = figure3(run, pattern)?;
        let g = program(run, pattern, iterations_of(pattern))?;
        if pattern == "neighbor" {
            scale = f.scale.clone();
        }
        let s = Session::new(TraceInput::file(&g.path), Machine::from_spec(MACHINE)?, 1);
        let a = s.analyze(&AnalyzeRequest { detector: "sammu".into(), objects: Some(false), ..Default::default() })?;
        let e = a
            .detection
            .report
            .as_ref()
            .and_then(|r| r.json.get("extra_memory_accesses"))
            .and_then(|v| v.as_u64())
            .unwrap_or(0);
        let sim = name(&f.sim, "sammu");
        let dram = sim.counts.dram_local + sim.counts.dram_remote;
        shown.push(format!("{paper} {:.2} %", 100.0 * e as f64 / dram.max(1) as f64));
        per_miss.push((
            paper,
            e as f64 / sim.counts.tlb_misses.max(1) as f64,
            e as f64 / sim.counts.accesses.max(1) as f64,
            sim.tlb_mpka,
        ));
        extra += e;
        memory += dram;
    }
    let share = extra as f64 / memory.max(1) as f64;
    let holds = share <= 2.0 * 0.0143;
    // The reason to test: SAMMU's extra accesses follow the TLB misses (two per activation,
    // one per sharer of an update), not the program's memory traffic; a program that misses
    // its TLBs often but its caches rarely shows a large share.
    let diagnostic = Diagnostic {
        experiment: "SAMMU's extra memory accesses per TLB miss and per access, with each program's TLB misses per 1000 accesses".into(),
        found: per_miss
            .iter()
            .map(|(p, m, a, t)| format!("{p}: {m:.2} per TLB miss, {:.2} % of its accesses, {t:.1} TLB MPKA", 100.0 * a))
            .collect::<Vec<_>>()
            .join("; "),
        confirms: per_miss.iter().all(|(_, m, _, _)| *m <= 4.0),
    };
    let finding = Finding::new(
        "1.43 % additional memory transactions on average (0.41 % of the time)",
        format!(
            "SAMMU's extra memory accesses (a page-history read and write per activation, a matrix update per sharer) over the program's DRAM accesses: {} ({:.2} % over all four)",
            shown.join(", "),
            100.0 * share
        ),
        holds,
        if holds {
            "SAMMU acts on TLB evictions and counter saturations only, a small share of the accesses that reach memory (threshold: twice the paper's 1.43 %)"
        } else {
            "SAMMU's extra accesses follow its activations, one per TLB eviction: the CG-like pattern reads x at random over 700 pages, past a core's TLB reach, so a third of its accesses miss the TLB while its data fits the L3s (few DRAM accesses); NPB CG's x fits the TLBs (its rows hold 20 times as many nonzeros)"
        },
        scale,
    );
    Ok(if holds { finding } else { finding.with_diagnostic(diagnostic) })
}

pub(super) const KMAF_BELOW: ClaimInfo = claim(
    "kmaf-below-sammu",
    "SAMMU (seed 000), section 4.3 (figure 3)",
    "kMAF's results are below SAMMU's on most programs: its fault sampling needs more time to see the access behaviour",
    kmaf_below,
);

fn kmaf_below(run: &Run) -> Result<Finding> {
    let mut behind = 0;
    let mut shown = Vec::new();
    let mut scale = String::new();
    for (paper, pattern) in PROGRAMS {
        let f = figure3(run, pattern)?;
        if pattern == "neighbor" {
            scale = f.scale.clone();
        }
        let os = name(&f.sim, "os").time_ns;
        let (k, s) = (name(&f.sim, "kmaf").time_ns / os, name(&f.sim, "sammu").time_ns / os);
        behind += (k >= s) as usize;
        shown.push(format!("{paper} {k:.3} / {s:.3}"));
    }
    Ok(Finding::new(
        "kMAF lower than SAMMU for most benchmarks (figure 3)",
        format!(
            "kMAF / SAMMU time over the OS's: {} (kMAF behind or level on {behind} of {})",
            shown.join(", "),
            PROGRAMS.len()
        ),
        behind * 2 > PROGRAMS.len(),
        "kMAF learns from a fault per node, page and window; SAMMU from every TLB stay, and it faults nowhere",
        scale,
    ))
}

pub(super) const NUMA_BALANCING_SP: ClaimInfo = claim(
    "numa-balancing-sp",
    "SAMMU (seed 000), section 4.3 (figure 3)",
    "Linux's NUMA balancing performs well only on SP",
    numa_balancing_sp,
);

fn numa_balancing_sp(run: &Run) -> Result<Finding> {
    let mut gains = Vec::new();
    let mut scale = String::new();
    for (paper, pattern) in PROGRAMS {
        let f = figure3(run, pattern)?;
        if pattern == "neighbor" {
            scale = f.scale.clone();
        }
        let nb = name(&f.sim, "numa-balancing");
        gains.push((paper, 1.0 - nb.time_ns / name(&f.sim, "os").time_ns, nb.counts.page_migrations));
    }
    let sp = gains[0].1;
    let others: Vec<&(&str, f64, u64)> = gains[1..].iter().filter(|g| g.1 >= 0.02).collect();
    let holds = sp >= 0.02 && others.is_empty();
    // The reason to test: its moves chase pages that several nodes use in turn, so where it
    // loses time its moves must have raised the interconnect traffic.
    let mut traffic = Vec::new();
    for (paper, pattern) in PROGRAMS {
        let f = figure3(run, pattern)?;
        let (os, nb) = (name(&f.sim, "os"), name(&f.sim, "numa-balancing"));
        let t = (nb.counts.interconnect_bytes as f64 + 1.0) / (os.counts.interconnect_bytes as f64 + 1.0);
        traffic.push((paper, nb.time_ns / os.time_ns, t, nb.counts.page_migrations));
    }
    let diagnostic = Diagnostic {
        experiment: "NUMA balancing's interconnect traffic over the OS's, beside its time".into(),
        found: traffic
            .iter()
            .map(|(p, time, t, m)| format!("{p}: time {time:.3}, traffic {t:.3} ({m} moves)"))
            .collect::<Vec<_>>()
            .join("; "),
        confirms: traffic.iter().filter(|x| x.1 > 1.02).all(|x| x.2 > 1.0),
    };
    let finding = Finding::new(
        "the only application in which NUMA balancing performed well was SP",
        format!(
            "NUMA balancing against the OS: {}",
            gains
                .iter()
                .map(|(p, g, m)| format!("{p} {} ({m} page moves)", faster(1.0 - g)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        holds,
        "its hinting faults move a page to the node faulting on it twice in a row: SP's halos have one reader node per sweep, CG's shared vector and MG's coarse grids every node in turn, so moves there chase the last faulting node",
        scale,
    );
    Ok(if holds { finding } else { finding.with_diagnostic(diagnostic) })
}

pub(super) const AUTOPIN: ClaimInfo = claim(
    "autopin",
    "SAMMU (seed 000), section 4.3 (figure 3)",
    "Autopin, run with the oracle's mapping and 4 random ones, often keeps a mapping other than the oracle's, and gains less than SAMMU",
    autopin,
);

fn autopin(run: &Run) -> Result<Finding> {
    let (mut missed, mut below) = (0usize, 0usize);
    let mut shown = Vec::new();
    let mut scale = String::new();
    for (paper, pattern) in PROGRAMS {
        let f = figure3(run, pattern)?;
        if pattern == "neighbor" {
            scale = f.scale.clone();
        }
        let a = name(&f.sim, "autopin");
        let kept_oracle = a.note.as_deref().is_some_and(|n| n.contains("kept the oracle's"));
        missed += (!kept_oracle) as usize;
        let os = name(&f.sim, "os").time_ns;
        let (t, s) = (a.time_ns / os, name(&f.sim, "sammu").time_ns / os);
        below += (t >= s) as usize;
        shown.push(format!(
            "{paper}: kept {}, {t:.3} against SAMMU's {s:.3}",
            if kept_oracle { "the oracle's" } else { "a random mapping" }
        ));
    }
    let holds = missed >= 1 && below * 2 > PROGRAMS.len();
    // The reason to test: the paper blames Autopin's indirect measure (IPC on real hardware,
    // noisy run to run); here it measures the simulator's own rate of accesses, exactly, so it
    // must put the oracle's candidate first wherever that candidate is fastest.
    let mut leads = Vec::new();
    for (paper, pattern) in PROGRAMS {
        let f = figure3(run, pattern)?;
        let note = name(&f.sim, "autopin").note.clone().unwrap_or_default();
        let lead = note
            .split("the oracle's ran ")
            .nth(1)
            .and_then(|t| t.split(' ').next())
            .and_then(|t| t.trim_end_matches('%').parse::<f64>().ok());
        leads.push((paper, lead));
    }
    let diagnostic = Diagnostic {
        experiment: "the lead of the oracle's candidate over the best random one during Autopin's probations".into(),
        found: leads
            .iter()
            .map(|(p, l)| format!("{p} {}", l.map_or("-".to_string(), |l| format!("{l:+.1} %"))))
            .collect::<Vec<_>>()
            .join(", "),
        confirms: leads.iter().all(|(_, l)| l.is_some_and(|l| l >= 0.0)),
    };
    let finding = Finding::new(
        "Autopin selected a mapping other than the oracle's in several executions; its gain is lower than SAMMU's, as it must try other mappings first",
        format!(
            "{} (another mapping than the oracle's on {missed} of {n}; behind SAMMU on {below} of {n})",
            shown.join("; "),
            n = PROGRAMS.len()
        ),
        holds,
        if holds {
            "it judges mappings by a short probation each: where they differ little it keeps whichever ran its probation best"
        } else {
            "it judges mappings by the accesses per simulated ns of a probation, the simulator's own measure of speed, without the noise of real IPC counters: it keeps the oracle's mapping wherever that is fastest"
        },
        scale,
    );
    Ok(if holds { finding } else { finding.with_diagnostic(diagnostic) })
}

pub(super) const CG_DATA_MAPPING: ClaimInfo = claim(
    "cg-data-mapping",
    "SAMMU (seed 000), section 4.3",
    "CG gains from data mapping, not from thread mapping",
    cg_data_mapping,
);

fn cg_data_mapping(run: &Run) -> Result<Finding> {
    let Some(trace) = &run.inputs.cg else {
        return Ok(Finding {
            paper: "CG affected by data mapping only".into(),
            sharemap: "-".into(),
            verdict: super::Verdict::NotRun,
            why: run.inputs.cg_missing.clone().unwrap_or_else(|| {
                "needs a recording of the workloads' cg (`sharemap reproduce` records one when a compiler for `sharemap cc` is installed; scripts/setup installs clang)".into()
            }),
            scale: String::new(),
            diagnostic: None,
            figure: None,
        });
    };
    let s = Session::new(TraceInput::file(trace), Machine::from_spec(MACHINE)?, 1);
    let info = crate::info(&TraceInput::file(trace), &())?;
    let sim = s.simulate(&SimulateRequest {
        mechanisms: "os,static:threads=sharemap,static:pages=memory".into(),
        ..Default::default()
    })?;
    let get = |name: &str| outcome(&sim, name);
    let (os, threads, data) = (get("os"), get("static:threads=sharemap"), get("static:pages=memory"));
    let gain = |m: &crate::simulate::Outcome| 1.0 - m.time_ns / os.time_ns;
    let holds = gain(data) > gain(threads);
    let diagnostic = if holds {
        None
    } else {
        // The reason to test: homes set from the start make the master's serial
        // initialisation write remote memory, on the run's critical path; the paper's data
        // mapping moves pages during the run, after it. So the parallel part alone must gain.
        let part = run.inputs.dir.clone().unwrap_or_else(std::env::temp_dir).join("cg-parallel.trace");
        let kept = parallel_part(trace, &part)?;
        let s = Session::new(TraceInput::file(&part), Machine::from_spec(MACHINE)?, 1);
        let sim = s.simulate(&SimulateRequest {
            mechanisms: "os,static:threads=sharemap,static:pages=memory".into(),
            ..Default::default()
        })?;
        let p = |n: &str| outcome(&sim, n).time_ns / outcome(&sim, "os").time_ns;
        let (t, d) = (p("static:threads=sharemap"), p("static:pages=memory"));
        Some(Diagnostic {
            experiment: format!(
                "the parallel part alone ({} accesses from the first worker thread's first access; the master's serial initialisation left out but for one write to each page it touched, so that first touch still homes them at the master's node)",
                super::count(kept)
            ),
            found: format!("thread mapping alone {}, data mapping alone {}", faster(t), faster(d)),
            confirms: d < t && d < 1.0,
        })
    };
    let finding = Finding::new(
        "CG gains from data mapping rather than thread mapping (its sharing is uniform: no thread mapping helps)",
        format!(
            "the workloads' cg recorded with {} threads on sammu-x7550, simulated time against the OS's: thread mapping alone {}, data mapping alone (each page where its memory accesses come from) {}",
            info.threads,
            faster(1.0 - gain(threads)),
            faster(1.0 - gain(data))
        ),
        holds,
        format!(
            "local memory accesses: OS {:.1} %, thread mapping {:.1} %, data mapping {:.1} %; cg's matrix and vector are initialised by the master thread alone, so first touch puts them on one node{}",
            100.0 * os.local_dram_share,
            100.0 * threads.local_dram_share,
            100.0 * data.local_dram_share,
            if holds {
                ""
            } else {
                ", and homes set from the start make that serial initialisation write remote memory"
            }
        ),
        format!("{}: {} accesses, {} pages", trace.display(), super::count(info.accesses), info.pages),
    );
    Ok(match diagnostic {
        Some(d) => finding.with_diagnostic(d),
        None => finding,
    })
}

/// Writes the part of `trace` from the first access of a thread other than thread 0 (the
/// master's serial start left out) to `out`, after one write by thread 0 to each page that
/// serial start touched: the pages as it left them, homed by the master's first touch (left
/// out, a page the rest only reads would map to the zero page). Returns the accesses kept.
fn parallel_part(trace: &std::path::Path, out: &std::path::Path) -> Result<u64> {
    use crate::trace::{Access, TraceSource, TraceWriter};
    let page = 4096u64;
    // The serial start's pages, in first-touch order.
    let mut serial: Vec<u64> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut source = TraceInput::file(trace).open()?;
    let mut done = false;
    source.for_each_chunk(&mut |chunk| {
        for a in chunk.accesses.iter() {
            if done || a.thread != 0 {
                done = true;
                break;
            }
            if seen.insert(a.addr / page) {
                serial.push(a.addr / page);
            }
        }
        Ok(())
    })?;
    let mut source = TraceInput::file(trace).open()?;
    let mut writer = TraceWriter::create(out, None, source.metadata().clone())?;
    for p in &serial {
        writer.access(Access::write(0, p * page, 8))?;
    }
    let (mut started, mut kept) = (false, 0u64);
    let mut failed = None;
    source.for_each_chunk(&mut |chunk| {
        let mut events = chunk.events.iter().peekable();
        for (i, a) in chunk.accesses.iter().enumerate() {
            let at = chunk.first_access + i as u64;
            started |= a.thread != 0;
            while let Some(e) = events.next_if(|e| e.at <= at) {
                if started && let Err(err) = writer.event(e.thread, e.kind, e.arg, &e.label) {
                    failed.get_or_insert(err);
                }
            }
            if started {
                if let Err(err) = writer.access(a) {
                    failed.get_or_insert(err);
                }
                kept += 1;
            }
        }
        for e in events {
            if started && let Err(err) = writer.event(e.thread, e.kind, e.arg, &e.label) {
                failed.get_or_insert(err);
            }
        }
        Ok(())
    })?;
    if let Some(e) = failed {
        return Err(e.into());
    }
    writer.finish()?;
    Ok(kept)
}
