//! What ordering the records costs per access: the global counter the tracer uses (one
//! atomic fetch-and-add on a shared cache line) against per-thread timestamps (rdtsc),
//! with 1 and 2 threads recording at once.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::sync::atomic::{AtomicU64, Ordering};

const OPS: u64 = 1_000_000;

fn counter(threads: usize) -> u64 {
    let g = AtomicU64::new(0);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let mut last = 0;
                for _ in 0..OPS {
                    last = g.fetch_add(1, Ordering::Relaxed);
                }
                std::hint::black_box(last);
            });
        }
    });
    g.load(Ordering::Relaxed)
}

#[cfg(target_arch = "x86_64")]
fn timestamps(threads: usize) -> u64 {
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut last = 0;
                    for _ in 0..OPS {
                        // SAFETY: rdtsc has no preconditions on x86-64.
                        last = unsafe { core::arch::x86_64::_rdtsc() };
                    }
                    last
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).max().unwrap()
    })
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("order");
    g.sample_size(10);
    for threads in [1, 2] {
        g.throughput(Throughput::Elements(OPS * threads as u64));
        g.bench_function(format!("global-counter/{threads}-threads"), |b| b.iter(|| counter(threads)));
        #[cfg(target_arch = "x86_64")]
        g.bench_function(format!("rdtsc/{threads}-threads"), |b| b.iter(|| timestamps(threads)));
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
