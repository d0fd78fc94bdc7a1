//! Encoding of one chunk's columns into a compressed payload, and back.
//!
//! Raw payload of format version 2 (before zstd), integers LEB128 varints unless noted:
//!   section THREADS: runs of (thread, run length) in access order
//!   SIZES: n bytes, the size in bytes (1..=127), or 0 meaning "in BIG SIZES"
//!   WRITES: ceil(n/8) bytes, bit k%8 of byte k/8 set when access k is a write
//!   section BIG SIZES: sizes that did not fit in 7 bits, in access order
//!   SLOTS: ceil(n/4) bytes, access k's reference slot s (0..4) in bits 2*(k%4)..
//!   LENGTHS: ceil(n/2) bytes, access k's delta length L (0..=8 bytes) in bits 4*(k%2)..
//!   section ADDRS: per access, zigzag(addr - reference - size) as L little-endian bytes,
//!        where the reference is slot s of the thread's 4 most recent stream addresses in
//!        this chunk (all 0 at chunk start) and size is the SIZES byte; the access's
//!        address then replaces slot s
//!   section EVENTS: per event: position delta, thread, kind byte, arg, label length, label
//! Unused bits at the end of WRITES, SLOTS and LENGTHS are zero. Sections are prefixed by
//! their byte length.
//!
//! Why this shape: explicit lengths make every address independent of the previous one's
//! bytes, so decoding has no serial parsing chain; adding the size makes a stream that
//! advances by its access size cost no address bytes at all; and the low-entropy columns
//! (write flags, slots, lengths) are packed to their bits, because zstd decodes a byte
//! column of a few random symbols slowly (many short matches) while it copies dense bits
//! or long repeats quickly.
//!
//! Version 1 (still read): OPS (n bytes: bit 7 = write, bits 0..7 = size) in place of SIZES
//! and WRITES, REFS (n bytes: slot << 4 | L) in place of SLOTS and LENGTHS, and deltas
//! taken from the slot's address without the size.

use super::ChunkHeader;
use crate::batch::Chunk;
use crate::model::{Event, EventKind, FORMAT_VERSION};
use crate::varint;

/// Number of recent addresses (streams) per thread an access may be coded against.
pub const SLOTS: usize = 4;

/// The encoder's view of one thread's streams: their addresses and delta widths, the slot
/// used last and the next slot a new stream replaces.
#[derive(Clone, Copy, Default)]
struct Streams {
    addr: [u64; SLOTS],
    width: [u8; SLOTS],
    /// When each slot was used last (a per-thread count of accesses).
    used: [u32; SLOTS],
    /// Whether each slot's last access was a jump (a delta of 3 bytes or more).
    jumpy: [bool; SLOTS],
    clock: u32,
    last: u8,
    victim: u8,
}

