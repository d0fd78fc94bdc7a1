//! The generator patterns. Sizes come from the footprint (pages of data per thread) when it
//! is given; otherwise they derive from the access budget so that every pattern runs several
//! iterations and its initialisation fits in the budget. Unless a pattern says otherwise,
//! each thread first touches (writes) its own data in a parallel initialisation phase, as
//! NUMA-aware programs do.

use super::*;
use rand::Rng;
use std::iter::once;

pub const PATTERNS: &[Pattern] = &[
    Pattern {
        name: "private",
        models: "EP-like: each thread works on private data only; no page is shared (seed 000's EP)",
        phases: private,
        default_footprint: PAPER_FOOTPRINT,
        default_iterations: PAPER_ITERATIONS,
    },
    Pattern {
        name: "neighbor",
        models: "domain decomposition: each thread sweeps its block and reads a halo of its left and right neighbours' blocks, one page unless --halo (seed 000's LU/SP/BT-like neighbour sharing)",
        phases: neighbor,
        default_footprint: PAPER_FOOTPRINT,
        default_iterations: PAPER_ITERATIONS,
    },
    Pattern {
        name: "all-to-all",
        models: "CG-like sparse matrix-vector product: each thread reads vector entries of all threads uniformly, 8 nonzeros a row unless --nnz (seed 000's CG)",
        phases: all_to_all,
        default_footprint: PAPER_FOOTPRINT,
        default_iterations: PAPER_ITERATIONS,
    },
    Pattern {
        name: "sor",
        models: "banded red-black SOR by rows (seed 004's sorbyr, seed 003's sor): each thread owns a band of one-page rows; boundary rows are read by the neighbouring band",
        phases: sor,
        default_footprint: PAPER_FOOTPRINT,
        default_iterations: PAPER_ITERATIONS,
    },
    Pattern {
        name: "matmult",
        models: "row-partitioned matrix multiply C = A x B in i-k-j order (seed 004's matmult): A and C rows private, B read by every thread",
        phases: matmult,
        default_footprint: MATMULT_FOOTPRINT,
        default_iterations: 1,
    },
    Pattern {
        name: "producer-consumer",
        models: "thread pairs (2k producer, 2k+1 consumer) passing data through a double buffer; an odd last thread produces and consumes alone",
        phases: producer_consumer,
        default_footprint: PAPER_FOOTPRINT,
        default_iterations: PAPER_ITERATIONS,
    },
    Pattern {
        name: "migratory",
        models: "migratory data: 2 objects per thread, each handed to the next thread at every phase and read-modify-written there",
        phases: migratory,
        default_footprint: PAPER_FOOTPRINT,
        default_iterations: PAPER_ITERATIONS,
    },
    Pattern {
        name: "read-mostly",
        models: "a lookup table read by all threads at random, written rarely (1 lookup in 1000); replication-friendly (seed 003)",
        phases: read_mostly,
        default_footprint: PAPER_FOOTPRINT,
        default_iterations: PAPER_ITERATIONS,
    },
    Pattern {
        name: "phase-change",
        models: "mgrid-like V-cycles over 3 grid levels: each level uses 8x the data of the next coarser one, split evenly among threads, with a phase-change event per level (seed 003's mgrid)",
        phases: phase_change,
        default_footprint: PAPER_FOOTPRINT,
        default_iterations: 12,
    },
    Pattern {
        name: "init-then-compute",
        models: "thread 0 initialises all data serially, signals init-done, then every thread computes on its own block: the first-touch trap (seed 003)",
        phases: init_then_compute,
        default_footprint: PAPER_FOOTPRINT,
        default_iterations: PAPER_ITERATIONS,
    },
    Pattern {
        name: "random",
        models: "uniformly random accesses to a shared heap, 1-8 consecutive words of a random cache line, 1 in 4 a write",
        phases: random,
        default_footprint: PAPER_FOOTPRINT,
        default_iterations: PAPER_ITERATIONS,
    },
];

type Phases = Box<dyn Iterator<Item = Phase>>;

/// matmult's default pages per thread: a multiplication is n^3 accesses for its 3 n^2 words,
/// so a footprint of 32 pages per thread is already 27 M accesses at 8 threads.
const MATMULT_FOOTPRINT: u64 = 32;

fn threads(p: &GenParams) -> impl Iterator<Item = u32> {
    0..p.threads
}

