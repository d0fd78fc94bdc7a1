//! sharemap-sources: where traces come from. Workload generators modelling the seed
//! programs' sharing patterns, and recorders of real programs (Valgrind).

pub mod filters;
pub mod generate;
pub mod perf;
pub mod runtime;
pub mod valgrind;

/// Turns address-space randomisation off for the calling process's future programs: the
/// personality flag ADDR_NO_RANDOMIZE, which fork and exec keep. A program then gets the
/// same addresses from run to run, so that a plan made from one recording's pages applies
/// to the next run. Only async-signal-safe system calls: it may run between fork and exec.
pub fn disable_aslr() -> io::Result<()> {
    // SAFETY: personality with 0xffffffff only reads the current persona.
    let current = unsafe { libc::personality(0xffff_ffff) };
    // SAFETY: setting a persona is a plain system call.
    if current == -1 || unsafe { libc::personality((current | libc::ADDR_NO_RANDOMIZE) as libc::c_ulong) } == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

use sharemap_trace::batch::ChunkItem;
use sharemap_trace::{Access, Chunk, Event, EventKind};
use std::io;
use std::process::ExitStatus;

/// What recording a program gave (the tracer runtime and the page-fault source).
#[derive(Debug)]
pub struct Recording {
    pub status: ExitStatus,
    pub accesses: u64,
    pub threads: u32,
    /// OS thread id of each dense thread id (0 where unknown).
    pub os_tids: Vec<u64>,
    /// Records the program's threads could not hand over (the recorder fell behind, or
    /// threads beyond the 4096th).
    pub lost: u64,
    /// Times the program forked: the children are not recorded.
    pub forks: u32,
    /// Accesses left out (`--exclude`).
    pub excluded: u64,
    /// What the program broke in its trace channel, when it did: the recording stopped there
    /// (the tracer runtime; the records before it are kept).
    pub corrupted: Option<String>,
    /// A burst-sampled build's setting, as its runtime reported it (the tracer runtime).
    pub burst: Option<sharemap_trace::Burst>,
    /// The executable's load bias, and the code addresses the trace's allocation and access
    /// sites name, sorted (the tracer runtime): for the recorder to resolve.
    pub exe_base: u64,
    pub sites: Vec<u64>,
}

/// A sink that leaves out the accesses touching some address ranges (`record --exclude`),
/// passing everything else on with events at their place among the accesses kept. The
/// ranges may be set late (symbols are placed once the program has loaded).
pub struct ExcludingSink<'a> {
    inner: &'a mut dyn Sink,
    pub ranges: sharemap_trace::exclude::Ranges,
    kept: u64,
    buf: Chunk,
    /// Accesses left out so far.
    pub excluded: u64,
}

impl<'a> ExcludingSink<'a> {
    pub fn new(inner: &'a mut dyn Sink, ranges: sharemap_trace::exclude::Ranges) -> Self {
        ExcludingSink { inner, ranges, kept: 0, buf: Chunk::default(), excluded: 0 }
    }
}

impl Sink for ExcludingSink<'_> {
    fn access(&mut self, a: Access) -> io::Result<()> {
        if self.ranges.touches(a.addr, a.size) {
            self.excluded += 1;
            return Ok(());
        }
        self.kept += 1;
        self.inner.access(a)
    }

    fn push_event(&mut self, e: &Event) -> io::Result<()> {
        self.inner.push_event(e)
    }

    fn chunk(&mut self, chunk: &mut Chunk) -> io::Result<()> {
        if self.ranges.is_empty() {
            self.kept += chunk.accesses.len() as u64;
            return self.inner.chunk(chunk);
        }
        self.buf.clear();
        self.buf.first_access = self.kept;
        self.excluded += sharemap_trace::exclude::keep_outside(&self.ranges, chunk, &mut self.buf, &mut self.kept);
        self.inner.chunk(&mut self.buf)
    }
}

