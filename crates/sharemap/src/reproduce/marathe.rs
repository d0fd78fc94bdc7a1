//! Marathe & Mueller (seed 001): a hardware profile places each page where it is used most.
//! Their SGI Altix runs NAS and SPEC OpenMP codes of hundreds of MB on nodes of a few
//! processors: here 16 threads on 4 nodes, 256 pages per thread, profiles of loads missing a
//! 32 KiB per-thread cache (the long-latency loads) and of accesses missing a 64-entry TLB.

use super::{ClaimInfo, Diagnostic, Finding, Gen, Run, claim, result};
use crate::{PlaceRequest, Result};

const MACHINE: &str = "pack:4 numa:1 core:4 pu:1";
const THREADS: u32 = 16;

fn trace(run: &Run, pattern: &'static str) -> Result<super::Generated> {
    run.generated(&Gen::new(pattern, THREADS, 256, if pattern == "phase-change" { 12 } else { 10 }))
}

pub(super) const SERIAL_INIT: ClaimInfo = claim(
    "marathe-serial-init",
    "Marathe & Mueller (seed 001), section 5",
    "with a serial initialisation, profile-guided placement beats first touch",
    marathe_serial_init,
);

fn marathe_serial_init(run: &Run) -> Result<Finding> {
    let g = trace(run, "init-then-compute")?;
    let p = g.session(MACHINE)?.place(&PlaceRequest::new("first-touch,marathe"))?;
    let r = &p.evaluation.results;
    let (ft, m) = (result(r, "first-touch"), result(r, "marathe"));
    Ok(Finding::new(
        "profile-guided placement ahead of first touch when one thread initialises the data (20 % average wall-clock saving)",
        format!(
            "init-then-compute, {THREADS} threads on 4 nodes: MCPR first touch {:.3} ({:.1} % local), Marathe {:.3} ({:.1} % local, {} samples)",
            ft.mcpr,
            100.0 * ft.local_ratio,
            m.mcpr,
            100.0 * m.local_ratio,
            m.profile_samples
        ),
        m.cost < ft.cost,
        "first touch puts every page on the initialising thread's node; the profile puts each where its compute thread misses on it",
        g.scale(),
    ))
}

pub(super) const LATENCY_AHEAD_OF_TLB: ClaimInfo = claim(
    "marathe-latency-ahead-of-tlb",
    "Marathe & Mueller (seed 001), abstract and section 5",
    "long-latency loads are a better indicator for page placement than TLB misses",
    latency_ahead_of_tlb,
);

fn latency_ahead_of_tlb(run: &Run) -> Result<Finding> {
    let patterns = ["init-then-compute", "neighbor", "sor", "phase-change", "all-to-all", "producer-consumer"];
    let mut ahead = 0;
    let mut shown = Vec::new();
    let mut scale = String::new();
    // Where the TLB profile leads: that pattern, and the store-counting profile's MCPR there.
    let mut behind = Vec::new();
    for pattern in patterns {
        let g = trace(run, pattern)?;
        if pattern == "init-then-compute" {
            scale = g.scale();
        }
        let p = g.session(MACHINE)?.place(&PlaceRequest::new(
            "marathe:source=cache-miss,marathe:source=tlb-miss,marathe:source=cache-miss,stores=1",
        ))?;
        let r = &p.evaluation.results;
        let (lat, tlb) = (result(r, "marathe:source=cache-miss"), result(r, "marathe:source=tlb-miss"));
        let with_stores = result(r, "marathe:source=cache-miss,stores=1");
        ahead += (lat.cost <= tlb.cost) as usize;
        if lat.cost > tlb.cost {
            behind.push((pattern, lat.mcpr, tlb.mcpr, with_stores.mcpr, with_stores.cost <= tlb.cost));
        }
        shown.push(format!("{pattern} {:.3} / {:.3}", lat.mcpr, tlb.mcpr));
    }
    let holds = ahead + 1 >= patterns.len();
    let diagnostic = Diagnostic {
        experiment: "where the TLB profile leads, the same cache-miss profile counting the stores that miss too".into(),
        found: behind
            .iter()
            .map(|(p, l, t, s, _)| format!("{p}: loads {l:.3}, TLB {t:.3}, loads and stores {s:.3}"))
            .collect::<Vec<_>>()
            .join("; "),
        confirms: behind.iter().all(|b| b.4),
    };
    let finding = Finding::new(
        "long-latency loads provide a better indicator for page placement than TLB misses",
        format!(
            "MCPR with a profile of long-latency loads / of TLB misses: {} (loads ahead or level on {ahead} of {})",
            shown.join(", "),
            patterns.len()
        ),
        holds,
        if holds {
            "a TLB miss is one per page and stay whoever uses the page most; a load that misses the cache is one per line, in proportion to the use"
        } else {
            "a load-latency profile never sees stores: where one node writes what another reads (a producer's buffer, a sweep's output grid) it homes the page at the reader"
        },
        format!("{scale} (each pattern at that size), 4 nodes of 4 cores"),
    );
    Ok(if holds { finding } else { finding.with_diagnostic(diagnostic) })
}
