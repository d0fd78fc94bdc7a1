//! Encoding of one chunk's columns into a compressed payload, and back.
//!
//! Raw payload (before zstd), integers LEB128 varints unless noted:
//!   section THREADS: runs of (thread, run length) in access order
//!   OPS: one byte per access (not length-prefixed): bit 7 = write, bits 0..7 = size,
//!        0 meaning "size is in the BIG SIZES section"
//!   section BIG SIZES: sizes that did not fit in 7 bits, in access order
//!   REFS: one byte per access (not length-prefixed): bits 4..6 = reference slot s (0..4;
//!        bits 6..8 are zero), bits 0..4 = byte length L (0..=8) of the access's delta
//!   section ADDRS: per access, zigzag(addr - reference) as L little-endian bytes, where the
//!        reference is slot s of the thread's 4 most recent stream addresses in this chunk
//!        (all 0 at chunk start); the access's address then replaces slot s
//!   section EVENTS: per event: position delta, thread, kind byte, arg, label length, label
//! Sections are prefixed by their byte length. Byte lengths in REFS make every address
//! independent of the previous one's bytes, so decoding has no serial parsing chain.

use super::ChunkHeader;
use crate::batch::Chunk;
use crate::model::{Event, EventKind};
use crate::varint;

/// Number of recent addresses (streams) per thread an access may be coded against.
pub const SLOTS: usize = 4;

/// The encoder's view of one thread's streams: their addresses, the slot used last and the
/// next slot a new stream replaces.
#[derive(Clone, Copy, Default)]
struct Streams {
    addr: [u64; SLOTS],
    last: u8,
    victim: u8,
}

impl Streams {
    /// Picks the slot giving the shortest delta (the lowest slot on ties); a far jump (delta
    /// over 4 bytes) starts a new stream in the next slot in turn, skipping the one used
    /// last. Returns (slot, zigzag delta). The common case has no data-dependent branch:
    /// stream switches are frequent and unpredictable in stencil-like code.
    #[inline]
    fn choose(&mut self, addr: u64) -> (u8, u64) {
        let d: [u64; SLOTS] = std::array::from_fn(|s| varint::zigzag(addr.wrapping_sub(self.addr[s]) as i64));
        let key = |s: usize| ((byte_len(d[s]) as u64) << 2) | s as u64;
        let least = key(0).min(key(1)).min(key(2).min(key(3)));
        let mut best = (least & 3) as u8;
        if least >> 2 > 4 {
            best = self.victim;
            if best == self.last {
                best = (best + 1) % SLOTS as u8;
            }
            self.victim = (best + 1) % SLOTS as u8;
        }
        let delta = varint::zigzag(addr.wrapping_sub(self.addr[best as usize]) as i64);
        self.addr[best as usize] = addr;
        self.last = best;
        (best, delta)
    }
}

/// Bytes needed for `v` (0 for 0).
#[inline]
fn byte_len(v: u64) -> u8 {
    ((64 - v.leading_zeros()) as u8).div_ceil(8)
}

pub struct ChunkEncoder {
    raw: Vec<u8>,
    section: Vec<u8>,
    streams: Vec<Streams>,
    compressor: zstd::bulk::Compressor<'static>,
}

impl ChunkEncoder {
    pub fn new(level: i32) -> std::io::Result<Self> {
        Ok(ChunkEncoder {
            raw: Vec::new(),
            section: Vec::new(),
            streams: Vec::new(),
            compressor: zstd::bulk::Compressor::new(level)?,
        })
    }

