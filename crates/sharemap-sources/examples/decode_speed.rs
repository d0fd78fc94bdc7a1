//! Quick single-core decode timing per pattern (for profiling; `cargo bench` is the reference).
use sharemap_sources::VecSink;
use sharemap_sources::generate::{self, GenParams, PATTERNS};
use sharemap_trace::Chunk;
use sharemap_trace::native::{ChunkDecoder, ChunkEncoder, DEFAULT_CHUNK_ACCESSES};
use std::time::Instant;

fn main() {
    let only: Vec<String> = std::env::args().skip(1).collect();
    for p in PATTERNS.iter().filter(|p| only.is_empty() || only.iter().any(|o| o == p.name)) {
        let mut sink = VecSink::default();
        generate::run(p, &GenParams::new(8, 2_000_000, 1), &mut sink).unwrap();
        let level: i32 = std::env::var("LEVEL")
            .ok()
            .and_then(|l| l.parse().ok())
            .unwrap_or(sharemap_trace::native::DEFAULT_ZSTD_LEVEL);
        let mut enc = ChunkEncoder::new(level).unwrap();
        let chunk_size: usize =
            std::env::var("CHUNK").ok().and_then(|l| l.parse().ok()).unwrap_or(DEFAULT_CHUNK_ACCESSES);
        let encoded: Vec<_> = sink
            .accesses
            .chunks(chunk_size)
            .enumerate()
            .map(|(i, part)| {
                let mut c = Chunk { first_access: (i * chunk_size) as u64, ..Chunk::default() };
                part.iter().for_each(|a| c.accesses.push(*a));
                let mut payload = Vec::new();
                (enc.encode(&c, &mut payload).unwrap(), payload)
            })
            .collect();
        let mut dec = ChunkDecoder::new();
        let mut out = Chunk::default();
        let mut best = f64::MAX;
        for _ in 0..15 {
            let t = Instant::now();
            for (h, payload) in &encoded {
                dec.decode(h, payload, &mut out).unwrap();
            }
            best = best.min(t.elapsed().as_secs_f64());
        }
        let mut z = zstd::bulk::Decompressor::new().unwrap();
        let mut buf = Vec::with_capacity(1 << 22);
        let mut zbest = f64::MAX;
        let mut raw_bytes = 0;
        for _ in 0..15 {
            let t = Instant::now();
            raw_bytes = 0;
            for (_, payload) in &encoded {
                buf.clear();
                raw_bytes += z.decompress_to_buffer(payload, &mut buf).unwrap();
            }
            zbest = zbest.min(t.elapsed().as_secs_f64());
        }
        let stored: usize = encoded.iter().map(|(_, p)| p.len() + 40).sum();
        println!(
            "{:<18} {:>7.1} M accesses/s   (zstd alone {:>7.1} M/s, raw {:.2} B/access, stored {:.3} B/access)",
            p.name,
            2.0 / best,
            2.0 / zbest,
            raw_bytes as f64 / 2e6,
            stored as f64 / 2e6
        );
    }
}
