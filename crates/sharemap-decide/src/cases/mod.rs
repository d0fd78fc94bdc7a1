//! The shared case suite: `cases.toml`, one file of small traces with the decisions a
//! mechanism must make on them, which every layer that models the mechanism runs (`place`'s
//! policies, `simulate`'s mechanisms, `run`'s plans). Each layer turns a case into its own
//! input, drives its own clock, and reports what it decided as [`Decision`]s; [`Case::check`]
//! compares them with the case's expectation.
//!
//! Clocks differ between layers (references, simulated nanoseconds), so each case picks
//! periods that make its decisions independent of them: periods so short that every access
//! starts a new one, or one period boundary inside a long stretch of private accesses.

use serde::Deserialize;
use std::collections::BTreeMap;

pub mod sharing;

/// The suite's file, embedded.
pub const SUITE: &str = include_str!("../../cases.toml");

/// Every case's addresses are in pages of this size.
pub const PAGE_SIZE: u64 = 4096;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    case: Vec<Raw>,
    #[serde(default)]
    sharing: Vec<sharing::Raw>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    name: String,
    mechanism: String,
    machine: String,
    nodes: Vec<usize>,
    layers: Vec<String>,
    #[serde(default)]
    order: Order,
    #[serde(default)]
    what: What,
    accesses: String,
    expect: Vec<String>,
}

/// Whether the layers must agree on the order of decisions across pages, or only page by page.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Order {
    #[default]
    Global,
    Page,
}

/// What the expectation lists: moves made during the run, or where pages start (a profile's
/// placement, decided before the run).
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum What {
    #[default]
    Moves,
    Homes,
}

/// One access of a case.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Access {
    pub thread: u32,
    pub write: bool,
    pub page: u64,
}

impl Access {
    /// The byte address of the `i`-th access: its page, at a line that changes with `i`.
    pub fn addr(&self, i: usize) -> u64 {
        self.page * PAGE_SIZE + 64 * (i as u64 % (PAGE_SIZE / 64))
    }
}

/// A decision a layer made: at which access of the trace (the position of the access that
/// led to it, 0 for homes chosen before the run), for which page, the nodes it then lives
/// on (bit n: node n).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    pub at: u64,
    pub page: u64,
    pub nodes: u128,
}

#[derive(Clone, Debug)]
pub struct Case {
    pub name: String,
    /// The mechanism's spec, as each layer's registry takes it.
    pub mechanism: String,
    /// The machine (an hwloc synthetic description).
    pub machine: String,
    /// The node each thread runs on where the OS (the `os` model) places the threads: the
    /// layers check this premise before running the case.
    pub nodes: Vec<usize>,
    /// The layers that model this mechanism: place, simulate, run.
    pub layers: Vec<String>,
    pub order: Order,
    pub what: What,
    pub accesses: Vec<Access>,
    /// (page, nodes) in order.
    pub expect: Vec<(u64, u128)>,
}

fn suite() -> File {
    toml::from_str(SUITE).unwrap_or_else(|e| panic!("cases.toml: {e}"))
}

/// Every case of the suite; panics on a malformed suite (it is part of the source).
pub fn all() -> Vec<Case> {
    suite().case.into_iter().map(|raw| parse(raw).unwrap_or_else(|e| panic!("cases.toml: {e}"))).collect()
}

/// The cases a layer runs.
pub fn for_layer(layer: &str) -> Vec<Case> {
    all().into_iter().filter(|c| c.layers.iter().any(|l| l == layer)).collect()
}