    /// Encodes `chunk` into `payload` (cleared first) and returns its header.
    pub fn encode(&mut self, chunk: &Chunk, payload: &mut Vec<u8>) -> std::io::Result<ChunkHeader> {
        let a = &chunk.accesses;
        let n = a.len();
        self.raw.clear();
        let span = a.thread.iter().chain(chunk.events.iter().map(|e| &e.thread)).max().map_or(0, |&t| t + 1);

        // THREADS
        self.section.clear();
        let mut i = 0;
        while i < n {
            let t = a.thread[i];
            let mut j = i + 1;
            while j < n && a.thread[j] == t {
                j += 1;
            }
            varint::put(&mut self.section, t as u64);
            varint::put(&mut self.section, (j - i) as u64);
            i = j;
        }
        self.flush_section();

        // OPS (the batch's own column) and BIG SIZES
        self.raw.extend_from_slice(&a.op);
        self.section.clear();
        for &(_, size) in &a.big_sizes {
            varint::put(&mut self.section, size as u64);
        }
        self.flush_section();

        // REFS and ADDRS
        // Every delta is stored as 8 bytes and the position advances by its length: no
        // variable-length copy in the loop.
        self.streams.clear();
        self.streams.resize(span as usize, Streams::default());
        let refs_at = self.raw.len();
        self.raw.resize(refs_at + n, 0);
        let refs = &mut self.raw[refs_at..];
        self.section.clear();
        self.section.resize(n * 8 + 8, 0);
        let mut at = 0;
        for (k, r) in refs.iter_mut().enumerate() {
            let (slot, delta) = self.streams[a.thread[k] as usize].choose(a.addr[k]);
            let len = byte_len(delta);
            *r = (slot << 4) | len;
            self.section[at..at + 8].copy_from_slice(&delta.to_le_bytes());
            at += len as usize;
        }
        self.section.truncate(at);
        self.flush_section();

        // EVENTS
        self.section.clear();
        let mut last = chunk.first_access;
        for e in &chunk.events {
            varint::put(&mut self.section, e.at - last);
            last = e.at;
            varint::put(&mut self.section, e.thread as u64);
            self.section.push(e.kind.code());
            varint::put(&mut self.section, e.arg);
            varint::put(&mut self.section, e.label.len() as u64);
            self.section.extend_from_slice(e.label.as_bytes());
        }
        self.flush_section();

        payload.clear();
        let bound = zstd::zstd_safe::compress_bound(self.raw.len());
        payload.reserve(bound);
        self.compressor.compress_to_buffer(&self.raw, payload)?;
        Ok(ChunkHeader {
            payload_len: payload.len() as u32,
            raw_len: self.raw.len() as u32,
            accesses: n as u32,
            events: chunk.events.len() as u32,
            thread_span: span,
            payload_crc: crc32fast::hash(payload),
            first_access: chunk.first_access,
        })
    }

    fn flush_section(&mut self) {
        varint::put(&mut self.raw, self.section.len() as u64);
        self.raw.extend_from_slice(&self.section);
    }
}

/// Why a payload could not be decoded; the reader turns it into a located error.
pub type DecodeError = &'static str;

pub struct ChunkDecoder {
    raw: Vec<u8>,
    prev: Vec<[u64; SLOTS]>,
    runs: Vec<(u32, u32)>,
    decompressor: zstd::bulk::Decompressor<'static>,
}

impl ChunkDecoder {
    pub fn new() -> Self {
        ChunkDecoder {
            raw: Vec::new(),
            prev: Vec::new(),
            runs: Vec::new(),
            decompressor: zstd::bulk::Decompressor::new().expect("zstd decompression context"),
        }
    }

    /// Decodes a payload whose checksum the caller has verified.
    pub fn decode(&mut self, header: &ChunkHeader, payload: &[u8], out: &mut Chunk) -> Result<(), DecodeError> {
        self.raw.clear();
        self.raw.reserve(header.raw_len as usize);
        let got = self
            .decompressor
            .decompress_to_buffer(payload, &mut self.raw)
            .map_err(|_| "compressed payload")?;
        if got != header.raw_len as usize {
            return Err("payload length");
        }
        out.clear();
        out.first_access = header.first_access;
        // Slack so the address decoder can always load 8 bytes (never part of the data).
        self.raw.extend_from_slice(&[0; 8]);
        let r = decode_raw(&self.raw, got, header, &mut self.prev, &mut self.runs, out);
        self.raw.truncate(got);
        r
    }
}

impl Default for ChunkDecoder {
    fn default() -> Self {
        Self::new()
    }
}

/// Masks keeping the low 0..=8 bytes of a word, indexed by a 4-bit length (9..16 are
/// rejected before use; the padding only spares the hot loop a bounds check).
const LOW_BYTES: [u64; 16] = {
    let mut m = [u64::MAX; 16];
    let mut i = 0;
    while i < 8 {
        m[i] = (1u64 << (8 * i)) - 1;
        i += 1;
    }
    m
};

