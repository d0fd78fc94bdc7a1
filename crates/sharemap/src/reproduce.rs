//! `sharemap reproduce`: the qualitative claims of the five seed papers that sharemap can
//! test, each an experiment on generated patterns (or a recording) with the paper's figure,
//! sharemap's and a verdict. A claim that does not hold is reported as not holding, with
//! what the experiment found; thresholds are fixed here, before any run, and listed in
//! docs/reproduce.md. One claim is one function and one row of [`CLAIMS`].

use crate::generate::{self, GenParams};
use crate::sweep::{SweepRequest, Vary};
use crate::{AnalyzeRequest, Error, ErrorKind, Machine, PlaceRequest, Result, Session, SimulateRequest, TraceInput};
use serde::Serialize;
use sharemap_core::plugin::{Caps, Plugin};
use sharemap_machine::CostParams;
use sharemap_placement::evaluate::PolicyResult;
use sharemap_placement::optimal::Optimal;
use sharemap_placement::optimal::exhaustive::set_search;
use sharemap_placement::{Costs, Ref};
use std::path::PathBuf;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Holds,
    DoesNotHold,
    /// It needs an input that was not given (a recording).
    NotRun,
}

impl Verdict {
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Holds => "holds",
            Verdict::DoesNotHold => "does not hold",
            Verdict::NotRun => "not run",
        }
    }
}

/// What one experiment found.
#[derive(Clone, Debug, Serialize)]
pub struct Finding {
    /// The paper's figure or statement, in its terms.
    pub paper: String,
    /// sharemap's figure, with what it is relative to.
    pub sharemap: String,
    pub verdict: Verdict,
    /// Why it holds or not, from the experiment's own figures.
    pub why: String,
}

impl Finding {
    fn new(paper: impl Into<String>, sharemap: impl Into<String>, holds: bool, why: impl Into<String>) -> Finding {
        let verdict = if holds { Verdict::Holds } else { Verdict::DoesNotHold };
        Finding { paper: paper.into(), sharemap: sharemap.into(), verdict, why: why.into() }
    }
}

/// A claim's result, with the row it comes from.
#[derive(Clone, Debug, Serialize)]
pub struct ClaimResult {
    pub name: &'static str,
    /// The paper and its section.
    pub source: &'static str,
    pub claim: &'static str,
    #[serde(flatten)]
    pub finding: Finding,
    pub seconds: f64,
}

/// Inputs some claims need beyond generated patterns.
#[derive(Clone, Debug, Default)]
pub struct Inputs {
    /// A recording of a CG-like program (the workloads' `cg`, recorded with `sharemap record`).
    pub cg: Option<PathBuf>,
}

/// A claim: its name, the paper's section (`source`), the claim (`summary`), and its
/// experiment.
pub type ClaimInfo = Plugin<fn(&Inputs) -> Result<Finding>>;

const fn claim(
    name: &'static str,
    source: &'static str,
    summary: &'static str,
    build: fn(&Inputs) -> Result<Finding>,
) -> ClaimInfo {
    Plugin { name, source, summary, params: &[], caps: Caps::NONE, build }
}

pub static CLAIMS: &[ClaimInfo] = &[
    claim(
        "first-touch-local",
        "Marchetti et al. (seed 003), sections 3-4",
        "first touch keeps each thread's private data on its node; round-robin leaves 1/N of it local",
        first_touch_local,
    ),
    claim(
        "optimum-exhaustive",
        "Bolosky & Scott (seed 004), section 3",
        "the dynamic programme finds the least-cost placement of a page: the cost of an exhaustive search",
        optimum_exhaustive,
    ),
    claim(
        "optimum-concave-in-g",
        "Bolosky & Scott (seed 004), section 4.3 (figures 4 and 12)",
        "the optimum's cost per reference is piecewise linear and concave in G; each on-line policy's is a straight line on or above it",
        optimum_concave_in_g,
    ),
    claim(
        "corollary-scaling",
        "Bolosky & Scott (seed 004), section 2.4 (corollary)",
        "scaling a machine's costs by s (r, g to s(x-1)+1; R, G to sx) scales the optimum's MCPR: c'/n = 1 + s(c/n - 1)",
        corollary_scaling,
    ),
    claim(
        "delay-near-optimum",
        "Bolosky & Scott (seed 004), section 4.3 (figure 9)",
        "with ACE's parameters, Delay's MCPR is within 15 % of the optimum's (all applications but plytrace)",
        delay_near_optimum,
    ),
    claim(
        "sammu-matrix",
        "SAMMU (seed 000), section 4.2",
        "SAMMU's TLB-based detection gives a sharing matrix close to the oracle's (the full trace's)",
        sammu_matrix,
    ),
    claim(
        "sammu-time",
        "SAMMU (seed 000), section 4.3 (figure 3)",
        "on neighbour sharing SAMMU's time is close to the oracle's, and ahead of the OS's and a random mapping's",
        sammu_time,
    ),
    claim(
        "cg-data-mapping",
        "SAMMU (seed 000), section 4.3",
        "CG gains from data mapping, not from thread mapping",
        cg_data_mapping,
    ),
    claim(
        "stmap-sampling",
        "STMap (seed 002), section III-B (figure 1b)",
        "sampling one access in SI+1 = 101 keeps the sharing matrix close to SI = 0's",
        stmap_sampling,
    ),
    claim(
        "marathe-serial-init",
        "Marathe & Mueller (seed 001), section 5",
        "with a serial initialisation, profile-guided placement beats first touch",
        marathe_serial_init,
    ),
];

