//! The decision cores of the data-mapping mechanisms that sharemap models in more than one
//! layer. Each module holds one mechanism's rule (what it counts, when a page moves, to
//! where) and its parameter table; `place` (per page, time in references), `simulate` (per
//! access, simulated nanoseconds) and `run` (a recorded profile, a real host) drive the same
//! rule with their own clocks and costs. The shared case suite (`cases.toml`, read with the
//! `cases` feature) checks that the layers make the same decisions.

pub mod autopin;
pub mod cache;
pub mod carrefour;
#[cfg(feature = "cases")]
pub mod cases;
pub mod kmaf;
pub mod marathe;
pub mod numa_balancing;
pub mod sammu;
pub mod stmap;

/// The node with the largest count (ties: the lowest node); 0 without nodes.
pub fn most<T: Copy + Ord>(per_node: &[T]) -> usize {
    per_node.iter().enumerate().max_by_key(|&(n, c)| (*c, std::cmp::Reverse(n))).map_or(0, |(n, _)| n)
}

#[cfg(test)]
mod tests {
    #[test]
    fn most_takes_the_lowest_node_of_a_tie() {
        assert_eq!(super::most(&[3u32, 5, 5, 1]), 1);
        assert_eq!(super::most(&[0u64, 0]), 0);
        assert_eq!(super::most::<u32>(&[]), 0);
    }
}