/// Sums the byte lengths of `refs` and says whether any byte is malformed (length over 8,
/// or slot bits beyond SLOTS), eight bytes per step.
fn check_refs(refs: &[u8]) -> (usize, bool) {
    const LOW: u64 = 0x0f0f_0f0f_0f0f_0f0f;
    const ONES: u64 = 0x0101_0101_0101_0101;
    // A byte is malformed when its length nibble is 9..=15 (nibble + 7 then reaches bit 4)
    // or either of bits 6..8 is set (slot >= 4).
    const LONG: u64 = 0x1010_1010_1010_1010;
    const HIGH_SLOT: u64 = 0xc0c0_c0c0_c0c0_c0c0;
    let mut words = refs.chunks_exact(8);
    let (mut total, mut bad) = (0usize, 0u64);
    for w in &mut words {
        let w = u64::from_le_bytes(w.try_into().unwrap());
        let len = w & LOW;
        // Each byte of `len` is at most 15, so the byte sum (at most 120) fits the top byte.
        total += (len.wrapping_mul(ONES) >> 56) as usize;
        bad |= ((len + 7 * ONES) & LONG) | (w & HIGH_SLOT);
    }
    let mut bad = bad != 0;
    for &r in words.remainder() {
        total += (r & 0x0f) as usize;
        bad |= (r & 0x0f) > 8 || (r >> 4) as usize >= SLOTS;
    }
    (total, bad)
}

fn section<'a>(raw: &'a [u8], pos: &mut usize) -> Result<&'a [u8], DecodeError> {
    let len = varint::get(raw, pos).ok_or("section length")? as usize;
    let start = *pos;
    let end = start.checked_add(len).filter(|&e| e <= raw.len()).ok_or("section length")?;
    *pos = end;
    Ok(&raw[start..end])
}