/// Runs the named claims (all when `names` is empty), in the table's order; `progress` is
/// told each claim's name as it starts.
pub fn reproduce(names: &[String], inputs: &Inputs, progress: &dyn Fn(&str)) -> Result<Vec<ClaimResult>> {
    for n in names {
        if !CLAIMS.iter().any(|c| c.name == n) {
            let known: Vec<&str> = CLAIMS.iter().map(|c| c.name).collect();
            return Err(Error::new(ErrorKind::Claim, format!("unknown claim '{n}' (claims: {})", known.join(", "))));
        }
    }
    let mut out = Vec::new();
    for c in CLAIMS.iter().filter(|c| names.is_empty() || names.iter().any(|n| n == c.name)) {
        progress(c.name);
        let start = std::time::Instant::now();
        let finding = (c.build)(inputs)?;
        out.push(ClaimResult {
            name: c.name,
            source: c.source,
            claim: c.summary,
            finding,
            seconds: start.elapsed().as_secs_f64(),
        });
    }
    Ok(out)
}

/// A session on a generated pattern.
fn generated(pattern: &str, threads: u32, accesses: u64, machine: &str) -> Result<Session> {
    let trace = generate::to_memory(generate::pattern(pattern)?, &GenParams::new(threads, accesses, 1))?;
    Ok(Session::new(TraceInput::memory(trace), Machine::from_spec(machine)?, 1))
}

fn result<'a>(results: &'a [PolicyResult], name: &str) -> &'a PolicyResult {
    results.iter().find(|r| r.name == name).unwrap_or_else(|| panic!("{name} was evaluated"))
}

/// Four NUMA nodes of four cores.
const FOUR_NODES: &str = "pack:4 numa:1 core:4 pu:1";

fn first_touch_local(_: &Inputs) -> Result<Finding> {
    let s = generated("private", 16, 1_000_000, FOUR_NODES)?;
    let p = s.place(&PlaceRequest::new("first-touch,round-robin"))?;
    let r = &p.evaluation.results;
    let (ft, rr) = (result(r, "first-touch").local_ratio, result(r, "round-robin").local_ratio);
    let n = 4.0;
    Ok(Finding::new(
        "first touch: private data local; round-robin: 1/N local (N nodes)",
        format!(
            "private pattern, 16 threads on 4 nodes: first touch {:.1} % local, round-robin {:.1} % (1/N = 25.0 %)",
            100.0 * ft,
            100.0 * rr
        ),
        ft >= 0.95 && (rr - 1.0 / n).abs() <= 0.03,
        "each page is first touched by the thread that uses it; round-robin deals pages over the nodes whatever their user",
    ))
}

