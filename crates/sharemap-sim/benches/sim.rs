//! Simulation throughput on one core (criterion, in accesses per second): 64 threads on 64
//! cores in 4 packages, three cache levels, TLBs and coherence, on the generators' patterns
//! at 2M and 20M accesses (the larger ones touch ten times the lines: the simulator's
//! tables then outgrow the host's caches). Target: >= 30M accesses/s over the suite (every
//! pattern's accesses over their total time, `simulate-suite`) at each size; each pattern's
//! own rate is reported beside it.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use sharemap_machine::Machine;
use sharemap_sim::{FirstPlacement, Model, Params, Sim};
use sharemap_sources::VecSink;
use sharemap_sources::generate::{self, GenParams};
use std::cell::OnceCell;

const SIZES: [u64; 2] = [2_000_000, 20_000_000];
const PATTERNS: [&str; 5] = ["neighbor", "all-to-all", "private", "random", "migratory"];
/// Accesses per chunk, as a trace's are read.
const CHUNK: usize = sharemap_trace::native::DEFAULT_CHUNK_ACCESSES;
const THREADS: u32 = 64;
/// 4 packages of 16 cores: 32 KiB L1d and 256 KiB L2 per core, 16 MiB L3 per package.
const MACHINE: &str = "pack:4 numa:1 l3:1(size=16MiB) l2:16(size=256KiB) l1d:1(size=32KiB) core:1 pu:1";

/// A trace as the columns its chunks carry (thread, address, write), as `simulate` reads
/// them: 13 bytes an access. Tuples of (usize, u64, bool) took 24, and streaming them
/// through the host's caches cost up to a third of the fast patterns' rate.
type Columns = (Vec<u32>, Vec<u64>, Vec<bool>);

/// Every pattern's trace at every size, each made at its first use: criterion calls a
/// benchmark's closure once per sample, and not at all for one its filter leaves out.
struct Traces(Vec<((&'static str, u64), OnceCell<Columns>)>);

impl Traces {
    fn new() -> Traces {
        Traces(SIZES.iter().flat_map(|&size| PATTERNS.map(|p| ((p, size), OnceCell::new()))).collect())
    }

    fn get(&self, pattern: &'static str, size: u64) -> &Columns {
        let (_, cell) = self.0.iter().find(|(key, _)| *key == (pattern, size)).expect("a known pattern and size");
        cell.get_or_init(|| columns(pattern, size))
    }
}

fn bench(c: &mut Criterion) {
    let machine = Machine::from_spec(MACHINE).unwrap();
    let model = Model::new(&machine, Params::default()).unwrap();
    let traces = Traces::new();
    for size in SIZES {
        let mut group = c.benchmark_group(format!("simulate-{}M", size / 1_000_000));
        group.throughput(Throughput::Elements(size));
        group.sample_size(10);
        for pattern in PATTERNS {
            group.bench_function(BenchmarkId::from_parameter(pattern), |b| {
                let trace = traces.get(pattern, size);
                b.iter(|| simulate(&model, trace))
            });
        }
        group.finish();
    }
    let mut group = c.benchmark_group("simulate-suite");
    group.sample_size(10);
    for size in SIZES {
        group.throughput(Throughput::Elements(size * PATTERNS.len() as u64));
        group.bench_function(BenchmarkId::from_parameter(format!("{}M", size / 1_000_000)), |b| {
            let suite: Vec<&Columns> = PATTERNS.iter().map(|p| traces.get(p, size)).collect();
            b.iter(|| suite.iter().map(|trace| simulate(&model, trace)).sum::<f64>())
        });
    }
    group.finish();
}

/// One simulation of `trace` on a machine at rest, fed chunk by chunk as `simulate` feeds
/// it; returns the simulated time.
fn simulate(model: &Model, (threads, addrs, writes): &Columns) -> f64 {
    let pus: Vec<usize> = (0..THREADS as usize).collect();
    let mut sim = Sim::new(model, 4096, &pus, FirstPlacement::FirstTouch);
    for ((threads, addrs), writes) in threads.chunks(CHUNK).zip(addrs.chunks(CHUNK)).zip(writes.chunks(CHUNK)) {
        sim.feed(threads, addrs, |i| writes[i], |_, _, _, _, _| {});
    }
    sim.time_ns()
}

fn columns(pattern: &str, size: u64) -> Columns {
    let mut sink = VecSink::default();
    generate::run(generate::find(pattern).unwrap(), &GenParams::new(THREADS, size, 1), &mut sink).unwrap();
    let threads = sink.accesses.iter().map(|a| a.thread).collect();
    let addrs = sink.accesses.iter().map(|a| a.addr).collect();
    let writes = sink.accesses.iter().map(|a| a.kind == sharemap_trace::Kind::Write).collect();
    (threads, addrs, writes)
}

/// The host's latency to its memory at the sizes the simulator's tables reach: one load
/// after another along a random cycle through 64-byte lines, a million per iteration (so
/// criterion's milliseconds are nanoseconds per load). On a shared VM it tells how much of
/// the host's last-level cache a run had, on which the 20M figures depend.
fn host_latency(c: &mut Criterion) {
    const LOADS: usize = 1_000_000;
    let mut group = c.benchmark_group("host-latency");
    group.sample_size(10);
    for mib in [4, 8, 16] {
        let next = random_cycle((mib << 20) / 64);
        group.bench_function(BenchmarkId::from_parameter(format!("{mib}MiB")), |b| {
            b.iter(|| (0..LOADS).fold(0, |at, _| next[at].0))
        });
    }
    group.finish();
}

/// A host line of the pointer chase, holding the index of the next one.
#[repr(align(64))]
struct ChaseLine(usize);

/// `n` host lines linked in one cycle, each to the next of a shuffled order.
fn random_cycle(n: usize) -> Vec<ChaseLine> {
    let mut order: Vec<usize> = (0..n).collect();
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for i in (1..n).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        order.swap(i, (x % i as u64) as usize);
    }
    let mut next: Vec<ChaseLine> = (0..n).map(|_| ChaseLine(0)).collect();
    for i in 0..n {
        next[order[i]].0 = order[(i + 1) % n];
    }
    next
}

criterion_group!(benches, bench, host_latency);
criterion_main!(benches);