/// While alive, passes SIGINT, SIGTERM and SIGHUP sent to the recorder on to the recorded
/// program: it ends (or not) as if it had been signalled, and the recorder, which keeps
/// running, takes everything it handed over and writes a complete trace.
pub struct SignalForwarder {
    handle: Option<signal_hook::iterator::Handle>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl SignalForwarder {
    pub fn to(pid: u32) -> SignalForwarder {
        use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
        let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) else {
            return SignalForwarder { handle: None, thread: None };
        };
        let handle = signals.handle();
        let thread = std::thread::spawn(move || {
            for sig in signals.forever() {
                // SAFETY: kill only sends a signal to the program this recorder started.
                unsafe { libc::kill(pid as i32, sig) };
            }
        });
        SignalForwarder { handle: Some(handle), thread: Some(thread) }
    }
}

impl Drop for SignalForwarder {
    fn drop(&mut self) {
        if let Some(h) = self.handle.take() {
            h.close();
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Where a source puts what it produces: a trace writer, or a vector in tests.
pub trait Sink {
    fn access(&mut self, a: Access) -> io::Result<()>;
    /// An event just before the next access (its own position is not used).
    fn push_event(&mut self, e: &Event) -> io::Result<()>;

    fn event(&mut self, thread: u32, kind: EventKind, arg: u64, label: &str) -> io::Result<()> {
        self.push_event(&Event::new(0, thread, kind, arg, label))
    }

    /// A run of accesses and events built by the source itself (events at absolute
    /// positions, `chunk.first_access` being the number of accesses sent before). Writers
    /// take it whole, and may take its contents; by default it is replayed in order.
    fn chunk(&mut self, chunk: &mut Chunk) -> io::Result<()> {
        for item in chunk.items() {
            match item {
                ChunkItem::Access(a) => self.access(a)?,
                ChunkItem::Event(e) => self.push_event(e)?,
            }
        }
        Ok(())
    }
}

impl<W: io::Write> Sink for sharemap_trace::native::NativeWriter<W> {
    fn access(&mut self, a: Access) -> io::Result<()> {
        self.push(a)
    }
    fn push_event(&mut self, e: &Event) -> io::Result<()> {
        sharemap_trace::native::NativeWriter::push_event(self, e)
    }
    fn chunk(&mut self, chunk: &mut Chunk) -> io::Result<()> {
        self.write_chunk(chunk)
    }
}

/// A sink that keeps everything in memory (tests, small traces).
#[derive(Default, Debug)]
pub struct VecSink {
    pub accesses: Vec<Access>,
    /// (position in `accesses`, thread, kind, arg, label)
    pub events: Vec<(usize, u32, EventKind, u64, String)>,
}

impl Sink for VecSink {
    fn access(&mut self, a: Access) -> io::Result<()> {
        self.accesses.push(a);
        Ok(())
    }
    fn push_event(&mut self, e: &Event) -> io::Result<()> {
        self.events.push((self.accesses.len(), e.thread, e.kind, e.arg, e.label.clone()));
        Ok(())
    }
}

impl Sink for sharemap_trace::TraceWriter {
    fn access(&mut self, a: Access) -> io::Result<()> {
        sharemap_trace::TraceWriter::access(self, a).map_err(io::Error::other)
    }
    fn push_event(&mut self, e: &Event) -> io::Result<()> {
        sharemap_trace::TraceWriter::push_event(self, e).map_err(io::Error::other)
    }
    fn chunk(&mut self, chunk: &mut Chunk) -> io::Result<()> {
        sharemap_trace::TraceWriter::chunk(self, chunk).map_err(io::Error::other)
    }
}

impl Sink for sharemap_trace::MemoryTrace {
    fn access(&mut self, a: Access) -> io::Result<()> {
        sharemap_trace::MemoryTrace::access(self, a);
        Ok(())
    }
    fn push_event(&mut self, e: &Event) -> io::Result<()> {
        sharemap_trace::MemoryTrace::push_event(self, e);
        Ok(())
    }
}