impl Streams {
    /// Picks the slot giving the shortest delta from `addr` to the slot's address plus
    /// `size` (the lowest slot on ties); a far jump (delta over 4 bytes) starts a new stream
    /// in the next slot in turn, skipping the one used last. Returns (slot, delta, bytes to
    /// store it in); the delta fits those bytes as a two's-complement number.
    /// The common case has no data-dependent branch: stream switches are frequent and
    /// unpredictable in stencil-like code.
    #[inline]
    fn choose(&mut self, addr: u64, size: u64) -> (u8, u64, u8) {
        let d: [u64; SLOTS] =
            std::array::from_fn(|s| varint::zigzag(addr.wrapping_sub(self.addr[s]).wrapping_sub(size) as i64));
        let key = |s: usize| ((byte_len(d[s]) as u64) << 2) | s as u64;
        let least = key(0).min(key(1)).min(key(2).min(key(3)));
        let mut best = (least & 3) as u8;
        if least >> 2 > 4 {
            best = self.victim;
            if best == self.last {
                best = (best + 1) % SLOTS as u8;
            }
            self.victim = (best + 1) % SLOTS as u8;
        } else if least >> 2 >= 3 {
            // A jump within reach of several streams (arrays of one heap lie within 4 bytes
            // of each other) must not take over the slot of a sequential stream it happens
            // to be nearest to: an irregular solver's x[col[j]] would break its val[j] and
            // col[j] streams every time. It takes a slot not used yet in this chunk (a new
            // stream, whatever its first delta costs), else the cheapest slot whose last
            // access was a jump too, if it costs at most a byte more than the nearest
            // (random accesses stay among themselves; the lowest such slot on ties, which
            // keeps the slot column constant for zstd), else the least recently used slot
            // on the same terms.
            let fits = |s: usize| byte_len(d[s]) as u64 <= (least >> 2) + 1;
            let lru = (0..SLOTS).min_by_key(|&s| self.used[s]).unwrap_or(0);
            let jump = (0..SLOTS).filter(|&s| self.jumpy[s] && fits(s)).min_by_key(|&s| (byte_len(d[s]), s));
            if self.used[lru] == 0 {
                best = lru as u8;
            } else if let Some(j) = jump {
                best = j as u8;
            } else if fits(lru) {
                best = lru as u8;
            }
        }
        let s = best as usize;
        self.clock = self.clock.wrapping_add(1);
        self.used[s] = self.clock;
        let delta = addr.wrapping_sub(self.addr[s]).wrapping_sub(size);
        self.addr[s] = addr;
        self.last = best;
        // A stream keeps its width while its deltas need at most one byte less: a gather
        // whose deltas need 2 or 3 bytes at random then stores a constant length, which
        // zstd turns into long matches instead of a sequence every few accesses. Zero
        // deltas (the stream advanced by its size) stay free.
        // Recomputed rather than read from `d`: indexing that array by a computed slot
        // makes it a stack round trip, which had halved the encoder's speed.
        let need = byte_len(varint::zigzag(delta as i64));
        self.jumpy[s] = need >= 3;
        let w = self.width[s];
        // (Selects, not branches: which case applies is data-dependent.)
        let keep = need > 0 && w.wrapping_sub(need) <= 1;
        let len = if keep { w } else { need };
        self.width[s] = if need == 0 { w } else { len };
        (best, delta, len)
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
    /// Per access, before packing.
    slots: Vec<u8>,
    lengths: Vec<u8>,
    compressor: zstd::bulk::Compressor<'static>,
}

impl ChunkEncoder {
    pub fn new(level: i32) -> std::io::Result<Self> {
        use zstd::zstd_safe::{CParameter, ParamSwitch};
        let mut compressor = zstd::bulk::Compressor::new(level)?;
        // Decoding speed is what traces are read for, again and again. Literals left
        // without Huffman coding are copied, not decoded (they are mostly address bytes
        // that do not compress anyway); matches of at least 7 bytes mean fewer, longer
        // sequences, and zstd's decoding time goes by sequence (see CHANGELOG.md, the native format).
        compressor.set_parameter(CParameter::LiteralCompressionMode(ParamSwitch::Disable))?;
        compressor.set_parameter(CParameter::MinMatch(7))?;
        Ok(ChunkEncoder {
            raw: Vec::new(),
            section: Vec::new(),
            streams: Vec::new(),
            slots: Vec::new(),
            lengths: Vec::new(),
            compressor,
        })
    }

