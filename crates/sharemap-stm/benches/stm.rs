//! The STM's core on one thread: a read-only transaction of 16 loads, and an update of 16
//! loads and 2 stores, each begun, run and committed (criterion). Whole programs, threads
//! and STMap's cost are measured by scripts/bench-stm.

use criterion::{Criterion, criterion_group, criterion_main};
use sharemap_stm::{Abort, Tx, Word};
use std::hint::black_box;
use std::sync::atomic::AtomicUsize;

#[repr(align(64))]
struct Cell(AtomicUsize);

/// The sum of 16 words from `k` on, read in the transaction.
fn sum16(tx: &mut Tx, at: &impl Fn(usize) -> usize, k: usize) -> Result<Word, Abort> {
    let mut sum = 0;
    for i in 0..16 {
        // SAFETY: the cells outlive the benchmark; only the STM reaches them.
        sum += unsafe { tx.load(at(k + i))? };
    }
    Ok(sum)
}

fn bench(c: &mut Criterion) {
    let cells: Vec<Cell> = (0..64).map(|i| Cell(AtomicUsize::new(i))).collect();
    let at = |i: usize| cells[i % 64].0.as_ptr() as usize;
    let mut tx = Tx::new(1);
    let mut g = c.benchmark_group("stm");
    g.bench_function("read-only 16 loads", |b| {
        let mut k = 0usize;
        b.iter(|| {
            k = k.wrapping_add(7);
            tx.atomically(|tx| sum16(tx, &at, k).map(black_box))
        })
    });
    g.bench_function("update 16 loads 2 stores", |b| {
        let mut k = 0usize;
        b.iter(|| {
            k = k.wrapping_add(7);
            tx.atomically(|tx| {
                let sum = sum16(tx, &at, k)?;
                // SAFETY: the cells outlive the benchmark; only the STM reaches them.
                unsafe {
                    tx.store(at(k), sum, !0)?;
                    tx.store(at(k + 1), sum, !0)?;
                }
                Ok(())
            })
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
