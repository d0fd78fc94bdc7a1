//! Streaming writer: accesses are buffered into one chunk at a time, so memory stays
//! bounded whatever the trace length. Chunks are independent: complete ones are encoded on
//! rayon's pool while the caller goes on producing, a bounded number at a time, and are
//! written in order as they come back.

use super::{ChunkEncoder, DEFAULT_CHUNK_ACCESSES, FILE_MAGIC, FOOTER_MAGIC, Footer, TRAILER_MAGIC};
use crate::batch::{Chunk, ChunkItem};
use crate::model::{Access, Event, EventKind, FORMAT_VERSION, Metadata};
use std::collections::BTreeMap;
use std::io::{self, Write};
use std::sync::mpsc::{self, Receiver, Sender};

/// A chunk back from an encoder, with the encoder and buffers to reuse.
struct Encoded {
    index: u64,
    header: io::Result<super::ChunkHeader>,
    encoder: ChunkEncoder,
    payload: Vec<u8>,
    chunk: Chunk,
}

pub struct NativeWriter<W: Write> {
    out: W,
    offset: u64,
    meta: Metadata,
    pending: Chunk,
    level: i32,
    /// Encoders (with their payload buffers) and chunks not in use.
    idle: Vec<(ChunkEncoder, Vec<u8>)>,
    spare: Vec<Chunk>,
    /// Chunks handed out for encoding, and written, so far; at most `in_flight` apart.
    sent: u64,
    written: u64,
    in_flight: u64,
    /// Encoded chunks waiting for their predecessors.
    done: BTreeMap<u64, Encoded>,
    results: (Sender<Encoded>, Receiver<Encoded>),
    failed: bool,
    /// Flush the output after every chunk (a recording: what is written must be on disk if
    /// the recorder is killed).
    flush_chunks: bool,
    chunk_accesses: usize,
    accesses: u64,
    events: u64,
    chunks: u64,
    thread_span: u32,
    /// The region and phase marks written so far, for the footer (None past `MAX_MARKS`).
    marks: Option<Vec<Event>>,
}

/// Totals of a finished trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteSummary {
    pub accesses: u64,
    pub events: u64,
    pub chunks: u64,
    pub bytes: u64,
    pub threads: u32,
}

impl<W: Write> NativeWriter<W> {
    pub fn new(out: W, meta: Metadata) -> io::Result<Self> {
        Self::with_options(out, meta, DEFAULT_CHUNK_ACCESSES, super::DEFAULT_ZSTD_LEVEL)
    }

    pub fn with_options(mut out: W, mut meta: Metadata, chunk_accesses: usize, level: i32) -> io::Result<Self> {
        meta.format_version = FORMAT_VERSION;
        let json = serde_json::to_vec(&meta).map_err(io::Error::other)?;
        out.write_all(FILE_MAGIC)?;
        out.write_all(&(FORMAT_VERSION as u16).to_le_bytes())?;
        out.write_all(&0u16.to_le_bytes())?;
        out.write_all(&(json.len() as u32).to_le_bytes())?;
        out.write_all(&crc32fast::hash(&json).to_le_bytes())?;
        out.write_all(&json)?;
        Ok(NativeWriter {
            out,
            offset: (super::FILE_HEADER_LEN + json.len()) as u64,
            meta,
            pending: Chunk::default(),
            level,
            idle: vec![(ChunkEncoder::new(level)?, Vec::new())],
            spare: Vec::new(),
            sent: 0,
            written: 0,
            // One core: encode in place. More: keep every core busy, with one chunk each
            // queued behind.
            in_flight: match rayon::current_num_threads() {
                0 | 1 => 1,
                n => 2 * n as u64,
            },
            done: BTreeMap::new(),
            results: mpsc::channel(),
            failed: false,
            flush_chunks: false,
            chunk_accesses: chunk_accesses.clamp(1, super::MAX_CHUNK_ACCESSES as usize),
            accesses: 0,
            events: 0,
            chunks: 0,
            thread_span: 0,
            marks: Some(Vec::new()),
        })
    }