    /// Encodes `chunk` into `payload` (cleared first) and returns its header.
    pub fn encode(&mut self, chunk: &Chunk, payload: &mut Vec<u8>) -> std::io::Result<ChunkHeader> {
        let a = &chunk.accesses;
        let n = a.len();
        self.raw.clear();
        let span = a.thread.iter().chain(chunk.events.iter().map(|e| &e.thread)).max().map_or(0, |&t| t as u64 + 1);
        if span > crate::model::MAX_THREADS as u64 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("thread id {}: a trace holds at most {} threads", span - 1, crate::model::MAX_THREADS),
            ));
        }
        let span = span as u32;

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

        // SIZES and WRITES split the batch's op bytes; then BIG SIZES
        self.raw.extend(a.op.iter().map(|&op| op & 0x7f));
        let writes_at = self.raw.len();
        self.raw.resize(writes_at + n.div_ceil(8), 0);
        for (byte, ops) in self.raw[writes_at..].iter_mut().zip(a.op.chunks(8)) {
            *byte = ops.iter().enumerate().fold(0, |b, (k, &op)| b | (op >> 7) << k);
        }
        self.section.clear();
        for &(_, size) in &a.big_sizes {
            varint::put(&mut self.section, size as u64);
        }
        self.flush_section();

        // SLOTS, LENGTHS and ADDRS
        // Every delta is stored as 8 bytes and the position advances by its length: no
        // variable-length copy in the loop. Slots and lengths are packed afterwards.
        self.streams.clear();
        self.streams.resize(span as usize, Streams::default());
        self.slots.clear();
        self.slots.resize(n.next_multiple_of(4), 0);
        self.lengths.clear();
        self.lengths.resize(n.next_multiple_of(2), 0);
        self.section.clear();
        self.section.resize(n * 8 + 8, 0);
        let mut at = 0;
        let columns = self.slots.iter_mut().zip(self.lengths.iter_mut());
        for ((((slot, length), &t), &addr), &op) in columns.zip(&a.thread).zip(&a.addr).zip(&a.op) {
            let (s, delta, len) = self.streams[t as usize].choose(addr, (op & 0x7f) as u64);
            (*slot, *length) = (s, len);
            self.section[at..at + 8].copy_from_slice(&delta.to_le_bytes());
            at += len as usize;
        }
        self.section.truncate(at);
        self.raw.extend(self.slots.chunks_exact(4).map(|s| s[0] | s[1] << 2 | s[2] << 4 | s[3] << 6));
        self.raw.extend(self.lengths.chunks_exact(2).map(|l| l[0] | l[1] << 4));
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
            if e.kind == EventKind::Alloc {
                varint::put(&mut self.section, e.size);
                varint::put(&mut self.section, e.site);
            }
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
    version: u16,
    raw: Vec<u8>,
    scratch: Scratch,
    decompressor: zstd::bulk::Decompressor<'static>,
}

/// Buffers reused from chunk to chunk.
#[derive(Default)]
struct Scratch {
    /// Per access: the reference slot and the delta's byte length, unpacked.
    slots: Vec<u8>,
    lengths: Vec<u8>,
    /// Each thread's stream addresses while decoding ADDRS.
    prev: Vec<[u64; SLOTS]>,
    /// THREADS as (thread, run length).
    runs: Vec<(u32, u32)>,
}

impl ChunkDecoder {
    /// A decoder for chunks of the format version sharemap writes.
    pub fn new() -> Self {
        Self::for_version(FORMAT_VERSION as u16).expect("the current version is readable")
    }

    /// A decoder for chunks of format `version`; `None` if this build cannot read it.
    pub fn for_version(version: u16) -> Option<Self> {
        (1..=FORMAT_VERSION as u16).contains(&version).then(|| ChunkDecoder {
            version,
            raw: Vec::new(),
            scratch: Scratch::default(),
            decompressor: zstd::bulk::Decompressor::new().expect("zstd decompression context"),
        })
    }

    /// Decodes a payload whose checksum the caller has verified.
    pub fn decode(&mut self, header: &ChunkHeader, payload: &[u8], out: &mut Chunk) -> Result<(), DecodeError> {
        self.raw.clear();
        self.raw.reserve(header.raw_len as usize);
        let got = self.decompressor.decompress_to_buffer(payload, &mut self.raw).map_err(|_| "compressed payload")?;
        if got != header.raw_len as usize {
            return Err("payload length");
        }
        out.clear();
        out.first_access = header.first_access;
        // Slack so the address decoder can always load 8 bytes (never part of the data).
        self.raw.extend_from_slice(&[0; 8]);
        let r = decode_raw(&self.raw, got, header, self.version, &mut self.scratch, out);
        self.raw.truncate(got);
        r
    }
}

impl Default for ChunkDecoder {
    fn default() -> Self {
        Self::new()
    }
}