/// Words per thread of one of a pattern's `arrays` arrays: the footprint's words shared
/// among them, or without a footprint `per_thread / divisor` (the divisor being accesses per
/// word and iteration times the iterations wanted); at least one page, a whole number of
/// pages.
fn words_per_thread(p: &GenParams, divisor: u64, arrays: u64) -> u64 {
    let words = match p.footprint_words() {
        Some(f) => f / arrays,
        None => p.per_thread() / divisor,
    };
    round_up(words.max(p.page_words()), p.page_words())
}

fn private(p: GenParams) -> Phases {
    let w = words_per_thread(&p, 12, 1);
    let word = p.word;
    let base = move |t: u32| region(0) + t as u64 * w * word;
    let init = Phase::new(threads(&p).map(|t| (t, write_range(&p, base(t), w))).collect());
    let compute = (0..).map(move |_| {
        Phase::new(
            threads(&p)
                .map(|t| {
                    let b = base(t);
                    let s: Stream = Box::new((0..w).flat_map(move |i| {
                        let a = b + i * word;
                        once(p.rd(a)).chain((i % 4 == 0).then(|| p.wr(a)))
                    }));
                    (t, s)
                })
                .collect(),
        )
    });
    Box::new(once(init).chain(compute))
}

fn neighbor(p: GenParams) -> Phases {
    let w = words_per_thread(&p, 16, 2).max(2 * p.page_words());
    let halo = (p.halo * p.page_words()).min(w);
    let n = p.threads;
    let word = p.word;
    let arrays = [region(0), region(1)];
    let init = Phase::new(
        threads(&p)
            .map(|t| {
                let off = t as u64 * w * word;
                (t, Box::new(write_range(&p, arrays[0] + off, w).chain(write_range(&p, arrays[1] + off, w))) as Stream)
            })
            .collect(),
    );
    let iterations = (0u64..).map(move |k| {
        let (src, dst) = (arrays[(k % 2) as usize], arrays[((k + 1) % 2) as usize]);
        Phase::new(
            (0..n)
                .map(|t| {
                    let start = t as u64 * w;
                    let left = (t > 0)
                        .then(|| start - halo)
                        .into_iter()
                        .flat_map(move |s| (s..s + halo).map(move |i| p.rd(src + i * word)));
                    let right = (t + 1 < n)
                        .then_some(start + w)
                        .into_iter()
                        .flat_map(move |s| (s..s + halo).map(move |i| p.rd(src + i * word)));
                    let own = (start..start + w).flat_map(move |i| [p.rd(src + i * word), p.wr(dst + i * word)]);
                    (t, Box::new(left.chain(right).chain(own)) as Stream)
                })
                .collect(),
        )
    });
    Box::new(once(init).chain(iterations))
}

fn all_to_all(p: GenParams) -> Phases {
    // Nonzeros per row: 8 by default; NPB CG class B has about 176.
    #[allow(non_snake_case)]
    let NNZ = p.nnz;
    // A row holds x, y, NNZ values of a word and NNZ 4-byte column indices.
    let row_words = 2 + NNZ + (NNZ * 4).div_ceil(p.word);
    let rows = words_per_thread(&p, 3 * NNZ * 6, row_words);
    let word = p.word;
    let n = p.threads as u64;
    let total_rows = rows * n;
    let (x, vals, cols, y) = (region(0), region(1), region(2), region(3));
    let seed = p.seed;
    // Column of nonzero k of row i: fixed for the whole run, uniform over all rows.
    let column = move |i: u64, k: u64| {
        let mut h = (i * NNZ + k) ^ seed.rotate_left(17);
        h = (h ^ (h >> 33)).wrapping_mul(0xff51_afd7_ed55_8ccd);
        h = (h ^ (h >> 33)).wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        (h ^ (h >> 33)) % total_rows
    };
    let init = Phase::new(
        threads(&p)
            .map(|t| {
                let r0 = t as u64 * rows;
                let s = write_range(&p, x + r0 * word, rows)
                    .chain(write_range(&p, vals + r0 * NNZ * word, rows * NNZ))
                    .chain((0..rows * NNZ).map(move |i| Op { addr: cols + (r0 * NNZ + i) * 4, size: 4, write: true }))
                    .chain(write_range(&p, y + r0 * word, rows));
                (t, Box::new(s) as Stream)
            })
            .collect(),
    );
    let iterations = (0u64..).flat_map(move |_| {
        let matvec = Phase::new(
            (0..n as u32)
                .map(|t| {
                    let r0 = t as u64 * rows;
                    let s = (r0..r0 + rows).flat_map(move |i| {
                        (0..NNZ)
                            .flat_map(move |j| {
                                let e = i * NNZ + j;
                                [
                                    p.rd(vals + e * word),
                                    Op { addr: cols + e * 4, size: 4, write: false },
                                    p.rd(x + column(i, j) * word),
                                ]
                            })
                            .chain(once(p.wr(y + i * word)))
                    });
                    (t, Box::new(s) as Stream)
                })
                .collect(),
        );
        let update = Phase::new(
            (0..n as u32)
                .map(|t| {
                    let r0 = t as u64 * rows;
                    let s =
                        (r0..r0 + rows).flat_map(move |i| [p.rd(y + i * word), p.rd(x + i * word), p.wr(x + i * word)]);
                    (t, Box::new(s) as Stream)
                })
                .collect(),
        );
        [matvec, update]
    });
    Box::new(once(init).chain(iterations))
}