fn decode_raw(
    padded: &[u8],
    raw_len: usize,
    h: &ChunkHeader,
    prev: &mut Vec<[u64; SLOTS]>,
    runs: &mut Vec<(u32, u32)>,
    out: &mut Chunk,
) -> Result<(), DecodeError> {
    let raw = &padded[..raw_len];
    let n = h.accesses as usize;
    let span = h.thread_span;
    let mut pos = 0;
    let threads = section(raw, &mut pos)?;
    let ops = raw.get(pos..pos.checked_add(n).ok_or("operations")?).ok_or("operations")?;
    pos += n;
    let big_sizes = section(raw, &mut pos)?;
    let refs = raw.get(pos..pos.checked_add(n).ok_or("references")?).ok_or("references")?;
    pos += n;
    let addr_len = varint::get(raw, &mut pos).ok_or("section length")? as usize;
    let addr_start = pos;
    let addr_end = addr_start.checked_add(addr_len).filter(|&e| e <= raw.len()).ok_or("section length")?;
    pos = addr_end;
    let events = section(raw, &mut pos)?;
    if pos != raw.len() {
        return Err("trailing bytes in payload");
    }
    let a = &mut out.accesses;

    // THREADS: runs first, then the thread column.
    runs.clear();
    let mut p = 0;
    let mut total = 0usize;
    while p < threads.len() {
        let t = varint::get(threads, &mut p).ok_or("thread runs")?;
        let len = varint::get(threads, &mut p).ok_or("thread runs")? as usize;
        if t >= span as u64 || len == 0 || total + len > n {
            return Err("thread runs");
        }
        total += len;
        runs.push((t as u32, len as u32));
    }
    if total != n {
        return Err("thread runs");
    }
    a.thread.reserve(n);
    for &(t, len) in runs.iter() {
        a.thread.resize(a.thread.len() + len as usize, t);
    }

    // OPS are the batch's column as stored; escaped sizes come from BIG SIZES.
    a.op.extend_from_slice(ops);
    // A full fold (not `any`) so the check vectorises.
    let escaped = ops.iter().fold(false, |acc, &op| acc | (op & 0x7f == 0));
    if !big_sizes.is_empty() || escaped {
        let mut q = 0;
        for (i, &op) in ops.iter().enumerate() {
            if op & 0x7f == 0 {
                let s = varint::get(big_sizes, &mut q).ok_or("sizes")?;
                a.big_sizes.push((i as u32, u32::try_from(s).map_err(|_| "sizes")?));
            }
        }
        if q != big_sizes.len() {
            return Err("sizes");
        }
    }

    // REFS are checked in one pass: lengths <= 8, slots < SLOTS, and lengths adding up to
    // exactly the ADDRS section. That proves every 8-byte load below stays inside `padded`
    // (ADDRS ends at most raw_len bytes in, and `padded` has 8 bytes of slack after that).
    let (total, bad) = check_refs(refs);
    if bad || total != addr_len || padded.len() < addr_end + 8 {
        return Err("address references");
    }

    // ADDRS, run by run with the thread's streams held locally.
    prev.clear();
    prev.resize(span as usize, [0; SLOTS]);
    // Written in place below, so the column is not zeroed first.
    a.addr.reserve(n);
    let addr_out = &mut a.addr.spare_capacity_mut()[..n];
    let base = padded.as_ptr();
    let mut p = addr_start;
    let mut i = 0;
    for &(t, len) in runs.iter() {
        let mut hist = prev[t as usize];
        let run_refs = &refs[i..i + len as usize];
        let run_out = &mut addr_out[i..i + len as usize];
        let mut step = |r: u8| -> u64 {
            let n_bytes = (r & 0x0f) as usize;
            // SAFETY: p <= addr_end by the length check above, and addr_end + 8 <= padded.len().
            let word = u64::from_le(unsafe { std::ptr::read_unaligned(base.add(p) as *const u64) });
            let v = word & LOW_BYTES[n_bytes];
            p += n_bytes;
            // Branchless: the slot comes from data, and a switch-on-change branch
            // mispredicts on interleaved streams (matmult); store forwarding is cheaper.
            let s = (r >> 4) as usize & (SLOTS - 1);
            let cur = hist[s].wrapping_add(varint::unzigzag(v) as u64);
            hist[s] = cur;
            cur
        };
        let mut outs = run_out.chunks_exact_mut(4);
        let mut rs = run_refs.chunks_exact(4);
        for (o, r) in (&mut outs).zip(&mut rs) {
            o[0].write(step(r[0]));
            o[1].write(step(r[1]));
            o[2].write(step(r[2]));
            o[3].write(step(r[3]));
        }
        for (o, &r) in outs.into_remainder().iter_mut().zip(rs.remainder()) {
            o.write(step(r));
        }
        prev[t as usize] = hist;
        i += len as usize;
    }
    // SAFETY: the runs cover exactly n accesses (checked above), so all n are written.
    unsafe { a.addr.set_len(n) };
    if p != addr_end {
        return Err("addresses");
    }

    // EVENTS
    let mut p = 0;
    let mut at = h.first_access;
    let end = h.first_access + n as u64;
    for _ in 0..h.events {
        let delta = varint::get(events, &mut p).ok_or("events")?;
        at = at.checked_add(delta).filter(|&x| x <= end).ok_or("event position")?;
        let thread = varint::get(events, &mut p).ok_or("events")?;
        if thread >= span as u64 {
            return Err("event thread");
        }
        let kind = *events.get(p).ok_or("events")?;
        p += 1;
        let kind = EventKind::from_code(kind).ok_or("event kind")?;
        let arg = varint::get(events, &mut p).ok_or("events")?;
        let len = varint::get(events, &mut p).ok_or("events")? as usize;
        let bytes = events.get(p..p.checked_add(len).ok_or("events")?).ok_or("events")?;
        p += len;
        let label = std::str::from_utf8(bytes).map_err(|_| "event label")?.to_string();
        out.events.push(Event { at, thread: thread as u32, kind, arg, label });
    }
    if p != events.len() {
        return Err("events");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The word-at-a-time check agrees with the byte-by-byte definition, on any bytes.
        #[test]
        fn refs_check_matches_its_definition(refs in proptest::collection::vec(any::<u8>(), 0..200)) {
            let total: usize = refs.iter().map(|&r| (r & 0x0f) as usize).sum();
            let bad = refs.iter().any(|&r| (r & 0x0f) > 8 || (r >> 4) as usize >= SLOTS);
            prop_assert_eq!(check_refs(&refs), (total, bad));
        }

        /// Well-formed bytes pass, whatever their mix.
        #[test]
        fn refs_check_accepts_every_valid_byte(refs in proptest::collection::vec((0u8..4, 0u8..=8), 0..200)) {
            let bytes: Vec<u8> = refs.iter().map(|&(s, l)| (s << 4) | l).collect();
            let total: usize = refs.iter().map(|&(_, l)| l as usize).sum();
            prop_assert_eq!(check_refs(&bytes), (total, false));
        }
    }
}
