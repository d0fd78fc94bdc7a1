//! Encoding of one chunk's columns into a compressed payload, and back.
//!
//! Raw payload (before zstd), all integers LEB128 varints unless noted:
//!   section THREADS: runs of (thread, run length) in access order
//!   OPS: one byte per access (not length-prefixed): bit 7 = write, bits 0..7 = size,
//!        0 meaning "size is in the BIG SIZES section"
//!   section BIG SIZES: sizes that did not fit in 7 bits, in access order
//!   section ADDRS: zigzag(addr - previous address of the same thread in this chunk)
//!   section EVENTS: per event: zigzag-free delta of position, thread, kind byte, arg,
//!        label length, label bytes
//! Each section is prefixed by its byte length.

use super::ChunkHeader;
use crate::batch::Chunk;
use crate::model::{Event, EventKind};
use crate::varint;

pub struct ChunkEncoder {
    raw: Vec<u8>,
    section: Vec<u8>,
    prev: Vec<u64>,
    compressor: zstd::bulk::Compressor<'static>,
}

impl ChunkEncoder {
    pub fn new(level: i32) -> std::io::Result<Self> {
        Ok(ChunkEncoder {
            raw: Vec::new(),
            section: Vec::new(),
            prev: Vec::new(),
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

        // OPS and BIG SIZES
        self.section.clear();
        for k in 0..n {
            let size = a.size[k];
            let code = if (1..0x80).contains(&size) { size as u8 } else { 0 };
            self.raw.push(code | if a.write[k] { 0x80 } else { 0 });
            if code == 0 {
                varint::put(&mut self.section, size as u64);
            }
        }
        self.flush_section();

        // ADDRS
        self.section.clear();
        self.prev.clear();
        self.prev.resize(span as usize, 0);
        for k in 0..n {
            let t = a.thread[k] as usize;
            let delta = a.addr[k].wrapping_sub(self.prev[t]) as i64;
            varint::put(&mut self.section, varint::zigzag(delta));
            self.prev[t] = a.addr[k];
        }
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
    prev: Vec<u64>,
    decompressor: zstd::bulk::Decompressor<'static>,
}

impl ChunkDecoder {
    pub fn new() -> Self {
        ChunkDecoder {
            raw: Vec::new(),
            prev: Vec::new(),
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
        decode_raw(&self.raw, header, &mut self.prev, out)
    }
}

impl Default for ChunkDecoder {
    fn default() -> Self {
        Self::new()
    }
}

fn section<'a>(raw: &'a [u8], pos: &mut usize) -> Result<&'a [u8], DecodeError> {
    let len = varint::get(raw, pos).ok_or("section length")? as usize;
    let start = *pos;
    let end = start.checked_add(len).filter(|&e| e <= raw.len()).ok_or("section length")?;
    *pos = end;
    Ok(&raw[start..end])
}

fn decode_raw(raw: &[u8], h: &ChunkHeader, prev: &mut Vec<u64>, out: &mut Chunk) -> Result<(), DecodeError> {
    let n = h.accesses as usize;
    let span = h.thread_span;
    let mut pos = 0;
    let threads = section(raw, &mut pos)?;
    let ops = raw.get(pos..pos.checked_add(n).ok_or("operations")?).ok_or("operations")?;
    pos += n;
    let big_sizes = section(raw, &mut pos)?;
    let addrs = section(raw, &mut pos)?;
    let events = section(raw, &mut pos)?;
    if pos != raw.len() {
        return Err("trailing bytes in payload");
    }
    let a = &mut out.accesses;

    // THREADS -> thread column
    a.thread.reserve(n);
    let mut p = 0;
    while p < threads.len() {
        let t = varint::get(threads, &mut p).ok_or("thread runs")?;
        let len = varint::get(threads, &mut p).ok_or("thread runs")? as usize;
        if t >= span as u64 || len == 0 || a.thread.len() + len > n {
            return Err("thread runs");
        }
        a.thread.resize(a.thread.len() + len, t as u32);
    }
    if a.thread.len() != n {
        return Err("thread runs");
    }

    // OPS + BIG SIZES -> size and write columns
    a.size.reserve(n);
    a.write.reserve(n);
    let mut q = 0;
    for &op in ops {
        a.write.push(op & 0x80 != 0);
        let code = op & 0x7f;
        let size = if code != 0 {
            code as u32
        } else {
            let s = varint::get(big_sizes, &mut q).ok_or("sizes")?;
            u32::try_from(s).map_err(|_| "sizes")?
        };
        a.size.push(size);
    }
    if q != big_sizes.len() {
        return Err("sizes");
    }

    // ADDRS, decoded run by run so the per-thread predecessor stays in a register.
    prev.clear();
    prev.resize(span as usize, 0);
    a.addr.resize(n, 0);
    let mut p = 0;
    let mut k = 0;
    while k < n {
        let t = a.thread[k] as usize;
        let mut last = prev[t];
        let mut j = k;
        while j < n && a.thread[j] as usize == t {
            let v = read_varint_fast(addrs, &mut p).ok_or("addresses")?;
            last = last.wrapping_add(varint::unzigzag(v) as u64);
            a.addr[j] = last;
            j += 1;
        }
        prev[t] = last;
        k = j;
    }
    if p != addrs.len() {
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

/// Varint read with a fast path for the common one- and two-byte cases.
#[inline(always)]
fn read_varint_fast(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let i = *pos;
    if let Some(&b0) = buf.get(i) {
        if b0 < 0x80 {
            *pos = i + 1;
            return Some(b0 as u64);
        }
        if let Some(&b1) = buf.get(i + 1) {
            if b1 < 0x80 {
                *pos = i + 2;
                return Some((b0 & 0x7f) as u64 | (b1 as u64) << 7);
            }
        }
    }
    varint::get(buf, pos)
}