fn sor(p: GenParams) -> Phases {
    let cols = p.page_words(); // one row = one page, the unit of sharing as in seed 004
    let band = match p.footprint {
        Some(pages) => pages.max(2),
        None => (p.per_thread() / (cols * 6 * 4)).max(2),
    };
    let word = p.word;
    let n = p.threads as u64;
    let rows = n * band + 2; // plus the fixed top and bottom boundary rows
    let grid = region(0);
    let at = move |i: u64, j: u64| grid + (i * cols + j) * word;
    let own = move |t: u64| (1 + t * band)..(1 + (t + 1) * band);
    let init = Phase::new(
        (0..n)
            .map(|t| {
                let mut r = own(t);
                let first = if t == 0 { 0 } else { r.start };
                let last = if t == n - 1 { rows } else { r.end };
                r = first..last;
                (t as u32, Box::new(r.flat_map(move |i| (0..cols).map(move |j| p.wr(at(i, j))))) as Stream)
            })
            .collect(),
    );
    let sweeps = (0u64..).map(move |k| {
        let colour = k % 2;
        Phase::new(
            (0..n)
                .map(|t| {
                    let s = own(t).flat_map(move |i| {
                        (1..cols - 1).filter(move |j| (i + j) % 2 == colour).flat_map(move |j| {
                            [
                                p.rd(at(i - 1, j)),
                                p.rd(at(i + 1, j)),
                                p.rd(at(i, j - 1)),
                                p.rd(at(i, j + 1)),
                                p.rd(at(i, j)),
                                p.wr(at(i, j)),
                            ]
                        })
                    });
                    (t as u32, Box::new(s) as Stream)
                })
                .collect(),
        )
    });
    Box::new(once(init).chain(sweeps))
}

fn matmult(p: GenParams) -> Phases {
    let n_threads = p.threads as u64;
    // Without a footprint: 3 n^3 accesses per multiplication, one multiplication in ~90% of
    // the budget. With one: the three n x n matrices hold the threads' footprints.
    let n = match p.footprint_words() {
        Some(f) => ((f as f64 * n_threads as f64 / 3.0).sqrt() as u64).max(n_threads).max(2),
        None => (((p.accesses as f64 * 0.9) / 3.0).cbrt() as u64).max(n_threads).max(2),
    };
    let (a, b, c) = (region(0), region(1), region(2));
    let word = p.word;
    let el = move |m: u64, i: u64, j: u64| m + (i * n + j) * word;
    let rows = move |t: u64| (t * n / n_threads)..((t + 1) * n / n_threads);
    let init = Phase::new(
        (0..n_threads)
            .map(|t| {
                let r = rows(t);
                let s =
                    [a, b, c].into_iter().flat_map(move |m| write_range(&p, el(m, r.start, 0), (r.end - r.start) * n));
                (t as u32, Box::new(s) as Stream)
            })
            .collect(),
    );
    let multiply = (0u64..).map(move |_| {
        Phase::new(
            (0..n_threads)
                .map(|t| {
                    let s = rows(t).flat_map(move |i| {
                        (0..n).flat_map(move |k| {
                            once(p.rd(el(a, i, k))).chain(
                                (0..n).flat_map(move |j| [p.rd(el(b, k, j)), p.rd(el(c, i, j)), p.wr(el(c, i, j))]),
                            )
                        })
                    });
                    (t as u32, Box::new(s) as Stream)
                })
                .collect(),
        )
    });
    Box::new(once(init).chain(multiply))
}

