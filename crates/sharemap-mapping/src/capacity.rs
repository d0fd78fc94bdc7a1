//! Cache capacity in thread mapping: with fewer threads than cores, a mapping may pack the
//! threads into part of the machine, and a pair-cost objective always prefers that (sharing
//! is cheapest close by). Packing pays only while the data the packed threads use fits in the
//! caches they then share: 16 threads of 3 MiB each packed into two 18 MiB L3s miss where the
//! same threads spread over four hit, and leave two memory controllers idle. So a mapping
//! first asks how many last-level caches the data needs (spread), then groups the threads
//! by sharing within that many (group).
//!
//! The data is a [`Demand`]: each thread's private bytes and the bytes several threads share
//! (counted once in every cache, since each caches its own copy). Where it comes from is the
//! caller's: a trace's page usage, a profile, or what an online mechanism can know (the
//! process's resident pages).

use serde::Serialize;
use sharemap_machine::Machine;
use sharemap_machine::topology::ObjType;

/// The data a program's threads use.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Demand {
    /// Bytes of the pages only thread t touches.
    pub private_bytes: Vec<u64>,
    /// Bytes of the pages several threads touch.
    pub shared_bytes: u64,
}

impl Demand {
    /// From each page's accesses per thread (a page touched by one thread is its private
    /// data), pages of `page_size` bytes.
    pub fn from_pages<'a>(threads: usize, page_size: u64, pages: impl IntoIterator<Item = &'a [u64]>) -> Demand {
        let mut d = Demand { private_bytes: vec![0; threads], shared_bytes: 0 };
        for per_thread in pages {
            let mut users = per_thread.iter().enumerate().filter(|(_, n)| **n > 0);
            match (users.next(), users.next()) {
                (Some((t, _)), None) if t < threads => d.private_bytes[t] += page_size,
                (Some(_), _) => d.shared_bytes += page_size,
                (None, _) => {}
            }
        }
        d
    }

    /// From a trace's page usage.
    pub fn from_usage(usage: &sharemap_core::PageUsage, threads: usize) -> Demand {
        Demand::from_pages(threads, usage.page_size, usage.sorted().into_iter().map(|(_, e)| &e.accesses[..]))
    }

    /// `total` bytes spread evenly over `threads` threads, none known to be shared: what an
    /// operating system knows of a process (its resident set).
    pub fn uniform(threads: usize, total: u64) -> Demand {
        let each = total / threads.max(1) as u64;
        Demand { private_bytes: vec![each; threads], shared_bytes: 0 }
    }

    pub fn threads(&self) -> usize {
        self.private_bytes.len()
    }

    pub fn total(&self) -> u64 {
        self.private_bytes.iter().sum::<u64>() + self.shared_bytes
    }

    /// The bytes a cache holding these threads' data needs: their private data and one copy
    /// of the shared data.
    pub fn of_group(&self, threads: impl IntoIterator<Item = usize>) -> u64 {
        let private: u64 = threads.into_iter().filter_map(|t| self.private_bytes.get(t)).sum();
        private + self.shared_bytes
    }
}

/// The machine's last-level caches: the units a mapping spreads its threads over.
#[derive(Clone, Debug)]
pub struct Units {
    /// The cache's hwloc name (`L3Cache`).
    pub level: String,
    /// Bytes of one cache.
    pub capacity: u64,
    /// Each cache's PUs, one per core first (cores in logical order), then the cores' second
    /// PUs, and so on: a group of threads up to the cores' count gets a core each.
    pub pus: Vec<Vec<usize>>,
    /// Cores under each cache.
    pub cores: Vec<usize>,
}

