//! Re-encodes the chunks of a native trace (a recording, say) on one core: the encoder's
//! and zstd's time per access at each zstd level asked for, the decoding time of the
//! result, and a hash of the raw payloads, which an encoder change that keeps every choice
//! of the format keeps too. For profiling the encoder on real traces; `cargo bench`
//! (trace_format) is the reference on generated ones. The first 4,000 chunks (65M
//! accesses) are taken.
//!
//!     cargo run --release -p sharemap-sources --example encode_speed -- TRACE [LEVEL...]
use sharemap_trace::native::{ChunkDecoder, ChunkEncoder, NativeReader};
use sharemap_trace::{Chunk, TraceSource};
use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(path) = args.next() else {
        eprintln!("usage: encode_speed TRACE [LEVEL...]");
        std::process::exit(2);
    };
    let levels: Result<Vec<i32>, _> = args.map(|l| l.parse()).collect();
    let Ok(levels) = levels else {
        eprintln!("encode_speed: the levels are zstd levels (whole numbers)");
        std::process::exit(2);
    };
    let levels = if levels.is_empty() { vec![sharemap_trace::native::DEFAULT_ZSTD_LEVEL] } else { levels };
    let chunks = match read(&path) {
        Ok(chunks) => chunks,
        Err(e) => {
            eprintln!("encode_speed: {e}");
            std::process::exit(1);
        }
    };
    let n: usize = chunks.iter().map(|c| c.accesses.len()).sum();
    println!("{path}: {} chunks, {n} accesses", chunks.len());
    for level in levels {
        let mut enc = ChunkEncoder::new(level).unwrap();
        let mut payload = Vec::new();
        // Each chunk into its own buffer, allocated outside the timing.
        let mut encoded: Vec<_> = chunks.iter().map(|_| (None, Vec::new())).collect();
        let t = Instant::now();
        for (c, (h, payload)) in chunks.iter().zip(&mut encoded) {
            *h = Some(enc.encode(c, payload).unwrap());
        }
        let t_enc = t.elapsed().as_secs_f64();
        let encoded: Vec<_> = encoded.into_iter().map(|(h, p)| (h.expect("encoded above"), p)).collect();
        // zstd alone on the same raw payloads.
        let mut z = zstd::bulk::Decompressor::new().unwrap();
        let raws: Vec<Vec<u8>> = encoded.iter().map(|(h, p)| z.decompress(p, h.raw_len as usize).unwrap()).collect();
        let mut comp = zstd::bulk::Compressor::new(level).unwrap();
        use zstd::zstd_safe::{CParameter, ParamSwitch};
        comp.set_parameter(CParameter::LiteralCompressionMode(ParamSwitch::Disable)).unwrap();
        comp.set_parameter(CParameter::MinMatch(7)).unwrap();
        let t = Instant::now();
        for r in &raws {
            payload.clear();
            payload.reserve(zstd::zstd_safe::compress_bound(r.len()));
            comp.compress_to_buffer(r, &mut payload).unwrap();
        }
        let t_z = t.elapsed().as_secs_f64();
        let mut dec = ChunkDecoder::new();
        let mut out = Chunk::default();
        let t = Instant::now();
        for (h, p) in &encoded {
            dec.decode(h, p, &mut out).unwrap();
        }
        let t_dec = t.elapsed().as_secs_f64();
        let stored: usize = encoded.iter().map(|(_, p)| p.len()).sum();
        // Raw payloads' checksum: an encoder change that keeps the format's choices keeps it.
        let digest = {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            raws.hash(&mut h);
            h.finish()
        };
        let raw: usize = raws.iter().map(|r| r.len()).sum();
        let ns = |s: f64| s * 1e9 / n as f64;
        println!(
            "level {level:>3}: encode {:5.1} ns/access (zstd {:5.1}), decode {:5.2} ns, raw {:.2} B, stored {:.3} B/access, raw hash {digest:016x}",
            ns(t_enc),
            ns(t_z),
            ns(t_dec),
            raw as f64 / n as f64,
            stored as f64 / n as f64
        );
    }
}

fn read(path: &str) -> sharemap_trace::Result<Vec<Chunk>> {
    let mut reader = NativeReader::open(std::path::Path::new(path))?;
    let mut chunks = Vec::new();
    let mut c = Chunk::default();
    while chunks.len() < 4000 && reader.next_chunk(&mut c)? {
        chunks.push(std::mem::take(&mut c));
    }
    Ok(chunks)
}