fn optimum_exhaustive(_: &Inputs) -> Result<Finding> {
    let models = [
        CostParams { r: 3.0, big_r: 8.0, g: Some(2.0), big_g: Some(5.0) },
        CostParams { r: 3.0, big_r: 7.0, g: None, big_g: None },
        CostParams { r: 5.0, big_r: 40.0, g: Some(2.0), big_g: Some(30.0) },
        CostParams { r: 2.0, big_r: 12.0, g: None, big_g: None },
    ];
    let mut rng = 0x5eed_u64;
    let mut next = || {
        rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        rng >> 33
    };
    let (mut pages, mut equal, mut worst) = (0u32, 0u32, 0.0f64);
    for p in &models {
        let costs = Costs::new(p);
        for _ in 0..250 {
            let nodes = 2 + (next() % 2) as usize;
            let len = 1 + (next() % 10) as usize;
            let refs: Vec<Ref> = (0..len as u64)
                .map(|i| {
                    let node = (next() % nodes as u64) as u16;
                    if next() % 3 == 0 { Ref::write(i, node) } else { Ref::read(i, node) }
                })
                .collect();
            let optimum = Optimal::new(nodes, costs).solve(&refs).cost;
            let truth = set_search(&refs, nodes, &costs);
            pages += 1;
            let gap = (optimum - truth).abs() / truth.max(1.0);
            worst = worst.max(gap);
            equal += (gap <= 1e-9) as u32;
        }
    }
    Ok(Finding::new(
        "an optimal placement, computed in one pass by dynamic programming",
        format!(
            "{equal} of {pages} random pages (1-10 references, 2-3 nodes, 4 cost models) cost what an exhaustive search finds"
        ),
        equal == pages,
        if equal == pages {
            "the search walks every location set at every reference; the optimum assumes what the paper proves (decisions per read-run)".to_string()
        } else {
            format!("largest relative gap {worst:.3e}")
        },
    ))
}

fn optimum_concave_in_g(_: &Inputs) -> Result<Finding> {
    let s = generated("phase-change", 8, 300_000, "ace")?;
    let values: Vec<f64> = (1..=16).map(|k| 250.0 * k as f64).collect();
    let points = s.sweep(&SweepRequest {
        setup: Default::default(),
        vary: Vary::BigG,
        values: values.clone(),
        policies: "ace,delay,platinum".into(),
    })?;
    let n = points[0].accesses.max(1) as f64;
    let series = |name: &str| -> Vec<f64> {
        points.iter().map(|p| p.results.iter().find(|r| r.name == name).map_or(f64::NAN, |r| r.cost / n)).collect()
    };
    let optimal = series("optimal");
    let slopes: Vec<f64> =
        (1..values.len()).map(|i| (optimal[i] - optimal[i - 1]) / (values[i] - values[i - 1])).collect();
    let concave = slopes.windows(2).all(|w| w[1] <= w[0] + 1e-12);
    let breaks = slopes.windows(2).filter(|w| (w[0] - w[1]).abs() > 1e-12).count();
    let mut straight_above = true;
    for name in ["ace", "delay", "platinum"] {
        let line = series(name);
        let d: Vec<f64> = (1..values.len()).map(|i| line[i] - line[i - 1]).collect();
        straight_above &= d.windows(2).all(|w| (w[1] - w[0]).abs() <= 1e-9 * line[0].abs().max(1.0));
        straight_above &= line.iter().zip(&optimal).all(|(l, o)| *l >= *o - 1e-9);
    }
    Ok(Finding::new(
        "optimal MCPR against G: concave, piecewise linear; each policy a straight line above it",
        format!(
            "phase-change pattern, 8 threads on ACE's costs, G from 250 to 4000 (R in proportion): optimal MCPR {:.3} to {:.3}, slope never rising ({breaks} changes of slope); ace, delay and platinum straight and above",
            optimal[0],
            optimal[optimal.len() - 1]
        ),
        concave && straight_above,
        "the optimum is the least of finitely many placements' costs, each linear in G: a lower envelope of lines",
    ))
}

fn corollary_scaling(_: &Inputs) -> Result<Finding> {
    let s = generated("sor", 8, 200_000, "ace")?;
    let mcpr = |cost: Option<String>| -> Result<f64> {
        let mut req = PlaceRequest::new("first-touch");
        req.setup.cost = cost;
        let p = s.place(&req)?;
        Ok(result(&p.evaluation.results, "optimal").mcpr)
    };
    let base = CostParams::ace(4096);
    let c = mcpr(None)?;
    let mut worst = 0.0f64;
    let mut shown = Vec::new();
    for scale in [2.0, 3.0, 10.0] {
        let g = base.g.expect("ACE has global memory");
        let spec = format!(
            "r={},R={},g={},G={}",
            scale * (base.r - 1.0) + 1.0,
            scale * base.big_r,
            scale * (g - 1.0) + 1.0,
            scale * base.big_g.expect("ACE has global memory")
        );
        let got = mcpr(Some(spec))?;
        let want = 1.0 + scale * (c - 1.0);
        worst = worst.max((got - want).abs() / want);
        shown.push(format!("s = {scale}: {got:.6} against {want:.6}"));
    }
    Ok(Finding::new(
        "c'/n = 1 + s(c/n - 1) for the optimum on the scaled machine",
        format!("sor pattern, 8 threads, ACE's costs (c/n = {c:.6}): {}", shown.join("; ")),
        worst <= 1e-9,
        format!("largest relative difference {worst:.1e}: the optimum's placement stays optimal when costs scale"),
    ))
}