/// For each byte of write flags, the eight op-byte write bits (bit 7 of byte k set when
/// flag k is).
const WRITE_BITS: [u64; 256] = {
    let mut t = [0u64; 256];
    let mut b = 0;
    while b < 256 {
        let mut k = 0;
        while k < 8 {
            if b >> k & 1 == 1 {
                t[b] |= 0x80 << (8 * k);
            }
            k += 1;
        }
        b += 1;
    }
    t
};

/// Version 2: rebuilds the op bytes from SIZES and WRITES.
fn merge_ops(sizes: &[u8], writes: &[u8], ops: &mut Vec<u8>) -> Result<(), DecodeError> {
    let start = ops.len();
    ops.resize(start + sizes.len(), 0);
    let out = &mut ops[start..];
    let mut high = 0u64;
    let mut groups = sizes.chunks_exact(8);
    let mut outs = out.chunks_exact_mut(8);
    for ((s, o), &w) in (&mut groups).zip(&mut outs).zip(writes) {
        let s = u64::from_le_bytes(s.try_into().unwrap());
        high |= s;
        o.copy_from_slice(&(s | WRITE_BITS[w as usize]).to_le_bytes());
    }
    let tail = groups.remainder();
    if !tail.is_empty() {
        let w = writes[writes.len() - 1];
        if w >> tail.len() != 0 {
            return Err("write flags");
        }
        for (k, (o, &s)) in outs.into_remainder().iter_mut().zip(tail).enumerate() {
            high |= s as u64;
            *o = s | (w >> k & 1) << 7;
        }
    }
    if high & 0x8080_8080_8080_8080 != 0 {
        return Err("sizes");
    }
    Ok(())
}

/// Version 2: unpacks SLOTS (2 bits per access) and LENGTHS (4 bits per access) to a byte
/// per access. Fields past the last access must be zero.
fn unpack_refs(packed_slots: &[u8], packed_lengths: &[u8], n: usize, sc: &mut Scratch) -> Result<(), DecodeError> {
    sc.slots.clear();
    sc.slots.resize(packed_slots.len() * 4, 0);
    for (out, &b) in sc.slots.chunks_exact_mut(4).zip(packed_slots) {
        out.copy_from_slice(&[b & 3, b >> 2 & 3, b >> 4 & 3, b >> 6]);
    }
    sc.lengths.clear();
    sc.lengths.resize(packed_lengths.len() * 2, 0);
    for (out, &b) in sc.lengths.chunks_exact_mut(2).zip(packed_lengths) {
        out.copy_from_slice(&[b & 15, b >> 4]);
    }
    if sc.slots[n..].iter().chain(&sc.lengths[n..]).any(|&x| x != 0) {
        return Err("address references");
    }
    sc.slots.truncate(n);
    sc.lengths.truncate(n);
    Ok(())
}

/// Version 1: splits REFS bytes (slot << 4 | length) into the two columns.
fn split_refs(refs: &[u8], sc: &mut Scratch) -> Result<(), DecodeError> {
    sc.slots.clear();
    sc.slots.extend(refs.iter().map(|&r| r >> 4));
    sc.lengths.clear();
    sc.lengths.extend(refs.iter().map(|&r| r & 15));
    // A full fold (not `any`) so the check vectorises.
    if sc.slots.iter().fold(0, |m, &s| m.max(s)) as usize >= SLOTS {
        return Err("address references");
    }
    Ok(())
}

/// Checks that every delta length is at most 8 bytes and returns their sum.
fn sum_lengths(lengths: &[u8]) -> Result<usize, DecodeError> {
    // Full folds so both vectorise.
    if lengths.iter().fold(0, |m, &l| m.max(l)) > 8 {
        return Err("address references");
    }
    Ok(lengths.iter().map(|&l| l as usize).sum())
}

