//! Single-core throughput of the optimum and each policy per pattern (for profiling;
//! `cargo bench -p sharemap-placement` is the reference). Usage: place_speed [PATTERN...]
use sharemap_machine::CostParams;
use sharemap_placement::policies::{POLICIES, Settings};
use sharemap_placement::testing::{page, pages_of, plain_context};
use sharemap_placement::{Costs, Optimal};
use sharemap_sources::VecSink;
use sharemap_sources::generate::{self, GenParams, PATTERNS};
use std::time::Instant;

fn main() {
    let only: Vec<String> = std::env::args().skip(1).collect();
    let nodes = 64;
    let n: u64 = std::env::var("N").ok().and_then(|v| v.parse().ok()).unwrap_or(4_000_000);
    let costs = Costs::new(&CostParams::butterfly(4096));
    for p in PATTERNS.iter().filter(|p| only.is_empty() || only.iter().any(|o| o == p.name)) {
        let mut sink = VecSink::default();
        generate::run(p, &GenParams::new(64, n, 1), &mut sink).unwrap();
        let pages = pages_of(&sink.accesses, 4096, nodes);
        let mut opt = Optimal::new(nodes, costs);
        let best = (0..3)
            .map(|_| {
                let t = Instant::now();
                let c: f64 = pages.iter().map(|(_, refs)| opt.solve(refs).cost).sum();
                std::hint::black_box(c);
                t.elapsed().as_secs_f64()
            })
            .fold(f64::MAX, f64::min);
        let ctx = plain_context(nodes, costs, pages.len());
        let mut slowest = (f64::MAX, "");
        let mut total = 0.0;
        for info in POLICIES {
            let pol = sharemap_placement::policies::build(info, &Settings::default(), &[]).unwrap();
            let t = Instant::now();
            for (i, pg) in pages.iter().enumerate() {
                std::hint::black_box(pol.place_page(&page(i, pg), &ctx));
            }
            let rate = n as f64 / t.elapsed().as_secs_f64() / 1e6;
            total += t.elapsed().as_secs_f64();
            if rate < slowest.0 {
                slowest = (rate, info.name);
            }
        }
        println!(
            "{:<18} optimal {:>6.1} M/s   policies: mean {:>6.1} M/s, slowest {} {:.1} M/s",
            p.name,
            n as f64 / best / 1e6,
            n as f64 * POLICIES.len() as f64 / total / 1e6,
            slowest.1,
            slowest.0
        );
    }
}
