//! A trace through every mechanism at once: the trace is read once, in order; each chunk goes
//! to every mechanism's simulation, the simulations running side by side on the pool.

use crate::mechanisms::{Chosen, Context, Mechanism, MechanismError, Start};
use crate::model::Model;
use crate::sim::Sim;
use crate::stats::Outcome;
use rayon::prelude::*;
use sharemap_trace::{Chunk, EventKind, TraceSource};

struct Run<'m> {
    name: String,
    sim: Sim<'m>,
    mechanism: Box<dyn Mechanism>,
    online: bool,
}

impl Run<'_> {
    fn chunk(&mut self, chunk: &Chunk) {
        let a = &chunk.accesses;
        let mut start = 0usize;
        for e in &chunk.events {
            let at = (e.at.saturating_sub(chunk.first_access) as usize).min(a.len());
            self.accesses(chunk, start, at.max(start));
            start = start.max(at);
            match e.kind {
                // Threads meet at a phase change (the generators' phases are barriers).
                EventKind::PhaseChange => self.sim.synchronise(),
                EventKind::Cpu => self.mechanism.on_cpu(&mut self.sim, e.thread as usize, e.arg),
                EventKind::ThreadStart => self.sim.thread_start(e.thread as usize),
                _ => {}
            }
        }
        self.accesses(chunk, start, a.len());
    }

    #[inline]
    fn accesses(&mut self, chunk: &Chunk, from: usize, to: usize) {
        let a = &chunk.accesses;
        let ops = &a.op[from..to];
        let (mechanism, online) = (&mut self.mechanism, self.online);
        self.sim.feed(
            &a.thread[from..to],
            &a.addr[from..to],
            |i| ops[i] & 0x80 != 0,
            |sim, t, addr, write, ns| {
                if online {
                    mechanism.after_access(sim, t, addr, write, ns);
                }
            },
        );
    }
}

/// Errors of a simulation: the trace's, or a mechanism that cannot start.
#[derive(Debug)]
pub enum SimError {
    Trace(sharemap_trace::TraceError),
    Mechanism(crate::mechanisms::MechanismError),
}

impl std::fmt::Display for SimError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SimError::Trace(e) => write!(f, "{e}"),
            SimError::Mechanism(e) => e.fmt(f),
        }
    }
}
impl std::error::Error for SimError {}

/// Simulates the trace under each mechanism; outcomes in the mechanisms' order, each related
/// to `os`'s when `os` is among them. `progress` gets the accesses read so far.
pub fn simulate(
    trace: &mut dyn TraceSource,
    model: &Model,
    mechanisms: &[Chosen],
    ctx: &Context,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Vec<Outcome>, SimError> {
    let mut runs = Vec::new();
    for chosen in mechanisms {
        let mut mechanism = chosen.build(ctx.seed).map_err(|e| SimError::Mechanism(MechanismError::of(e)))?;
        let start = mechanism.start(ctx).map_err(|e| SimError::Mechanism(e.of_mechanism(&chosen.label)))?;
        let mut sim = Sim::new(model, ctx.page_size, &start.pus, start.placement);
        if ctx.log_decisions {
            sim.log_decisions();
        }
        for (page, node) in start.homes {
            sim.set_home(page, node);
        }
        let online = mechanism.online();
        runs.push(Run { name: chosen.label.clone(), sim, mechanism, online });
    }
    let mut read = 0u64;
    trace
        .for_each_chunk(&mut |chunk| {
            runs.par_iter_mut().for_each(|r| r.chunk(chunk));
            read += chunk.accesses.len() as u64;
            progress(read);
            Ok(())
        })
        .map_err(SimError::Trace)?;
    let levels = model.levels();
    let mut out: Vec<Outcome> = runs
        .iter_mut()
        .map(|r| {
            let mut o = Outcome::new(&r.name, &r.sim.stats, r.sim.time_ns(), &levels);
            o.decisions = r.sim.take_decisions();
            o.thread_moves = r.sim.take_thread_moves();
            o.final_pus = (0..r.sim.threads()).map(|t| r.sim.pu_of(t)).collect();
            o.note = r.mechanism.note(o.time_ns);
            o
        })
        .collect();
    if let Some(base) = out.iter().find(|o| o.mechanism == "os").cloned() {
        out.iter_mut().for_each(|o| o.relate_to(&base));
    }
    Ok(out)
}

/// The thread mappings a mechanism tries after its start, each thread's PU.
pub type Candidates = Vec<Vec<usize>>;

/// Where each mechanism starts, without running it: the PU of each thread, the pages it homes
/// before the run, and the mappings it tries after (autopin's candidates): what a real run
/// applies of a mechanism decided before it runs.
pub fn starts(mechanisms: &[Chosen], ctx: &Context) -> Result<Vec<(Start, Candidates)>, SimError> {
    mechanisms
        .iter()
        .map(|chosen| {
            let mut mechanism = chosen.build(ctx.seed).map_err(|e| SimError::Mechanism(MechanismError::of(e)))?;
            let start = mechanism.start(ctx).map_err(|e| SimError::Mechanism(e.of_mechanism(&chosen.label)))?;
            Ok((start, mechanism.candidates()))
        })
        .collect()
}

/// Per page, the accesses each node makes to its memory (every access no cache served) when
/// the threads run on `pus`: what a page's home decides. Caches do not depend on where pages
/// live, so one run with any homes gives these counts for all of them.
pub fn memory_profile(
    trace: &mut dyn TraceSource,
    model: &Model,
    page_size: u64,
    pus: &[usize],
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Vec<(u64, Vec<u64>)>, sharemap_trace::TraceError> {
    let mut sim = Sim::new(model, page_size, pus, crate::FirstPlacement::FirstTouch);
    sim.count_memory();
    let mut read = 0u64;
    trace.for_each_chunk(&mut |chunk| {
        let a = &chunk.accesses;
        sim.feed(&a.thread, &a.addr, |i| a.op[i] & 0x80 != 0, |_, _, _, _, _| {});
        read += a.len() as u64;
        progress(read);
        Ok(())
    })?;
    Ok(sim.memory_by_page())
}