/// A delta stored in L bytes is the low L bytes of the word loaded at its position:
/// `DELTA_MASK[L]` keeps them and `DELTA_SIGN[L]` is their sign bit (0 for L = 0), so
/// `((w & mask) ^ sign) - sign` sign-extends them. Indexed by the length byte itself, so
/// the hot loop needs neither a mask nor a bounds check; entries past 8 are never used
/// (lengths are checked first).
static DELTA_MASK: [u64; 256] = {
    let mut t = [u64::MAX; 256];
    let mut l = 0;
    while l < 8 {
        t[l] = (1u64 << (8 * l)) - 1;
        l += 1;
    }
    t
};
static DELTA_SIGN: [u64; 256] = {
    let mut t = [0u64; 256];
    let mut l = 1;
    while l <= 8 {
        t[l] = 1u64 << (8 * l - 1);
        l += 1;
    }
    t
};

fn section<'a>(raw: &'a [u8], pos: &mut usize) -> Result<&'a [u8], DecodeError> {
    let len = varint::get(raw, pos).ok_or("section length")? as usize;
    fixed(raw, pos, len, "section length")
}

/// The next `len` bytes of the payload, or the error `what` if it ends first.
fn fixed<'a>(raw: &'a [u8], pos: &mut usize, len: usize, what: DecodeError) -> Result<&'a [u8], DecodeError> {
    let start = *pos;
    let end = start.checked_add(len).filter(|&e| e <= raw.len()).ok_or(what)?;
    *pos = end;
    Ok(&raw[start..end])
}

fn decode_raw(
    padded: &[u8],
    raw_len: usize,
    h: &ChunkHeader,
    version: u16,
    sc: &mut Scratch,
    out: &mut Chunk,
) -> Result<(), DecodeError> {
    let raw = &padded[..raw_len];
    let n = h.accesses as usize;
    let span = h.thread_span;
    let a = &mut out.accesses;
    let mut pos = 0;
    let threads = section(raw, &mut pos)?;
    decode_threads(threads, n, span, &mut sc.runs, &mut a.thread)?;

    let sizes = if version == 1 {
        // OPS are the batch's column as stored.
        a.op.extend_from_slice(fixed(raw, &mut pos, n, "operations")?);
        decode_big_sizes(section(raw, &mut pos)?, &a.op, &mut a.big_sizes)?;
        split_refs(fixed(raw, &mut pos, n, "references")?, sc)?;
        &[][..]
    } else {
        let sizes = fixed(raw, &mut pos, n, "sizes")?;
        let writes = fixed(raw, &mut pos, n.div_ceil(8), "write flags")?;
        merge_ops(sizes, writes, &mut a.op)?;
        decode_big_sizes(section(raw, &mut pos)?, &a.op, &mut a.big_sizes)?;
        let slots = fixed(raw, &mut pos, n.div_ceil(4), "slots")?;
        let lengths = fixed(raw, &mut pos, n.div_ceil(2), "lengths")?;
        unpack_refs(slots, lengths, n, sc)?;
        sizes
    };
    let total = sum_lengths(&sc.lengths)?;
    let addr_len = varint::get(raw, &mut pos).ok_or("section length")? as usize;
    let addr_start = pos;
    fixed(raw, &mut pos, addr_len, "section length")?;
    let events = section(raw, &mut pos)?;
    if pos != raw.len() {
        return Err("trailing bytes in payload");
    }
    // Lengths adding up to exactly the ADDRS section prove that every 8-byte load in
    // `decode_addrs` stays inside `padded` (ADDRS ends at most raw_len bytes in, and
    // `padded` has 8 bytes of slack after that).
    if total != addr_len || padded.len() < addr_start + addr_len + 8 {
        return Err("address references");
    }
    sc.prev.clear();
    sc.prev.resize(span as usize, [0; SLOTS]);
    let columns = Refs { slots: &sc.slots, lengths: &sc.lengths, sizes };
    let addr_end = if version == 1 {
        decode_addrs::<1>(padded, addr_start, columns, &sc.runs, &mut sc.prev, &mut a.addr)
    } else {
        decode_addrs::<2>(padded, addr_start, columns, &sc.runs, &mut sc.prev, &mut a.addr)
    };
    if addr_end != addr_start + addr_len {
        return Err("addresses");
    }
    decode_events(events, h, out)
}

