//! DineroIV "din" export: one `label address` line per access, label 0 = read, 1 = write,
//! address in hex. The format has no threads or sizes; it is for cross-checking with cache
//! simulators, so sharemap writes it but does not read it.

use crate::batch::Chunk;
use std::io::Write;

pub struct DinWriter<W: Write> {
    out: W,
}

impl<W: Write> DinWriter<W> {
    pub fn new(out: W) -> Self {
        DinWriter { out }
    }

    pub fn write_chunk(&mut self, chunk: &Chunk) -> std::io::Result<()> {
        for a in chunk.accesses.iter() {
            writeln!(self.out, "{} {:x}", if a.kind == crate::Kind::Write { 1 } else { 0 }, a.addr)?;
        }
        Ok(())
    }

    pub fn into_inner(self) -> W {
        self.out
    }
}