fn delay_near_optimum(_: &Inputs) -> Result<Finding> {
    let patterns =
        ["neighbor", "sor", "matmult", "producer-consumer", "migratory", "phase-change", "init-then-compute"];
    let mut ratios = Vec::new();
    let mut worst: Option<(String, f64, u64, u64, u64)> = None;
    for pattern in patterns {
        let s = generated(pattern, 8, 300_000, "ace")?;
        let p = s.place(&PlaceRequest::new("delay"))?;
        let r = &p.evaluation.results;
        let (opt, delay) = (result(r, "optimal"), result(r, "delay"));
        let ratio = delay.cost / opt.cost;
        ratios.push(format!("{pattern} {ratio:.2}"));
        if worst.as_ref().is_none_or(|w| ratio > w.1) {
            worst = Some((
                pattern.to_string(),
                ratio,
                delay.moves + delay.replications,
                opt.moves + opt.replications,
                delay.global,
            ));
        }
    }
    let within = ratios.len()
        - ratios
            .iter()
            .filter(|r| r.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()).is_some_and(|v| v > 1.15))
            .count();
    let (wp, wr, dm, om, dg) = worst.expect("patterns");
    Ok(Finding::new(
        "Delay within 15 % of the optimum on the ACE, all applications but plytrace",
        format!(
            "Delay / optimum on ACE's costs, 8 threads: {} ({within} of {} within 15 %)",
            ratios.join(", "),
            patterns.len()
        ),
        within == patterns.len(),
        format!(
            "worst: {wp} ({wr:.2}x): Delay made {dm} page moves and copies against the optimum's {om}, and left {dg} references in global memory: on pages several threads write in turn, its 100-reference delay does not stop it moving or freezing them"
        ),
    ))
}

/// Neighbour sharing on the SAMMU machine: 16 threads, 2 M accesses.
fn neighbour_on_sammu() -> Result<Session> {
    generated("neighbor", 16, 2_000_000, "sammu")
}

fn sammu_matrix(_: &Inputs) -> Result<Finding> {
    let s = neighbour_on_sammu()?;
    let a = s.analyze(&AnalyzeRequest {
        detector: "sammu".into(),
        compare: Some("oracle".into()),
        window: 0,
        against: None,
    })?;
    let accuracy = a.accuracy.expect("compared");
    let updates = a.detection.report.as_ref().and_then(|r| r.json.get("updates")).and_then(|v| v.as_u64()).unwrap_or(0);
    let correlation = accuracy.correlation;
    let holds = correlation.is_finite() && correlation >= 0.9;
    Ok(Finding::new(
        "SAMMU's matrices similar to the oracle's",
        format!(
            "neighbour pattern, 16 threads on sammu-x7550, seed 000's parameters: correlation {} with the oracle's page-level matrix ({updates} statistics updates)",
            if correlation.is_finite() {
                format!("{correlation:.3}")
            } else {
                "undefined (SAMMU's matrix is empty)".into()
            }
        ),
        holds,
        if holds {
            "TLB evictions and counter saturations sample each thread's pages".to_string()
        } else {
            format!(
                "with 32-bit access counters only TLB evictions update the statistics, and each thread's pages fit its TLBs (64 + 512 entries): {updates} updates"
            )
        },
    ))
}

fn sammu_time(_: &Inputs) -> Result<Finding> {
    let s = generated("neighbor", 16, 10_000_000, "sammu")?;
    let sim = s.simulate(&SimulateRequest { mechanisms: "os,random,oracle,sammu".into(), ..Default::default() })?;
    let time = |name: &str| sim.mechanisms.iter().find(|m| m.mechanism == name).map_or(f64::NAN, |m| m.time_ns);
    let (os, random, oracle, sammu) = (time("os"), time("random"), time("oracle"), time("sammu"));
    let migrations = sim.mechanisms.iter().find(|m| m.mechanism == "sammu").map_or(0, |m| m.counts.thread_migrations);
    let holds = sammu < os && sammu < random && sammu <= 1.05 * oracle;
    Ok(Finding::new(
        "SAMMU close to the oracle, ahead of the OS and random (figure 3)",
        format!(
            "neighbour pattern, 16 threads, 10 M accesses on sammu-x7550, simulated time against the OS's: oracle {:.3}, SAMMU {:.3}, random {:.3}",
            oracle / os,
            sammu / os,
            random / os
        ),
        holds,
        if holds {
            format!("SAMMU remapped the threads ({migrations} thread migrations)")
        } else {
            format!(
                "SAMMU made {migrations} thread migrations in a {:.2} ms run: with seed 000's 32-bit counters its TLBs report no sharing on this working set (see sammu-matrix), so it keeps the OS's placement",
                os / 1e6
            )
        },
    ))
}