/// THREADS: the runs, then the thread column.
fn decode_threads(
    threads: &[u8],
    n: usize,
    span: u32,
    runs: &mut Vec<(u32, u32)>,
    column: &mut Vec<u32>,
) -> Result<(), DecodeError> {
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
    column.reserve(n);
    for &(t, len) in runs.iter() {
        column.resize(column.len() + len as usize, t);
    }
    Ok(())
}

/// BIG SIZES: one varint per op byte whose size bits are 0.
fn decode_big_sizes(big_sizes: &[u8], ops: &[u8], out: &mut Vec<(u32, u32)>) -> Result<(), DecodeError> {
    // A full fold (not `any`) so the check vectorises.
    let escaped = ops.iter().fold(false, |acc, &op| acc | (op & 0x7f == 0));
    if big_sizes.is_empty() && !escaped {
        return Ok(());
    }
    let mut q = 0;
    for (i, &op) in ops.iter().enumerate() {
        if op & 0x7f == 0 {
            let s = varint::get(big_sizes, &mut q).ok_or("sizes")?;
            out.push((i as u32, u32::try_from(s).map_err(|_| "sizes")?));
        }
    }
    if q != big_sizes.len() {
        return Err("sizes");
    }
    Ok(())
}

/// Per access: what the address decoder reads besides ADDRS.
#[derive(Clone, Copy)]
struct Refs<'a> {
    slots: &'a [u8],
    lengths: &'a [u8],
    /// Version 2's SIZES (bit 7 clear, checked); empty for version 1.
    sizes: &'a [u8],
}

/// ADDRS, run by run with the thread's streams held locally; returns where the deltas end.
/// Version 2 deltas are two's complement relative to the slot's address plus the access's
/// size; version 1 deltas are zigzag relative to the slot's address. The caller has checked
/// the slots and lengths and that the lengths stay inside `padded`'s data.
fn decode_addrs<const VERSION: u16>(
    padded: &[u8],
    addr_start: usize,
    refs: Refs,
    runs: &[(u32, u32)],
    prev: &mut [[u64; SLOTS]],
    column: &mut Vec<u64>,
) -> usize {
    let n = refs.lengths.len();
    // Written in place below, so the column is not zeroed first.
    column.reserve(n);
    let addr_out = &mut column.spare_capacity_mut()[..n];
    let sizes = if VERSION == 1 { refs.lengths } else { refs.sizes };
    let base = padded.as_ptr();
    let mut p = addr_start;
    let mut i = 0;
    for &(t, len) in runs {
        let mut hist = prev[t as usize];
        let run = i..i + len as usize;
        let mut step = |slot: u8, n_bytes: u8, size: u8| -> u64 {
            let n_bytes = n_bytes as usize;
            // SAFETY: the caller checked that the lengths sum to the ADDRS section, which
            // ends at least 8 bytes before the end of `padded`.
            let word = u64::from_le(unsafe { std::ptr::read_unaligned(base.add(p) as *const u64) });
            p += n_bytes;
            let low = word & DELTA_MASK[n_bytes];
            let delta = if VERSION == 1 {
                varint::unzigzag(low) as u64
            } else {
                let sign = DELTA_SIGN[n_bytes];
                (low ^ sign).wrapping_sub(sign).wrapping_add(size as u64)
            };
            // Branchless: the slot comes from data, and a switch-on-change branch
            // mispredicts on interleaved streams (matmult); store forwarding is cheaper.
            let s = slot as usize & (SLOTS - 1);
            let cur = hist[s].wrapping_add(delta);
            hist[s] = cur;
            cur
        };
        let mut outs = addr_out[run.clone()].chunks_exact_mut(4);
        let mut ss = refs.slots[run.clone()].chunks_exact(4);
        let mut ls = refs.lengths[run.clone()].chunks_exact(4);
        let mut zs = sizes[run].chunks_exact(4);
        for (((o, s), l), z) in (&mut outs).zip(&mut ss).zip(&mut ls).zip(&mut zs) {
            o[0].write(step(s[0], l[0], z[0]));
            o[1].write(step(s[1], l[1], z[1]));
            o[2].write(step(s[2], l[2], z[2]));
            o[3].write(step(s[3], l[3], z[3]));
        }
        let tail = outs.into_remainder().iter_mut().zip(ss.remainder()).zip(ls.remainder()).zip(zs.remainder());
        for (((o, &s), &l), &z) in tail {
            o.write(step(s, l, z));
        }
        prev[t as usize] = hist;
        i += len as usize;
    }
    // SAFETY: the runs cover exactly n accesses (checked by decode_threads), so all n are written.
    unsafe { column.set_len(n) };
    p
}