/// Access lines "THREAD r|w WHERE [xCOUNT]" (WHERE a page or a word), expanded.
fn access_lines(name: &str, text: &str, unit: &str) -> Result<Vec<Access>, String> {
    let mut accesses = Vec::new();
    for (i, line) in text.lines().map(str::trim).filter(|l| !l.is_empty()).enumerate() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let bad =
            || format!("case '{name}', access line {}: expected 'THREAD r|w {unit} [xCOUNT]', got '{line}'", i + 1);
        let (thread, kind, page, repeat) = match words[..] {
            [t, k, p] => (t, k, p, 1),
            [t, k, p, r] => (t, k, p, r.strip_prefix('x').and_then(|r| r.parse().ok()).ok_or_else(bad)?),
            _ => return Err(bad()),
        };
        for _ in 0..repeat {
            accesses.push(Access {
                thread: thread.parse().map_err(|_| bad())?,
                write: match kind {
                    "r" => false,
                    "w" => true,
                    _ => return Err(bad()),
                },
                page: page.parse().map_err(|_| bad())?,
            });
        }
    }
    Ok(accesses)
}

fn parse(raw: Raw) -> Result<Case, String> {
    let name = raw.name;
    let accesses = access_lines(&name, &raw.accesses, "PAGE")?;
    let expect = raw
        .expect
        .iter()
        .map(|e| expectation(e).ok_or_else(|| format!("case '{name}': bad expectation '{e}' (PAGE -> NODE[+NODE...])")))
        .collect::<Result<_, _>>()?;
    for layer in &raw.layers {
        if !["place", "simulate", "run"].contains(&layer.as_str()) {
            return Err(format!("case '{name}': unknown layer '{layer}'"));
        }
    }
    Ok(Case {
        name,
        mechanism: raw.mechanism,
        machine: raw.machine,
        nodes: raw.nodes,
        layers: raw.layers,
        order: raw.order,
        what: raw.what,
        accesses,
        expect,
    })
}

/// "3 -> 1" or "3 -> 0+1".
fn expectation(text: &str) -> Option<(u64, u128)> {
    let (page, nodes) = text.split_once("->")?;
    let mut set = 0u128;
    for n in nodes.split('+') {
        let n: u32 = n.trim().parse().ok()?;
        set |= 1u128.checked_shl(n)?;
    }
    Some((page.trim().parse().ok()?, set))
}

fn show(list: &[(u64, u128)]) -> String {
    let one = |&(page, set): &(u64, u128)| {
        let nodes: Vec<String> = (0..128).filter(|n| set >> n & 1 == 1).map(|n: u32| n.to_string()).collect();
        format!("{page} -> {}", nodes.join("+"))
    };
    format!("[{}]", list.iter().map(one).collect::<Vec<_>>().join(", "))
}

impl Case {
    /// The case's accesses as a trace's, every layer's input (8 bytes each).
    pub fn trace_accesses(&self) -> Vec<sharemap_trace::Access> {
        use sharemap_trace::Access as Traced;
        let access = |(i, a): (usize, &Access)| {
            if a.write { Traced::write(a.thread, a.addr(i), 8) } else { Traced::read(a.thread, a.addr(i), 8) }
        };
        self.accesses.iter().enumerate().map(access).collect()
    }

    /// The number of threads.
    pub fn threads(&self) -> usize {
        self.accesses.iter().map(|a| a.thread as usize + 1).max().unwrap_or(0)
    }