impl Units {
    /// The last-level caches of `machine`, when it describes caches shared by several cores
    /// and has more than one of them (otherwise there is nothing to spread over).
    pub fn of(machine: &Machine) -> Option<Units> {
        let objs = &machine.tree.objs;
        let llc = machine
            .levels
            .iter()
            .filter_map(|l| match l.ty {
                ObjType::Cache { level, kind } if kind != sharemap_machine::topology::CacheKind::Instruction => {
                    Some((level, l))
                }
                _ => None,
            })
            .max_by_key(|(level, _)| *level)?
            .1;
        if llc.objs.len() < 2 {
            return None;
        }
        let capacity = objs[llc.objs[0]].cache_size.unwrap_or_else(|| match llc.ty {
            ObjType::Cache { level, .. } => ObjType::default_cache_size(level),
            _ => 0,
        });
        let unit_of = |pu: usize| machine.tree.ancestors(machine.pus[pu]).into_iter().find(|o| llc.objs.contains(o));
        let core_of = machine.core_of_pu();
        let mut by_unit: Vec<Vec<(usize, usize, usize)>> = vec![Vec::new(); llc.objs.len()];
        let mut rank_in_core = vec![0usize; core_of.iter().max().map_or(0, |&c| c + 1)];
        for (pu, &core) in core_of.iter().enumerate() {
            let u = unit_of(pu).and_then(|o| llc.objs.iter().position(|&x| x == o))?;
            by_unit[u].push((rank_in_core[core], core, pu));
            rank_in_core[core] += 1;
        }
        let mut cores = Vec::new();
        let pus = by_unit
            .into_iter()
            .map(|mut v| {
                v.sort_unstable();
                let mut c: Vec<usize> = v.iter().map(|x| x.1).collect();
                c.sort_unstable();
                c.dedup();
                cores.push(c.len());
                v.into_iter().map(|x| x.2).collect()
            })
            .collect();
        if cores.iter().all(|&c| c < 2) {
            return None;
        }
        Some(Units { level: machine.tree.objs[llc.objs[0]].ty.hwloc_name(), capacity, pus, cores })
    }

    pub fn count(&self) -> usize {
        self.pus.len()
    }

    /// Each PU's unit.
    pub fn unit_of_pu(&self, pus: usize) -> Vec<usize> {
        let mut of = vec![usize::MAX; pus];
        for (u, list) in self.pus.iter().enumerate() {
            for &p in list {
                of[p] = u;
            }
        }
        of
    }
}

/// How many last-level caches a mapping uses, and why.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Spread {
    /// Caches the threads are spread over, of `of`.
    pub units: usize,
    pub of: usize,
    pub level: String,
    pub capacity: u64,
    /// The data, all threads together (shared data once).
    pub data: u64,
    /// The most data one of the `units` caches then holds.
    pub per_unit: u64,
    /// Whether that fits its cache (at most `FILL` of it).
    pub fits: bool,
    /// In one line: the choice and the figures it rests on.
    pub why: String,
}

/// The share of a cache that data may fill and still be held: set conflicts, and the code and
/// other data the cache also holds, make an LRU cache swept by a working set near its size
/// miss on the sets that overflow.
pub const FILL: f64 = 0.75;

/// The fewest last-level caches that hold the data of a balanced split of the threads (each
/// filling at most `FILL` of its cache, each thread a core of its own), or all of them when
/// none does: past the caches' capacity every cache and memory controller helps.
pub fn spread(demand: &Demand, units: &Units, threads: usize) -> Spread {
    let cores_per_unit = units.cores.iter().copied().min().unwrap_or(1).max(1);
    let pus_per_unit = units.pus.iter().map(|p| p.len()).min().unwrap_or(1).max(1);
    let per_core = if threads <= cores_per_unit * units.count() { cores_per_unit } else { pus_per_unit };
    let least = threads.div_ceil(per_core).clamp(1, units.count());
    let most_in = |k: usize| -> u64 { chunks(threads, k).map(|range| demand.of_group(range)).max().unwrap_or(0) };
    let mb = |b: u64| b as f64 / (1u64 << 20) as f64;
    let data = demand.total();
    let room = (units.capacity as f64 * FILL) as u64;
    let chosen = (least..=units.count()).find(|&k| most_in(k) <= room);
    let (units_used, fits) = match chosen {
        Some(k) => (k, true),
        None => (units.count(), false),
    };
    let per_unit = most_in(units_used);
    let name = units.level.trim_end_matches("Cache");
    let why = if fits && units_used == least {
        format!(
            "{threads} threads on {units_used} of {} {name}s: their {:.1} MiB of data fits ({:.1} MiB at most in one {name} of {:.1} MiB, 3/4 of it usable), so they are grouped by sharing",
            units.count(),
            mb(data),
            mb(per_unit),
            mb(units.capacity)
        )
    } else if fits {
        format!(
            "{threads} threads spread over {units_used} of {} {name}s: their {:.1} MiB of data needs that many ({:.1} MiB at most in one {name} of {:.1} MiB, 3/4 of it usable; with {} the fullest would hold {:.1} MiB), then grouped by sharing within them",
            units.count(),
            mb(data),
            mb(per_unit),
            mb(units.capacity),
            units_used - 1,
            mb(most_in(units_used - 1))
        )
    } else {
        format!(
            "{threads} threads spread over all {} {name}s: their {:.1} MiB of data does not fit even there ({:.1} MiB in one {name} of {:.1} MiB, more than the 3/4 of it usable), so every cache and memory controller helps; grouped by sharing within them",
            units.count(),
            mb(data),
            mb(per_unit),
            mb(units.capacity)
        )
    };
    Spread {
        units: units_used,
        of: units.count(),
        level: units.level.clone(),
        capacity: units.capacity,
        data,
        per_unit,
        fits,
        why,
    }
}

