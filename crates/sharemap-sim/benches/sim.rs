//! Simulation throughput on one core (criterion, in accesses per second): 64 threads on 64
//! cores in 4 packages, three cache levels, TLBs and coherence, on the generators' patterns
//! at 2M and 20M accesses (the larger ones touch ten times the lines: the simulator's
//! tables then outgrow the host's caches). Target: >= 30M accesses/s.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use sharemap_machine::Machine;
use sharemap_sim::{FirstPlacement, Model, Params, Sim};
use sharemap_sources::VecSink;
use sharemap_sources::generate::{self, GenParams};

const SIZES: [u64; 2] = [2_000_000, 20_000_000];
/// Accesses per chunk, as a trace's are read.
const CHUNK: usize = sharemap_trace::native::DEFAULT_CHUNK_ACCESSES;
const THREADS: u32 = 64;
/// 4 packages of 16 cores: 32 KiB L1d and 256 KiB L2 per core, 16 MiB L3 per package.
const MACHINE: &str = "pack:4 numa:1 l3:1(size=16MiB) l2:16(size=256KiB) l1d:1(size=32KiB) core:1 pu:1";

fn bench(c: &mut Criterion) {
    let machine = Machine::from_spec(MACHINE).unwrap();
    let model = Model::new(&machine, Params::default()).unwrap();
    let pus: Vec<usize> = (0..THREADS as usize).collect();
    for size in SIZES {
        let mut group = c.benchmark_group(format!("simulate-{}M", size / 1_000_000));
        group.throughput(Throughput::Elements(size));
        group.sample_size(10);
        for pattern in ["neighbor", "all-to-all", "private", "random", "migratory"] {
            // Made at the first call: criterion calls the closure once per sample, and not at
            // all for a benchmark its filter leaves out.
            let trace = std::cell::OnceCell::new();
            group.bench_function(BenchmarkId::from_parameter(pattern), |b| {
                let (threads, addrs, writes) = trace.get_or_init(|| columns(pattern, size));
                b.iter(|| {
                    let mut sim = Sim::new(&model, 4096, &pus, FirstPlacement::FirstTouch);
                    for ((threads, addrs), writes) in
                        threads.chunks(CHUNK).zip(addrs.chunks(CHUNK)).zip(writes.chunks(CHUNK))
                    {
                        sim.run(threads, addrs, |i| writes[i], |_, _, _, _, _| {});
                    }
                    sim.time_ns()
                })
            });
        }
        group.finish();
    }
}

/// A pattern's accesses as the columns a trace's chunks carry (thread, address, write), as
/// `simulate` reads them: 13 bytes an access. Tuples of (usize, u64, bool) took 24, and
/// streaming them through the host's caches cost up to a third of the fast patterns' rate.
fn columns(pattern: &str, size: u64) -> (Vec<u32>, Vec<u64>, Vec<bool>) {
    let mut sink = VecSink::default();
    generate::run(generate::find(pattern).unwrap(), &GenParams::new(THREADS, size, 1), &mut sink).unwrap();
    let threads = sink.accesses.iter().map(|a| a.thread).collect();
    let addrs = sink.accesses.iter().map(|a| a.addr).collect();
    let writes = sink.accesses.iter().map(|a| a.kind == sharemap_trace::Kind::Write).collect();
    (threads, addrs, writes)
}

criterion_group!(benches, bench);
criterion_main!(benches);