fn cg_data_mapping(inputs: &Inputs) -> Result<Finding> {
    let Some(trace) = &inputs.cg else {
        return Ok(Finding {
            paper: "CG affected by data mapping only".into(),
            sharemap: "-".into(),
            verdict: Verdict::NotRun,
            why: "needs a recording of a CG-like program: `make -C workloads`, then `OMP_NUM_THREADS=8 sharemap record -o cg.trace -- workloads/build/traced/cg 20000` and `--cg cg.trace`".into(),
        });
    };
    let machine = "pack:4 numa:1 l3:1(size=2MiB) l2:2(size=256KiB) l1d:1(size=32KiB) core:1 pu:1";
    let s = Session::new(TraceInput::file(trace), Machine::from_spec(machine)?, 1);
    let sim = s.simulate(&SimulateRequest {
        mechanisms: "os,static:threads=sharemap,static:pages=memory".into(),
        ..Default::default()
    })?;
    let get = |name: &str| sim.mechanisms.iter().find(|m| m.mechanism == name).expect("simulated");
    let (os, threads, data) = (get("os"), get("static:threads=sharemap"), get("static:pages=memory"));
    let gain = |m: &crate::simulate::Outcome| 1.0 - m.time_ns / os.time_ns;
    let said = |g: f64| format!("{:.1} % {}", 100.0 * g.abs(), if g >= 0.0 { "faster" } else { "slower" });
    Ok(Finding::new(
        "CG gains from data mapping rather than thread mapping",
        format!(
            "{}, 4 nodes, simulated time against the OS's: thread mapping alone {}, data mapping alone (each page where its memory accesses come from) {}",
            trace.display(),
            said(gain(threads)),
            said(gain(data))
        ),
        gain(data) > gain(threads),
        format!(
            "local memory accesses: OS {:.1} %, thread mapping {:.1} %, data mapping {:.1} %",
            100.0 * os.local_dram_share,
            100.0 * threads.local_dram_share,
            100.0 * data.local_dram_share
        ),
    ))
}

fn stmap_sampling(_: &Inputs) -> Result<Finding> {
    let s = neighbour_on_sammu()?;
    let a = s.analyze(&AnalyzeRequest {
        detector: "stmap:si=100".into(),
        compare: Some("stmap:si=0".into()),
        window: 0,
        against: None,
    })?;
    let acc = a.accuracy.expect("compared");
    Ok(Finding::new(
        "SI = 100: the best trade-off, its matrices' MSE against SI = 0 low (figure 1b)",
        format!(
            "neighbour pattern, 16 threads: SI = 100 against SI = 0, correlation {:.3}, MSE {:.4} (matrices scaled to a maximum of 1)",
            acc.correlation, acc.mse
        ),
        acc.correlation >= 0.8,
        "one access in 101 of each thread still visits every shared block many times",
    ))
}

fn marathe_serial_init(_: &Inputs) -> Result<Finding> {
    let s = generated("init-then-compute", 16, 1_000_000, FOUR_NODES)?;
    let p = s.place(&PlaceRequest::new("first-touch,marathe"))?;
    let r = &p.evaluation.results;
    let (ft, m) = (result(r, "first-touch"), result(r, "marathe"));
    Ok(Finding::new(
        "profile-guided placement ahead of first touch when one thread initialises the data",
        format!(
            "init-then-compute pattern, 16 threads on 4 nodes: MCPR first touch {:.3} ({:.1} % local), Marathe {:.3} ({:.1} % local)",
            ft.mcpr,
            100.0 * ft.local_ratio,
            m.mcpr,
            100.0 * m.local_ratio
        ),
        m.cost < ft.cost,
        "first touch puts every page on the initialising thread's node; the profile puts each where its compute thread is",
    ))
}