fn producer_consumer(p: GenParams) -> Phases {
    // A pair holds a double buffer (2 halves), the producer's inputs and the consumer's
    // outputs: two halves per thread.
    let half = words_per_thread(&p, 16, 2);
    let n = p.threads;
    let word = p.word;
    let (buffers, outputs, inputs) = (region(0), region(1), region(2));
    let buf = move |pair: u64, h: u64| buffers + (pair * 2 + h) * half * word;
    let priv_base = move |m: u64, t: u32| m + t as u64 * half * word;
    let is_producer = move |t: u32| t.is_multiple_of(2);
    let init = Phase::new(
        (0..n)
            .map(|t| {
                let pair = t as u64 / 2;
                let s: Stream = if is_producer(t) {
                    Box::new(write_range(&p, buf(pair, 0), 2 * half).chain(write_range(&p, priv_base(inputs, t), half)))
                } else {
                    Box::new(write_range(&p, priv_base(outputs, t), half))
                };
                (t, s)
            })
            .collect(),
    );
    let rounds = (0u64..).map(move |r| {
        Phase::new(
            (0..n)
                .map(|t| {
                    let pair = t as u64 / 2;
                    let alone = is_producer(t) && t + 1 == n;
                    let produce = move |h: u64| {
                        (0..half)
                            .flat_map(move |i| [p.rd(priv_base(inputs, t) + i * word), p.wr(buf(pair, h) + i * word)])
                    };
                    let s: Stream =
                        if alone {
                            Box::new(produce(r % 2).chain((0..half).map(move |i| p.rd(buf(pair, r % 2) + i * word))))
                        } else if is_producer(t) {
                            Box::new(produce(r % 2))
                        } else {
                            let h = (r + 1) % 2;
                            Box::new((0..half).flat_map(move |i| {
                                [p.rd(buf(pair, h) + i * word), p.wr(priv_base(outputs, t) + i * word)]
                            }))
                        };
                    (t, s)
                })
                .collect(),
        )
    });
    Box::new(once(init).chain(rounds))
}

fn migratory(p: GenParams) -> Phases {
    let n = p.threads as u64;
    let objects = 2 * n;
    let size = words_per_thread(&p, 2 * 2 * 8, 2);
    let word = p.word;
    let obj = move |o: u64| region(0) + o * size * word;
    // Phase k: object o is handled by thread (o + k) mod n; phase 0 is its owner's initialisation.
    let holder_objects = move |t: u64, k: u64| (0..objects).filter(move |o| (o + k) % n == t);
    let init = Phase::new(
        (0..n)
            .map(|t| {
                (t as u32, Box::new(holder_objects(t, 0).flat_map(move |o| write_range(&p, obj(o), size))) as Stream)
            })
            .collect(),
    );
    let hand_offs = (1u64..).map(move |k| {
        Phase::new(
            (0..n)
                .map(|t| {
                    let s = holder_objects(t, k).flat_map(move |o| {
                        (0..size).flat_map(move |i| [p.rd(obj(o) + i * word), p.wr(obj(o) + i * word)])
                    });
                    (t as u32, Box::new(s) as Stream)
                })
                .collect(),
        )
    });
    Box::new(once(init).chain(hand_offs))
}

/// One lookup in this many writes the table instead of reading it.
pub const READ_MOSTLY_WRITE_EVERY: u32 = 1000;

fn read_mostly(p: GenParams) -> Phases {
    let n = p.threads as u64;
    // With a footprint, half of each thread's pages are its share of the table.
    let table = match p.footprint_words() {
        Some(f) => (f / 2 * n).max(4 * p.page_words()),
        None => (p.accesses / 16).clamp(4 * p.page_words(), 1024 * p.page_words()),
    };
    let table_words = round_up(table, n * p.page_words());
    let per = table_words / n;
    let results = words_per_thread(&p, 2 * 8, 2);
    let word = p.word;
    let (table, out) = (region(0), region(1));
    let init = Phase::new(
        (0..n)
            .map(|t| {
                (
                    t as u32,
                    Box::new(write_range(&p, table + t * per * word, per).chain(write_range(
                        &p,
                        out + t * results * word,
                        results,
                    ))) as Stream,
                )
            })
            .collect(),
    );
    let lookups = (1u64..).map(move |k| {
        Phase::new(
            (0..n as u32)
                .map(|t| {
                    let s = random_stream(&p, t, k, move |mut rng| {
                        (0..results).flat_map(move |i| {
                            let e = table + rng.gen_range(0..table_words) * word;
                            let lookup = if rng.gen_ratio(1, READ_MOSTLY_WRITE_EVERY) { p.wr(e) } else { p.rd(e) };
                            [lookup, p.wr(out + (t as u64 * results + i) * word)]
                        })
                    });
                    (t, s)
                })
                .collect(),
        )
    });
    Box::new(once(init).chain(lookups))
}

/// Grid levels of the phase-change pattern, coarsest first; each is 8x the previous.
pub const PHASE_LEVELS: u32 = 3;

