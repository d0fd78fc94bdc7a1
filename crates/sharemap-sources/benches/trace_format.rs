//! Native trace format on the generators' patterns: bytes per access (printed) and
//! encode / decode throughput per core (criterion, in accesses per second).
//! Targets: <= 3 bytes/access, decode >= 300M accesses/s per core.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use sharemap_sources::VecSink;
use sharemap_sources::generate::{self, GenParams, PATTERNS};
use sharemap_trace::native::{ChunkDecoder, ChunkEncoder, DEFAULT_CHUNK_ACCESSES, DEFAULT_ZSTD_LEVEL};
use sharemap_trace::{Chunk, TraceSource};

const ACCESSES: u64 = 2_000_000;

/// The pattern's accesses cut into native-format chunks.
fn chunks(pattern: &str) -> Vec<Chunk> {
    let mut sink = VecSink::default();
    generate::run(generate::find(pattern).unwrap(), &GenParams::new(8, ACCESSES, 1), &mut sink).unwrap();
    sink.accesses
        .chunks(DEFAULT_CHUNK_ACCESSES)
        .enumerate()
        .map(|(i, part)| {
            let mut c = Chunk { first_access: (i * DEFAULT_CHUNK_ACCESSES) as u64, ..Chunk::default() };
            part.iter().for_each(|a| c.accesses.push(*a));
            c
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let mut decode = c.benchmark_group("decode");
    decode.throughput(Throughput::Elements(ACCESSES));
    decode.sample_size(20);
    println!("\nbytes/access of the native format (chunk header included), {ACCESSES} accesses, 8 threads:");
    let mut encoded_all = Vec::new();
    for p in PATTERNS {
        let chunks = chunks(p.name);
        let mut enc = ChunkEncoder::new(DEFAULT_ZSTD_LEVEL).unwrap();
        let encoded: Vec<_> = chunks
            .iter()
            .map(|c| {
                let mut payload = Vec::new();
                let h = enc.encode(c, &mut payload).unwrap();
                (h, payload)
            })
            .collect();
        let bytes: usize = encoded.iter().map(|(_, p)| p.len() + sharemap_trace::native::CHUNK_HEADER_LEN).sum();
        println!("  {:<18} {:.3}", p.name, bytes as f64 / ACCESSES as f64);
        decode.bench_with_input(BenchmarkId::from_parameter(p.name), &encoded, |b, encoded| {
            let mut dec = ChunkDecoder::new();
            let mut out = Chunk::default();
            b.iter(|| {
                for (h, payload) in encoded {
                    dec.decode(h, payload, &mut out).unwrap();
                }
                out.accesses.len()
            })
        });
        encoded_all.push((p.name, chunks));
    }
    decode.finish();

    let mut encode = c.benchmark_group("encode");
    encode.throughput(Throughput::Elements(ACCESSES));
    encode.sample_size(10);
    for (name, chunks) in encoded_all.iter().filter(|(n, _)| ["sor", "all-to-all", "random"].contains(n)) {
        encode.bench_with_input(BenchmarkId::from_parameter(name), chunks, |b, chunks| {
            let mut enc = ChunkEncoder::new(DEFAULT_ZSTD_LEVEL).unwrap();
            let mut payload = Vec::new();
            b.iter(|| chunks.iter().map(|c| enc.encode(c, &mut payload).unwrap().payload_len as usize).sum::<usize>())
        });
    }
    encode.finish();
}

/// Whole-file decoding from disk: one core sequentially, and all cores by chunk (rayon).
fn file_decode(c: &mut Criterion) {
    const N: u64 = 8_000_000;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sor.trace");
    let meta = sharemap_trace::Metadata::default();
    let mut w =
        sharemap_trace::native::NativeWriter::new(std::io::BufWriter::new(std::fs::File::create(&path).unwrap()), meta)
            .unwrap();
    generate::run(generate::find("sor").unwrap(), &GenParams::new(8, N, 1), &mut w).unwrap();
    w.finish().unwrap();
    let mut g = c.benchmark_group("file_decode_sor");
    g.throughput(Throughput::Elements(N));
    g.sample_size(10);
    g.bench_function("sequential", |b| {
        b.iter(|| {
            let mut r = sharemap_trace::native::NativeReader::open(&path).unwrap();
            let mut chunk = Chunk::default();
            let mut n = 0;
            while r.next_chunk(&mut chunk).unwrap() {
                n += chunk.accesses.len();
            }
            n
        })
    });
    g.bench_function(format!("parallel_{}_threads", rayon::current_num_threads()), |b| {
        b.iter(|| {
            let r = sharemap_trace::native::NativeReader::open(&path).unwrap();
            r.par_map_chunks(|c| c.accesses.len()).unwrap().into_iter().sum::<usize>()
        })
    });
    g.finish();
}

criterion_group!(benches, bench, file_decode);
criterion_main!(benches);
