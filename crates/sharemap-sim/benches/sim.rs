//! Simulation throughput on one core (criterion, in accesses per second): 64 threads on 64
//! cores in 4 packages, three cache levels, TLBs and coherence, on the generators' patterns.
//! Target: >= 30M accesses/s.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use sharemap_machine::Machine;
use sharemap_sim::{FirstPlacement, Model, Params, Sim};
use sharemap_sources::VecSink;
use sharemap_sources::generate::{self, GenParams};

const ACCESSES: u64 = 2_000_000;
const THREADS: u32 = 64;
/// 4 packages of 16 cores: 32 KiB L1d and 256 KiB L2 per core, 16 MiB L3 per package.
const MACHINE: &str = "pack:4 numa:1 l3:1(size=16MiB) l2:16(size=256KiB) l1d:1(size=32KiB) core:1 pu:1";

fn bench(c: &mut Criterion) {
    let machine = Machine::from_spec(MACHINE).unwrap();
    let model = Model::new(&machine, Params::default()).unwrap();
    let pus: Vec<usize> = (0..THREADS as usize).collect();
    let mut group = c.benchmark_group("simulate");
    group.throughput(Throughput::Elements(ACCESSES));
    group.sample_size(10);
    for pattern in ["neighbor", "all-to-all", "private", "random", "migratory"] {
        let mut sink = VecSink::default();
        generate::run(generate::find(pattern).unwrap(), &GenParams::new(THREADS, ACCESSES, 1), &mut sink).unwrap();
        // The columns a trace's chunks carry (thread, address, write), as `simulate` reads them:
        // 13 bytes an access. Tuples of (usize, u64, bool) took 24, and streaming those 48 MB
        // through the host's caches each run cost up to a third of the fast patterns' rate.
        let threads: Vec<u32> = sink.accesses.iter().map(|a| a.thread).collect();
        let addrs: Vec<u64> = sink.accesses.iter().map(|a| a.addr).collect();
        let writes: Vec<bool> = sink.accesses.iter().map(|a| a.kind == sharemap_trace::Kind::Write).collect();
        group.bench_function(BenchmarkId::from_parameter(pattern), |b| {
            b.iter(|| {
                let mut sim = Sim::new(&model, 4096, &pus, FirstPlacement::FirstTouch);
                for ((&t, &addr), &write) in threads.iter().zip(&addrs).zip(&writes) {
                    sim.access(t as usize, addr, write);
                }
                sim.time_ns()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
