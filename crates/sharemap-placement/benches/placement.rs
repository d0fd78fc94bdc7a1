//! Placement throughput per core on the generators' patterns, 64 threads on a 64-node
//! machine (criterion, in accesses per second). Targets: the optimum with replication
//! >= 100M accesses/s per core; online policies >= 200M accesses/s per core.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use sharemap_machine::CostParams;
use sharemap_placement::optimal::reference::plain_recurrence;
use sharemap_placement::partition::{Partition, PartitionOptions};
use sharemap_placement::policies::{POLICIES, Settings};
use sharemap_placement::testing::{page, pages_of, plain_context};
use sharemap_placement::{Costs, Optimal, Ref};
use sharemap_sources::VecSink;
use sharemap_sources::generate::{self, GenParams, PATTERNS};

const ACCESSES: u64 = 1_000_000;
const NODES: usize = 64;

fn pages(pattern: &str) -> Vec<(u64, Vec<Ref>)> {
    let mut sink = VecSink::default();
    generate::run(generate::find(pattern).unwrap(), &GenParams::new(NODES as u32, ACCESSES, 1), &mut sink).unwrap();
    pages_of(&sink.accesses, 4096, NODES)
}

fn bench(c: &mut Criterion) {
    let costs = Costs::new(&CostParams::butterfly(4096));
    type Pages = Vec<(u64, Vec<Ref>)>;
    let all: Vec<(&str, Pages)> = PATTERNS.iter().map(|p| (p.name, pages(p.name))).collect();

    let mut optimal = c.benchmark_group("optimal");
    optimal.throughput(Throughput::Elements(ACCESSES));
    optimal.sample_size(10);
    for (name, pages) in &all {
        // What is timed is right: the solver's cost is the plain recurrence's on every page.
        let mut opt = Optimal::new(NODES, costs);
        for (_, refs) in pages.iter().take(64) {
            let (fast, plain) = (opt.solve(refs).cost, plain_recurrence(refs, NODES, &costs));
            assert!((fast - plain).abs() <= 1e-9 * plain.max(1.0), "{name}: {fast} vs {plain}");
        }
        optimal.bench_with_input(BenchmarkId::from_parameter(name), pages, |b, pages| {
            let mut opt = Optimal::new(NODES, costs);
            b.iter(|| pages.iter().map(|(_, refs)| opt.solve(refs).cost).sum::<f64>())
        });
    }
    optimal.finish();

    // Every policy in turn: the throughput is per policy (accesses x policies per second).
    let mut policies = c.benchmark_group("policies");
    policies.throughput(Throughput::Elements(ACCESSES * POLICIES.len() as u64));
    policies.sample_size(10);
    let built: Vec<_> =
        POLICIES.iter().map(|p| sharemap_placement::policies::build(p, &Settings::default(), &[]).unwrap()).collect();
    for (name, pages) in &all {
        let ctx = plain_context(NODES, costs, pages.len());
        policies.bench_with_input(BenchmarkId::from_parameter(name), pages, |b, pages| {
            b.iter(|| {
                let mut local = 0u64;
                for p in &built {
                    for (i, pg) in pages.iter().enumerate() {
                        local += p.place_page(&page(i, pg), &ctx).local;
                    }
                }
                local
            })
        });
    }
    policies.finish();

    // Reading a trace file into per-page streams (the pass every placement command makes).
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sor.trace");
    let mut sink = VecSink::default();
    generate::run(generate::find("sor").unwrap(), &GenParams::new(NODES as u32, 4 * ACCESSES, 1), &mut sink).unwrap();
    let mut w = sharemap_trace::TraceWriter::create(&path, None, sharemap_trace::Metadata::default()).unwrap();
    sink.accesses.iter().for_each(|a| w.access(*a).unwrap());
    w.finish().unwrap();
    let machine = sharemap_machine::Machine::from_spec(&format!("numa:{NODES} pu:1")).unwrap();
    let opts = PartitionOptions {
        page_size: sharemap_core::PageSize::DEFAULT,
        placement: sharemap_machine::ThreadPlacement::identity(&machine),
        memory_budget: 1 << 30,
        prepass: Default::default(),
    };
    let mut partition = c.benchmark_group("partition");
    partition.throughput(Throughput::Elements(4 * ACCESSES));
    partition.sample_size(10);
    partition.bench_function("sor", |b| {
        b.iter(|| {
            let mut r = sharemap_trace::TraceReader::open(&path, None).unwrap();
            Partition::build(&mut r, &opts, &|_| {}).unwrap().pages()
        })
    });
    partition.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
