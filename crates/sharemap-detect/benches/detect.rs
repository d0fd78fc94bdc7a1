//! Detector throughput per core on the generators' patterns (criterion, accesses/s), on
//! decoded chunks (decoding is not counted).
//! Targets: oracle and stmap >= 100M accesses/s per core, sammu >= 50M, what is shared
//! (lines classified and attributed, `WhatIsShared`) >= 50M.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use sharemap_detect::sammu::{Sammu, SammuParams};
use sharemap_detect::stmap::{Stmap, StmapParams};
use sharemap_detect::{Detector, Oracle, WhatIsShared};
use sharemap_sources::generate::{self, GenParams, PATTERNS};
use sharemap_trace::{Chunk, Metadata, TraceReader, TraceSource, TraceWriter};

const ACCESSES: u64 = 2_000_000;

/// Each pattern generated once, 8 threads, as the decoded chunks of a native trace (with
/// its events, which STMap reads).
fn traces() -> Vec<(&'static str, Vec<Chunk>)> {
    let dir = tempfile::tempdir().unwrap();
    PATTERNS
        .iter()
        .map(|p| {
            let path = dir.path().join(format!("{}.trace", p.name));
            let mut w = TraceWriter::create(&path, None, Metadata::default()).unwrap();
            generate::run(p, &GenParams::new(8, ACCESSES, 1), &mut w).unwrap();
            w.finish().unwrap();
            let mut r = TraceReader::open(&path, None).unwrap();
            let (mut chunks, mut chunk) = (Vec::new(), Chunk::default());
            while r.next_chunk(&mut chunk).unwrap() {
                chunks.push(chunk.clone());
            }
            (p.name, chunks)
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let traces = traces();
    let mut g = c.benchmark_group("oracle");
    g.throughput(Throughput::Elements(ACCESSES));
    g.sample_size(10);
    for (name, chunks) in &traces {
        g.bench_with_input(BenchmarkId::from_parameter(name), chunks, |b, chunks| {
            b.iter(|| {
                let mut o = Oracle::new(64);
                for c in chunks {
                    for (&t, &a) in c.accesses.thread.iter().zip(&c.accesses.addr) {
                        o.access(t, a);
                    }
                }
                o.matrix.total()
            })
        });
    }
    g.finish();

    // SAMMU's per-access work (TLB model), 8 threads on 8 cores in 2 nodes.
    let mut g = c.benchmark_group("sammu");
    g.throughput(Throughput::Elements(ACCESSES));
    g.sample_size(10);
    for (name, chunks) in &traces {
        g.bench_with_input(BenchmarkId::from_parameter(name), chunks, |b, chunks| {
            b.iter(|| {
                let mut s = Sammu::new(SammuParams::default(), 8, 2);
                for c in chunks {
                    for (&t, &a) in c.accesses.thread.iter().zip(&c.accesses.addr) {
                        s.access(t, t as usize % 8, t as usize % 8 / 4, a >> 12);
                    }
                }
                s.report.triggers
            })
        });
    }
    g.finish();

    let mut g = c.benchmark_group("what-is-shared");
    g.throughput(Throughput::Elements(ACCESSES));
    g.sample_size(10);
    for (name, chunks) in &traces {
        g.bench_with_input(BenchmarkId::from_parameter(name), chunks, |b, chunks| {
            b.iter(|| WhatIsShared::of_chunks(&Metadata::default(), chunks).lines.total())
        });
    }
    g.finish();

    let mut g = c.benchmark_group("stmap");
    g.throughput(Throughput::Elements(ACCESSES));
    g.sample_size(10);
    for (name, chunks) in &traces {
        g.bench_with_input(BenchmarkId::from_parameter(name), chunks, |b, chunks| {
            b.iter(|| {
                let mut s = Stmap::new(StmapParams::default(), 4096, 8);
                for c in chunks {
                    Detector::chunk(&mut s, c);
                }
                s.finish_with_decision().0.matrix.total()
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
