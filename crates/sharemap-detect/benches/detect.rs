//! Detector throughput per core on the generators' patterns (criterion, accesses/s).
//! Targets: oracle and stmap >= 100M accesses/s per core, sammu >= 50M.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use sharemap_detect::sammu::{Sammu, SammuParams};
use sharemap_detect::stmap::{Stmap, StmapParams};
use sharemap_detect::Oracle;
use sharemap_trace::{Chunk, Metadata, TraceReader, TraceWriter};
use sharemap_sources::generate::{self, GenParams, PATTERNS};
use sharemap_sources::VecSink;

const ACCESSES: u64 = 2_000_000;

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("oracle");
    g.throughput(Throughput::Elements(ACCESSES));
    g.sample_size(10);
    for p in PATTERNS {
        let mut sink = VecSink::default();
        generate::run(p, &GenParams::new(8, ACCESSES, 1), &mut sink).unwrap();
        let (threads, addrs): (Vec<u32>, Vec<u64>) = sink.accesses.iter().map(|a| (a.thread, a.addr)).unzip();
        g.bench_with_input(BenchmarkId::from_parameter(p.name), &(threads, addrs), |b, (t, a)| {
            b.iter(|| {
                let mut o = Oracle::new(64);
                for (&t, &a) in t.iter().zip(a) {
                    o.access(t, a);
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
    for p in PATTERNS {
        let mut sink = VecSink::default();
        generate::run(p, &GenParams::new(8, ACCESSES, 1), &mut sink).unwrap();
        let (threads, pages): (Vec<u32>, Vec<u64>) = sink.accesses.iter().map(|a| (a.thread, a.addr >> 12)).unzip();
        g.bench_with_input(BenchmarkId::from_parameter(p.name), &(threads, pages), |b, (t, pg)| {
            b.iter(|| {
                let mut s = Sammu::new(SammuParams::default(), 8, 2);
                for (&t, &page) in t.iter().zip(pg) {
                    s.access(t, t as usize % 8, t as usize % 8 / 4, page);
                }
                s.report.triggers
            })
        });
    }
    g.finish();

    // STMap over decoded chunks (as the oracle above, decoding is not counted).
    let dir = tempfile::tempdir().unwrap();
    let mut g = c.benchmark_group("stmap");
    g.throughput(Throughput::Elements(ACCESSES));
    g.sample_size(10);
    for p in PATTERNS {
        let path = dir.path().join(format!("{}.trace", p.name));
        let mut w = TraceWriter::create(&path, None, Metadata::default()).unwrap();
        generate::run(p, &GenParams::new(8, ACCESSES, 1), &mut w).unwrap();
        w.finish().unwrap();
        let mut r = TraceReader::open(&path, None).unwrap();
        let mut chunks = Vec::new();
        let mut chunk = Chunk::default();
        while r.next_chunk(&mut chunk).unwrap() {
            chunks.push(chunk.clone());
        }
        g.bench_with_input(BenchmarkId::from_parameter(p.name), &chunks, |b, chunks| {
            b.iter(|| {
                let mut s = Stmap::new(StmapParams::default(), 4096, 8);
                for c in chunks {
                    s.chunk(c);
                }
                s.finish().0.matrix.total()
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