/// Threads 0..n in k runs whose lengths differ by at most one.
fn chunks(n: usize, k: usize) -> impl Iterator<Item = std::ops::Range<usize>> {
    let k = k.max(1);
    (0..k).map(move |i| (i * n / k)..((i + 1) * n / k))
}

/// `map` moved onto exactly `k` units with balanced thread counts, keeping its grouping: the
/// threads in the order of their PUs (the machine's depth-first order, so a group the mapping
/// put under one cache stays contiguous) are cut into k runs, each given to one unit (the
/// units `map` uses most first, then in logical order), a core each where it can.
pub fn balance(map: &[usize], units: &Units, k: usize, pus: usize) -> Vec<usize> {
    let n = map.len();
    let k = k.clamp(1, units.count());
    let unit_of = units.unit_of_pu(pus);
    let mut used = vec![0usize; units.count()];
    for &pu in map {
        if let Some(u) = unit_of.get(pu).filter(|&&u| u != usize::MAX) {
            used[*u] += 1;
        }
    }
    let mut chosen: Vec<usize> = (0..units.count()).collect();
    chosen.sort_by_key(|&u| (std::cmp::Reverse(used[u]), u));
    chosen.truncate(k);
    chosen.sort_unstable();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&t| (map[t], t));
    let mut out = vec![0usize; n];
    for (run, &unit) in chunks(n, k).zip(&chosen) {
        let slots = &units.pus[unit];
        for (j, &t) in order[run].iter().enumerate() {
            out[t] = slots[j % slots.len()];
        }
    }
    out
}

/// One cache level under a mapping: how full its fullest cache is.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LevelLoad {
    pub level: String,
    pub capacity: u64,
    /// Caches of this level holding some thread, of all of them.
    pub used: usize,
    pub of: usize,
    /// The most data one of them holds (its threads' private data and the shared data).
    pub most: u64,
}