    /// Number of accesses written so far (the position the next event will get).
    pub fn accesses(&self) -> u64 {
        self.accesses
    }

    #[inline]
    pub fn push(&mut self, a: Access) -> io::Result<()> {
        self.pending.accesses.push(a);
        self.accesses += 1;
        if self.pending.accesses.len() >= self.chunk_accesses {
            self.flush_chunk()?;
        }
        Ok(())
    }

    /// Records an event just before the next access.
    pub fn event(&mut self, thread: u32, kind: EventKind, arg: u64, label: &str) -> io::Result<()> {
        self.push_event(&Event::new(0, thread, kind, arg, label))
    }

    /// Records `e` just before the next access (its own position is not used).
    pub fn push_event(&mut self, e: &Event) -> io::Result<()> {
        self.pending.events.push(Event { at: self.accesses, ..e.clone() });
        self.events += 1;
        // A stream of events with no accesses must not grow without bound either.
        if self.pending.events.len() >= self.chunk_accesses {
            self.flush_chunk()?;
        }
        Ok(())
    }

    /// Sets the thread count and OS tids to store in the footer (defaults to what was seen).
    pub fn set_threads(&mut self, threads: u32, os_tids: Vec<u64>) {
        self.meta.threads = threads;
        self.meta.os_tids = os_tids;
    }

    /// Flushes the header now and the output after every chunk from here on, so that a
    /// writer killed at any moment leaves a readable (truncated) trace of every chunk it wrote.
    pub fn flush_each_chunk(&mut self) -> io::Result<()> {
        self.flush_chunks = true;
        self.out.flush()
    }

    /// The recorded run's wall-clock time, for the footer's metadata.
    pub fn set_run_ns(&mut self, ns: u64) {
        self.meta.run_ns = Some(ns.max(1));
    }

    /// The recording host's NUMA node of each CPU, for the footer's metadata.
    pub fn set_host_cpu_nodes(&mut self, nodes: Vec<u32>) {
        self.meta.host_cpu_nodes = nodes;
    }

    pub fn set_burst(&mut self, burst: Option<crate::Burst>) {
        self.meta.burst = burst;
    }

    pub fn set_program(&mut self, program: Option<crate::ProgramInfo>) {
        self.meta.program = program;
    }

    /// Appends a whole chunk whose events sit at absolute positions from
    /// `chunk.first_access`, taking its contents (it is left empty, for the caller to fill
    /// again). Encoded as it is when it starts at the writer's position and fits in one
    /// chunk (a source that builds chunks itself skips the per-access path), else access by
    /// access.
    pub fn write_chunk(&mut self, chunk: &mut Chunk) -> io::Result<()> {
        if chunk.accesses.is_empty() && chunk.events.is_empty() {
            return Ok(());
        }
        let fits = chunk.accesses.len() <= self.chunk_accesses && chunk.events.len() <= self.chunk_accesses;
        if fits
            && chunk.first_access == self.accesses
            && self.pending.accesses.is_empty()
            && self.pending.events.is_empty()
        {
            self.accesses += chunk.accesses.len() as u64;
            self.events += chunk.events.len() as u64;
            let taken = std::mem::replace(chunk, self.spare.pop().unwrap_or_default());
            return self.encode(taken);
        }
        for item in chunk.items() {
            match item {
                ChunkItem::Access(a) => self.push(a)?,
                ChunkItem::Event(e) => self.event(e.thread, e.kind, e.arg, &e.label)?,
            }
        }
        chunk.clear();
        Ok(())
    }

    fn flush_chunk(&mut self) -> io::Result<()> {
        if self.pending.accesses.is_empty() && self.pending.events.is_empty() {
            return Ok(());
        }
        self.pending.first_access = self.accesses - self.pending.accesses.len() as u64;
        let next = self.spare.pop().unwrap_or_default();
        let full = std::mem::replace(&mut self.pending, next);
        self.encode(full)
    }