/// EVENTS
fn decode_events(events: &[u8], h: &ChunkHeader, out: &mut Chunk) -> Result<(), DecodeError> {
    let mut p = 0;
    let mut at = h.first_access;
    let end = h.first_access + h.accesses as u64;
    for _ in 0..h.events {
        let delta = varint::get(events, &mut p).ok_or("events")?;
        at = at.checked_add(delta).filter(|&x| x <= end).ok_or("event position")?;
        let thread = varint::get(events, &mut p).ok_or("events")?;
        if thread >= h.thread_span as u64 {
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
        let mut event = Event::new(at, thread as u32, kind, arg, label);
        if kind == EventKind::Alloc {
            event.size = varint::get(events, &mut p).ok_or("events")?;
            event.site = varint::get(events, &mut p).ok_or("events")?;
        }
        out.events.push(event);
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
        /// Any delta stored in the bytes the encoder counts for it, or in more, reads back
        /// exactly, whatever bytes follow it.
        #[test]
        fn deltas_read_back_from_their_bytes(d in any::<i64>(), extra in 0u8..8, junk in any::<u64>()) {
            let need = byte_len(varint::zigzag(d));
            let len = (need + extra).min(8) as usize;
            let mut bytes = (d as u64).to_le_bytes()[..len].to_vec();
            bytes.extend_from_slice(&junk.to_le_bytes()[..8 - len]);
            let word = u64::from_le_bytes(bytes.try_into().unwrap());
            let (mask, sign) = (DELTA_MASK[len], DELTA_SIGN[len]);
            prop_assert_eq!(((word & mask) ^ sign).wrapping_sub(sign), d as u64);
        }

        /// Unpacking inverts the encoder's packing, and stray bits past the end are refused.
        #[test]
        fn packed_references_unpack(refs in proptest::collection::vec((0u8..4, 0u8..=8), 0..100), stray in 1u8..16) {
            let n = refs.len();
            let mut slots = vec![0u8; n.div_ceil(4)];
            let mut lengths = vec![0u8; n.div_ceil(2)];
            for (k, &(s, l)) in refs.iter().enumerate() {
                slots[k / 4] |= s << (2 * (k % 4));
                lengths[k / 2] |= l << (4 * (k % 2));
            }
            let mut sc = Scratch::default();
            unpack_refs(&slots, &lengths, n, &mut sc).unwrap();
            prop_assert_eq!(sc.slots.clone(), refs.iter().map(|r| r.0).collect::<Vec<_>>());
            prop_assert_eq!(sc.lengths.clone(), refs.iter().map(|r| r.1).collect::<Vec<_>>());
            prop_assert_eq!(sum_lengths(&sc.lengths), Ok(refs.iter().map(|r| r.1 as usize).sum()));
            if n % 2 == 1 {
                lengths[n / 2] |= stray << 4;
                prop_assert!(unpack_refs(&slots, &lengths, n, &mut sc).is_err());
            }
        }

        /// Lengths over 8 are refused wherever they are.
        #[test]
        fn long_lengths_are_refused(mut lengths in proptest::collection::vec(0u8..=8, 1..100), at in any::<prop::sample::Index>(), bad in 9u8..16) {
            let i = at.index(lengths.len());
            lengths[i] = bad;
            prop_assert!(sum_lengths(&lengths).is_err());
        }
    }
}