/// For every cache level of `machine` (data or unified), the data the fullest cache holds
/// under `map`.
pub fn loads(map: &[usize], machine: &Machine, demand: &Demand) -> Vec<LevelLoad> {
    let objs = &machine.tree.objs;
    let mut out = Vec::new();
    for level in &machine.levels {
        let ObjType::Cache { level: l, kind } = level.ty else { continue };
        if kind == sharemap_machine::topology::CacheKind::Instruction {
            continue;
        }
        let mut groups: Vec<Vec<usize>> = vec![Vec::new(); level.objs.len()];
        for (t, &pu) in map.iter().enumerate() {
            let Some(&obj) = machine.pus.get(pu) else { continue };
            if let Some(i) =
                machine.tree.ancestors(obj).into_iter().find_map(|o| level.objs.iter().position(|&x| x == o))
            {
                groups[i].push(t);
            }
        }
        let used = groups.iter().filter(|g| !g.is_empty()).count();
        let most =
            groups.iter().filter(|g| !g.is_empty()).map(|g| demand.of_group(g.iter().copied())).max().unwrap_or(0);
        let capacity = level.objs.first().and_then(|&o| objs[o].cache_size).unwrap_or(ObjType::default_cache_size(l));
        out.push(LevelLoad { level: level.ty.hwloc_name(), capacity, used, of: level.objs.len(), most });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn x7550() -> Machine {
        Machine::from_spec("sammu").unwrap()
    }

    #[test]
    fn units_are_the_last_level_caches_one_core_each_first() {
        let m = x7550();
        let u = Units::of(&m).unwrap();
        assert_eq!((u.level.as_str(), u.count(), u.capacity), ("L3Cache", 4, 18 << 20));
        assert_eq!(u.cores, vec![8; 4]);
        // PUs 0 and 1 are one core's two threads: the first eight slots are eight cores.
        let core_of = m.core_of_pu();
        let first: Vec<usize> = u.pus[0][..8].iter().map(|&p| core_of[p]).collect();
        assert_eq!(first, (0..8).collect::<Vec<_>>());
        assert_eq!(u.pus[0].len(), 16);
        // No shared cache to spread over: one package, or no caches described.
        assert!(Units::of(&Machine::from_spec("pack:1 l3:1 core:4 pu:1").unwrap()).is_none());
        assert!(Units::of(&Machine::from_spec("pack:4 numa:1 core:4 pu:1").unwrap()).is_none());
    }

    /// 3/4 of an 18 MiB L3 is 13.5 MiB. 16 threads of 2.9 MiB: two L3s would hold 22.9 MiB
    /// each, three 17.2 (6 threads in one), four 11.5: so four. 12 threads of 3 MiB: two would
    /// hold 18, three 12: so three. Of 0.5 MiB each: two hold 4 MiB, and two is the least
    /// that gives 16 threads a core each. Of 6 MiB: none holds its share, so all four.
    #[test]
    fn the_fewest_caches_that_hold_the_data() {
        let u = Units::of(&x7550()).unwrap();
        let mib = 1u64 << 20;
        let s = spread(&Demand::uniform(16, 16 * 2936 * 1024), &u, 16);
        assert_eq!((s.units, s.fits), (4, true), "{}", s.why);
        let s = spread(&Demand::uniform(12, 12 * 3 * mib), &u, 12);
        assert_eq!((s.units, s.fits), (3, true), "{}", s.why);
        assert!(s.why.contains("spread over 3 of 4 L3s"), "{}", s.why);
        let small = spread(&Demand::uniform(16, 16 * mib / 2), &u, 16);
        assert_eq!((small.units, small.fits), (2, true), "{}", small.why);
        let big = spread(&Demand::uniform(16, 16 * 6 * mib), &u, 16);
        assert_eq!((big.units, big.fits), (4, false), "{}", big.why);
        // Shared data counts in every cache: 4 threads of 1 MiB with 12 MiB shared fit in
        // one L3 only by twos (14 MiB in one would not).
        let shared = Demand { private_bytes: vec![mib; 4], shared_bytes: 12 * mib };
        assert_eq!(spread(&shared, &u, 4).units, 4);
        let shared = Demand { private_bytes: vec![mib / 2; 4], shared_bytes: 12 * mib };
        assert_eq!(spread(&shared, &u, 4).units, 2);
        // Data shared by all: one copy per cache, whatever the split.
        let d = Demand::from_pages(3, 4096, [&[1u64, 0, 0][..], &[0, 2, 0], &[1, 1, 1], &[0, 0, 0]]);
        assert_eq!(d, Demand { private_bytes: vec![4096, 4096, 0], shared_bytes: 4096 });
    }

    /// Balancing keeps the threads a mapping grouped under one cache together and gives each
    /// cache n/k of them, a core each.
    #[test]
    fn balancing_keeps_groups_and_evens_the_counts() {
        let m = x7550();
        let u = Units::of(&m).unwrap();
        // Threads 0-7 on package 0's cores, 8-15 on package 1's (one PU per core).
        let packed: Vec<usize> = (0..16).map(|t| u.pus[t / 8][t % 8]).collect();
        let spread = balance(&packed, &u, 4, m.pu_count());
        let unit_of = u.unit_of_pu(m.pu_count());
        let units: Vec<usize> = spread.iter().map(|&p| unit_of[p]).collect();
        assert_eq!(units, vec![0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3]);
        let core_of = m.core_of_pu();
        let mut cores: Vec<usize> = spread.iter().map(|&p| core_of[p]).collect();
        cores.sort_unstable();
        cores.dedup();
        assert_eq!(cores.len(), 16, "a core each");
        // Loads: each L3 then holds 4 threads' data.
        let d = Demand::uniform(16, 16 << 20);
        let l3 = loads(&spread, &m, &d).into_iter().find(|l| l.level == "L3Cache").unwrap();
        assert_eq!((l3.used, l3.of, l3.most), (4, 4, 4 << 20));
        let l3 = loads(&packed, &m, &d).into_iter().find(|l| l.level == "L3Cache").unwrap();
        assert_eq!((l3.used, l3.most), (2, 8 << 20));
    }
}
