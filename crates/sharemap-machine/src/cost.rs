//! Seed 004's (Bolosky & Scott) cost parameters, in units of one local reference:
//! r = remote reference, R = page move between local memories, g = global-memory
//! reference, G = page move to or from global memory (g and G absent: no global memory).

use serde::Serialize;

/// Cost parameters that break the model's constraints.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum CostError {
    #[error("r must be > 1 (got {r})")]
    SmallR { r: f64 },
    #[error("R must be > 2r (got R={big_r}, r={r})")]
    SmallBigR { big_r: f64, r: f64 },
    #[error("g must be > 1 (got {g})")]
    SmallG { g: f64 },
    #[error("G must be > 2g (got G={big_g}, g={g})")]
    SmallBigG { big_g: f64, g: f64 },
    #[error("r must be >= g (got r={r}, g={g})")]
    RBelowG { r: f64, g: f64 },
    #[error("need G <= R <= 2G (got G={big_g}, R={big_r})")]
    MovesOutOfRange { big_g: f64, big_r: f64 },
    #[error("g and G go together: give both or neither")]
    GlobalHalf,
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct CostParams {
    pub r: f64,
    #[serde(rename = "R")]
    pub big_r: f64,
    pub g: Option<f64>,
    #[serde(rename = "G")]
    pub big_g: Option<f64>,
}

/// Overhead of a page move besides copying (fault, remap, shootdown): seed 004's constant.
pub const MOVE_OVERHEAD: f64 = 200.0;

/// Rounded to 9 decimals: a mean of distance ratios carries floating-point noise
/// (2.1000000000000005 for 2.1) that tables hide but JSON and CSV would print.
fn tidy(x: f64) -> f64 {
    (x * 1e9).round() / 1e9
}

impl CostParams {
    /// r, R, g, G rounded for reading (`r=1 R=3 g=... G=...`).
    pub fn label(&self) -> String {
        let n = |x: f64| format!("{}", (x * 1000.0).round() / 1000.0);
        match (self.g, self.big_g) {
            (Some(g), Some(gg)) => format!("r={} R={} g={} G={}", n(self.r), n(self.big_r), n(g), n(gg)),
            _ => format!("r={} R={} (no global memory)", n(self.r), n(self.big_r)),
        }
    }

    /// Default for a modern NUMA machine without global memory: r is the mean ratio of
    /// remote to local NUMA distance; a page move copies its cache lines at remote cost
    /// plus the fixed overhead.
    pub fn for_numa(remote_ratio: f64, page_size: u64, line_size: u64) -> Self {
        let r = tidy(remote_ratio.max(1.05));
        let lines = (page_size / line_size.max(1)).max(1) as f64;
        CostParams { r, big_r: tidy(lines * r + MOVE_OVERHEAD), g: None, big_g: None }
    }

    /// Seed 004's ACE-like machine: global memory g = 2, G = 2 x page words + 200, r = 5;
    /// a local-to-local move goes through global memory, R = 2G.
    pub fn ace(page_size: u64) -> Self {
        let words = (page_size / 4) as f64;
        let big_g = 2.0 * words + MOVE_OVERHEAD;
        CostParams { r: 5.0, big_r: 2.0 * big_g, g: Some(2.0), big_g: Some(big_g) }
    }

    /// Seed 004's Butterfly-like machine: no global memory, r = 15, R = 3s/4 + 200 (s in bytes).
    pub fn butterfly(page_size: u64) -> Self {
        CostParams { r: 15.0, big_r: 0.75 * page_size as f64 + MOVE_OVERHEAD, g: None, big_g: None }
    }

    /// The model's constraints: r > 1, R > 2r; with global memory g > 1, G > 2g, r >= g, G <= R <= 2G.
    pub fn validate(&self) -> Result<(), CostError> {
        let CostParams { r, big_r, g, big_g } = *self;
        if !(r > 1.0) {
            return Err(CostError::SmallR { r });
        }
        if !(big_r > 2.0 * r) {
            return Err(CostError::SmallBigR { big_r, r });
        }
        match (g, big_g) {
            (None, None) => Ok(()),
            (Some(g), Some(big_g)) => {
                if !(g > 1.0) {
                    return Err(CostError::SmallG { g });
                }
                if !(big_g > 2.0 * g) {
                    return Err(CostError::SmallBigG { big_g, g });
                }
                if r < g {
                    return Err(CostError::RBelowG { r, g });
                }
                if !(big_g <= big_r && big_r <= 2.0 * big_g) {
                    return Err(CostError::MovesOutOfRange { big_g, big_r });
                }
                Ok(())
            }
            _ => Err(CostError::GlobalHalf),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_presets_satisfy_the_model() {
        CostParams::ace(4096).validate().unwrap();
        CostParams::butterfly(4096).validate().unwrap();
        CostParams::for_numa(2.1, 4096, 64).validate().unwrap();
        assert_eq!(CostParams::ace(4096).big_g, Some(2248.0));
        assert_eq!(CostParams::butterfly(4096).big_r, 3272.0);
        // A mean of twelve ratios of 2.1 is 2.1000000000000005; the parameters say 2.1.
        let p = CostParams::for_numa([2.1; 12].iter().sum::<f64>() / 12.0, 4096, 64);
        assert_eq!((p.r.to_string(), p.big_r.to_string()), ("2.1".to_string(), "334.4".to_string()));
    }

    #[test]
    fn violations_are_named() {
        let bad = CostParams { r: 0.5, big_r: 10.0, g: None, big_g: None };
        assert!(bad.validate().unwrap_err().to_string().contains("r must be > 1"));
        let bad = CostParams { r: 3.0, big_r: 100.0, g: Some(4.0), big_g: Some(60.0) };
        assert!(bad.validate().unwrap_err().to_string().contains("r must be >= g"));
        let bad = CostParams { r: 3.0, big_r: 100.0, g: Some(2.0), big_g: None };
        assert!(bad.validate().is_err());
    }
}