    /// Encodes a complete chunk (on the pool, or here with one core) and writes whatever
    /// is ready in order.
    fn encode(&mut self, chunk: Chunk) -> io::Result<()> {
        if let Some(marks) = &mut self.marks {
            marks.extend(chunk.events.iter().filter(|e| super::is_mark(e.kind)).cloned());
            if marks.len() > super::MAX_MARKS {
                self.marks = None;
            }
        }
        while self.sent - self.written >= self.in_flight {
            self.receive()?;
        }
        let (mut encoder, mut payload) = match self.idle.pop() {
            Some(idle) => idle,
            None => (ChunkEncoder::new(self.level)?, Vec::new()),
        };
        let index = self.sent;
        self.sent += 1;
        // On one core, or on a thread of the pool itself (waiting there for tasks queued
        // behind it could stall the pool), encode here.
        if self.in_flight == 1 || rayon::current_thread_index().is_some() {
            let header = encoder.encode(&chunk, &mut payload);
            self.done.insert(index, Encoded { index, header, encoder, payload, chunk });
            return self.write_done();
        }
        let back = self.results.0.clone();
        rayon::spawn(move || {
            // A panic must come back as an error, or the writer would wait for ever.
            let header =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| encoder.encode(&chunk, &mut payload)))
                    .unwrap_or_else(|_| Err(io::Error::other("encoding a chunk failed")));
            // The writer may be gone (dropped after an error): nothing to hand back then.
            let _ = back.send(Encoded { index, header, encoder, payload, chunk });
        });
        while let Ok(e) = self.results.1.try_recv() {
            self.done.insert(e.index, e);
        }
        self.write_done()
    }

    /// Waits for one encoded chunk, then writes what is ready.
    fn receive(&mut self) -> io::Result<()> {
        let e = self.results.1.recv().map_err(|_| io::Error::other("an encoding task was lost"))?;
        self.done.insert(e.index, e);
        self.write_done()
    }

    /// Writes the encoded chunks that come next in order, and recycles their buffers.
    fn write_done(&mut self) -> io::Result<()> {
        while let Some(mut e) = self.done.remove(&self.written) {
            self.written += 1;
            // After a failure the trace has a hole: every later write fails too.
            if self.failed {
                return Err(io::Error::other("an earlier chunk could not be encoded"));
            }
            let written = e.header.and_then(|header| {
                self.out.write_all(&header.to_bytes())?;
                self.out.write_all(&e.payload)?;
                Ok(header)
            });
            let written = written.and_then(|h| if self.flush_chunks { self.out.flush().map(|_| h) } else { Ok(h) });
            let header = written.inspect_err(|_| self.failed = true)?;
            self.offset += (super::CHUNK_HEADER_LEN + e.payload.len()) as u64;
            self.thread_span = self.thread_span.max(header.thread_span);
            self.chunks += 1;
            e.chunk.clear();
            self.spare.push(e.chunk);
            self.idle.push((e.encoder, e.payload));
        }
        Ok(())
    }

    /// Writes the last chunk and the footer, and returns the writer's output.
    pub fn finish(mut self) -> io::Result<(W, WriteSummary)> {
        self.flush_chunk()?;
        while self.written < self.sent {
            self.receive()?;
        }
        self.meta.threads = self.meta.threads.max(self.thread_span);
        let footer = Footer {
            metadata: self.meta.clone(),
            accesses: self.accesses,
            events: self.events,
            chunks: self.chunks,
            marks: self.marks.take(),
        };
        let json = serde_json::to_vec(&footer).map_err(io::Error::other)?;
        let footer_offset = self.offset;
        self.out.write_all(FOOTER_MAGIC)?;
        self.out.write_all(&crc32fast::hash(&json).to_le_bytes())?;
        self.out.write_all(&(json.len() as u32).to_le_bytes())?;
        self.out.write_all(&json)?;
        self.out.write_all(&footer_offset.to_le_bytes())?;
        self.out.write_all(TRAILER_MAGIC)?;
        self.out.flush()?;
        let bytes = footer_offset + 12 + json.len() as u64 + 16;
        let summary = WriteSummary {
            accesses: self.accesses,
            events: self.events,
            chunks: self.chunks,
            bytes,
            threads: self.meta.threads,
        };
        Ok((self.out, summary))
    }
}