    /// Compares what `layer` decided with the expectation: for moves, only decisions that
    /// change where a page lives count, in the order of their positions (stable, so a layer
    /// deciding several pages at one access keeps its own order); with `order = "page"`,
    /// each page's sequence on its own. For homes, each page's first placement.
    pub fn check(&self, layer: &str, decisions: &[Decision]) -> Result<(), String> {
        let got: Vec<(u64, u128)> = match self.what {
            What::Homes => {
                let mut first = BTreeMap::new();
                for d in decisions {
                    first.entry(d.page).or_insert(d.nodes);
                }
                first.into_iter().collect()
            }
            What::Moves => {
                let mut sorted = decisions.to_vec();
                sorted.sort_by_key(|d| d.at);
                let mut now: BTreeMap<u64, u128> = BTreeMap::new();
                let mut moves = Vec::new();
                for d in sorted {
                    let before = now.insert(d.page, d.nodes);
                    // A page's first placement is where it starts, not a move.
                    if before.is_some_and(|b| b != d.nodes) {
                        moves.push((d.page, d.nodes));
                    }
                }
                moves
            }
        };
        let (got, want) = match self.order {
            Order::Global => (got, self.expect.clone()),
            Order::Page => {
                let by_page = |v: &[(u64, u128)]| {
                    let mut v = v.to_vec();
                    v.sort_by_key(|m| m.0);
                    v
                };
                (by_page(&got), by_page(&self.expect))
            }
        };
        if got == want {
            Ok(())
        } else {
            Err(format!(
                "case '{}' ({}), layer {layer}: decided {}, expected {}",
                self.name,
                self.mechanism,
                show(&got),
                show(&want)
            ))
        }
    }
    /// For a layer that applies a mechanism's moves as a plan from the start (`run` replays
    /// the simulated mechanism): each page the expectation moves, on the node of its last
    /// move (a page with copies on its lowest node), against the plan's (page, node) list.
    pub fn check_last_homes(&self, layer: &str, plan: &[(u64, usize)]) -> Result<(), String> {
        assert_eq!(self.what, What::Moves, "{}: only moves reduce to last homes", self.name);
        let mut want: BTreeMap<u64, u128> = BTreeMap::new();
        for &(page, nodes) in &self.expect {
            want.insert(page, 1u128 << nodes.trailing_zeros());
        }
        let got: BTreeMap<u64, u128> = plan.iter().map(|&(page, node)| (page, 1u128 << node)).collect();
        if got == want {
            Ok(())
        } else {
            let list = |m: &BTreeMap<u64, u128>| show(&m.iter().map(|(&p, &n)| (p, n)).collect::<Vec<_>>());
            Err(format!(
                "case '{}' ({}), layer {layer}: planned {}, expected the last moves {}",
                self.name,
                self.mechanism,
                list(&got),
                list(&want)
            ))
        }
    }

    /// For a layer that replays a mechanism's moves in order on single nodes (`run`'s
    /// timeline): its (page, node) moves against the expectation's, a page with copies
    /// taken on its lowest node.
    pub fn check_replayed_moves(&self, layer: &str, moves: &[(u64, usize)]) -> Result<(), String> {
        assert_eq!(self.what, What::Moves, "{}: only moves are replayed", self.name);
        let lowest = |v: &[(u64, u128)]| -> Vec<(u64, u128)> {
            let mut v: Vec<(u64, u128)> = v.iter().map(|&(p, n)| (p, 1u128 << n.trailing_zeros())).collect();
            if self.order == Order::Page {
                v.sort_by_key(|m| m.0);
            }
            v
        };
        let got: Vec<(u64, u128)> = moves.iter().map(|&(p, n)| (p, 1u128 << n)).collect();
        let (got, want) = (lowest(&got), lowest(&self.expect));
        if got == want {
            Ok(())
        } else {
            Err(format!(
                "case '{}' ({}), layer {layer}: replayed {}, expected (lowest nodes) {}",
                self.name,
                self.mechanism,
                show(&got),
                show(&want)
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_suite_reads_and_every_case_names_a_layer() {
        let cases = super::all();
        assert!(cases.len() >= 5);
        for c in &cases {
            assert!(!c.layers.is_empty() && !c.accesses.is_empty(), "{}", c.name);
            assert_eq!(c.nodes.len(), c.threads(), "{}: one node per thread", c.name);
        }
    }

    #[test]
    fn moves_ignore_first_placements_and_decisions_that_change_nothing() {
        use super::Decision;
        let case = super::Case {
            name: "t".into(),
            mechanism: "m".into(),
            machine: "pu:1".into(),
            nodes: vec![0],
            layers: vec!["place".into()],
            order: super::Order::Global,
            what: super::What::Moves,
            accesses: vec![],
            expect: vec![(1, 0b10)],
        };
        let d = |at, page, nodes| Decision { at, page, nodes };
        assert!(case.check("place", &[d(0, 1, 1), d(3, 1, 1), d(5, 1, 2)]).is_ok());
        assert!(case.check("place", &[d(0, 1, 2)]).is_err());
    }
}
