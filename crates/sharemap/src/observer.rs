//! Progress of the passes over a trace, for whoever runs them: the command line draws bars,
//! Python checks for Ctrl-C.

/// Told as each pass over the trace starts, reads and ends. Every method has a default that
/// does nothing.
pub trait Observer: Send + Sync {
    /// A pass begins: what it does, and how many accesses it will read when that is known.
    fn start(&self, _what: &str, _total: Option<u64>) {}
    /// The pass has read this many accesses so far.
    fn read(&self, _accesses: u64) {}
    /// The pass is over.
    fn end(&self) {}
}

/// Nobody watching.
impl Observer for () {}

/// Runs `pass` between `start` and `end`, handing it the function that reports accesses read.
pub(crate) fn pass<T>(
    observer: &dyn Observer,
    what: &str,
    total: Option<u64>,
    pass: impl FnOnce(&(dyn Fn(u64) + Sync)) -> T,
) -> T {
    observer.start(what, total);
    let out = pass(&|n| observer.read(n));
    observer.end();
    out
}