fn phase_change(p: GenParams) -> Phases {
    let n = p.threads as u64;
    // The finest level (coarse x 64 words) splits into whole pages per thread; coarser levels
    // do not, which is what moves page ownership from phase to phase.
    // With a footprint, the finest level's two arrays (64 x coarse words each) hold it.
    let coarse_words = match p.footprint_words() {
        Some(f) => f * n / 128,
        None => p.accesses / (24 * 64),
    };
    let coarse = round_up(coarse_words.max(8 * n), n * (p.page_words() / 64).max(1));
    let word = p.word;
    let size = move |l: u32| coarse * 8u64.pow(l);
    let finest = PHASE_LEVELS - 1;
    let (u, r) = (region(0), region(1));
    let block = move |t: u64, l: u32| (t * size(l) / n)..((t + 1) * size(l) / n);
    let init = Phase::new(
        (0..n)
            .map(|t| {
                let b = block(t, finest);
                let len = b.end - b.start;
                (
                    t as u32,
                    Box::new(write_range(&p, u + b.start * word, len).chain(write_range(&p, r + b.start * word, len)))
                        as Stream,
                )
            })
            .collect(),
    );
    // V-cycles: finest -> coarsest -> finest, one phase per visited level.
    let down_up: Vec<u32> = (0..finest).rev().chain(1..=finest).collect();
    let schedule = (0u64..).flat_map(move |_| down_up.clone()).enumerate();
    let phases = schedule.map(move |(number, level)| {
        let s_l = size(level);
        let mut phase = Phase::new(
            (0..n)
                .map(|t| {
                    let b = block(t, level);
                    let relax = move |_| {
                        b.clone().flat_map(move |i| {
                            let left = (i > 0).then(|| p.rd(u + (i - 1) * word));
                            let right = (i + 1 < s_l).then(|| p.rd(u + (i + 1) * word));
                            left.into_iter().chain(right).chain([
                                p.rd(u + i * word),
                                p.rd(r + i * word),
                                p.wr(u + i * word),
                            ])
                        })
                    };
                    (t as u32, Box::new((0..2).flat_map(relax)) as Stream)
                })
                .collect(),
        );
        phase.phase_change = Some((number as u64 + 1, format!("level-{level}")));
        phase
    });
    Box::new(once(init).chain(phases))
}

fn init_then_compute(p: GenParams) -> Phases {
    let w = words_per_thread(&p, 12, 1);
    let n = p.threads as u64;
    let base = region(0);
    let word = p.word;
    let init = Phase::new(vec![(0, write_range(&p, base, n * w))]);
    let compute = (0u64..).map(move |k| {
        let mut phase = Phase::new(
            (0..n)
                .map(|t| {
                    let b = base + t * w * word;
                    let s = (0..w)
                        .flat_map(move |i| once(p.rd(b + i * word)).chain((i % 2 == 0).then(|| p.wr(b + i * word))));
                    (t as u32, Box::new(s) as Stream)
                })
                .collect(),
        );
        phase.init_done_before = k == 0;
        phase
    });
    Box::new(once(init).chain(compute))
}

fn random(p: GenParams) -> Phases {
    let n = p.threads as u64;
    let line_words = p.line_size / p.word;
    let heap_words = match p.footprint_words() {
        Some(f) => f * n,
        None => (p.accesses / 32).max(n * p.page_words()),
    };
    let lines = round_up(heap_words / line_words, n);
    let per = lines / n;
    let heap = region(0);
    let init = Phase::new(
        (0..n).map(|t| (t as u32, write_range(&p, heap + t * per * p.line_size, per * line_words))).collect(),
    );
    // Accesses per thread and phase: its share of the heap's words once (or of the budget).
    let chunk = match p.footprint_words() {
        Some(f) => f.max(1024),
        None => (p.per_thread() / 4).max(1024),
    };
    let bursts = (1u64..).map(move |k| {
        Phase::new(
            (0..n as u32)
                .map(|t| {
                    let s = random_stream(&p, t, k, move |mut rng| {
                        std::iter::repeat_with(move || {
                            let line = heap + rng.gen_range(0..lines) * p.line_size;
                            let words = rng.gen_range(1..=line_words);
                            let writes: Vec<bool> = (0..words).map(|_| rng.gen_ratio(1, 4)).collect();
                            (0..words).map(move |i| Op {
                                addr: line + i * p.word,
                                size: p.word as u32,
                                write: writes[i as usize],
                            })
                        })
                        .flatten()
                        .take(chunk as usize)
                    });
                    (t, s)
                })
                .collect(),
        )
    });
    Box::new(once(init).chain(bursts))
}
