//! Mapping time, 1,024 threads on a 1,024-PU machine, on each kind of synthetic matrix.
//! Target: the default algorithm (`sharemap`) in <= 10 ms.

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use sharemap_machine::Machine;
use sharemap_mapping::{CostModel, PairCosts, build, matrices};

const MACHINE: &str = "pack:16 numa:1 l3:1 core:32 pu:2";

fn bench(c: &mut Criterion) {
    let machine = Machine::from_spec(MACHINE).unwrap();
    let costs = PairCosts::new(&machine, CostModel::Latency);
    for alg in ["sharemap", "bisection", "eagermap", "treematch"] {
        let mut g = c.benchmark_group(format!("map-1024/{alg}"));
        g.sample_size(10);
        for (kind, _) in matrices::KINDS {
            let m = matrices::make(kind, 1024, 1).unwrap();
            let a = build(alg, 1).unwrap();
            g.bench_with_input(BenchmarkId::from_parameter(kind), &m, |b, m| {
                b.iter(|| a.map(m, &machine, &costs).unwrap())
            });
        }
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
