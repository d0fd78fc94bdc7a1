//! A measurement: configurations run in turn, each several times, and their means with
//! 95 % confidence intervals against the first (the baseline), as the papers measure.

use crate::config::Configuration;
use crate::placer::PlanOutcome;
use crate::runner::{RunOutcome, Runner};
use crate::{counters, mechanism, sysctl, timeline};
use serde::Serialize;
use sharemap::Error;

/// One configuration's runs and their statistics.
#[derive(Clone, Debug, Serialize)]
pub struct ConfigurationResult {
    pub name: String,
    /// Wall-clock seconds of each run, in the order they ran.
    pub seconds: Vec<f64>,
    pub mean: f64,
    /// Half-width of the 95 % confidence interval of the mean (Student's t); None with
    /// fewer than two runs.
    pub ci95: Option<f64>,
    /// Mean over the first configuration's mean (the `os` baseline when measured).
    pub normalized: f64,
    /// Whether its mean differs from the first configuration's beyond the noise: their 95 %
    /// intervals do not overlap. None for the first itself, or with fewer than two runs.
    pub significant: Option<bool>,
    /// How its plan fared in its last run, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan: Option<PlanOutcome>,
    /// How far its timeline got in its last run, when it replays one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeline: Option<timeline::TimelineOutcome>,
    /// Mean LLC load misses and remote loads per 1000 instructions over its runs, where the
    /// host's PMU counts them.
    pub llc_mpki: Option<f64>,
    pub remote_pki: Option<f64>,
    /// Autopin's choices: how often each candidate was the fastest of its probation runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub autopin: Option<AutopinChoices>,
}

impl ConfigurationResult {
    /// A configuration's run times, their mean and interval, over `base` (the baseline's
    /// mean); nothing else known of it yet.
    pub fn of_times(name: String, seconds: Vec<f64>, base: f64) -> ConfigurationResult {
        let (mean, ci95) = mean_ci95(&seconds);
        ConfigurationResult {
            name,
            seconds,
            mean,
            ci95,
            normalized: mean / base,
            significant: None,
            plan: None,
            timeline: None,
            llc_mpki: None,
            remote_pki: None,
            autopin: None,
        }
    }

    /// Its difference from the baseline named `baseline`, in words: faster or slower when
    /// the 95 % intervals are apart, not significant when they overlap.
    pub fn verdict(&self, baseline: &str) -> &'static str {
        match self.significant {
            Some(true) if self.normalized < 1.0 => "faster (intervals apart)",
            Some(true) => "slower (intervals apart)",
            Some(false) => "not significant (intervals overlap)",
            None if self.name == baseline => "(baseline)",
            None => "-",
        }
    }
}

/// What autopin chose over the rounds.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct AutopinChoices {
    /// Each candidate and the rounds it won.
    pub picks: Vec<(String, usize)>,
    /// Rounds won by the oracle's mapping.
    pub oracle: usize,
    /// Seconds spent in probation runs (each candidate once per round), which Autopin's
    /// time includes.
    pub probation_seconds: f64,
    /// Seconds of the runs it chose, alone (the rest of its time is probation).
    pub chosen_seconds: f64,
}

/// The mean of a sample and the half-width of its 95 % confidence interval (Student's t
/// with n - 1 degrees of freedom; None for fewer than two values).
pub fn mean_ci95(sample: &[f64]) -> (f64, Option<f64>) {
    let n = sample.len() as f64;
    let mean = sample.iter().sum::<f64>() / n.max(1.0);
    if sample.len() < 2 {
        return (mean, None);
    }
    let var = sample.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, Some(t975(sample.len() - 1) * (var / n).sqrt()))
}

/// Student's t at 0.975 with `df` degrees of freedom (the half-width factor of a two-sided
/// 95 % interval): the usual table to 30, then the Cornish-Fisher expansion around the
/// normal quantile, within 1e-5 of the exact value from there on.
fn t975(df: usize) -> f64 {
    const TABLE: [f64; 30] = [
        12.706205, 4.302653, 3.182446, 2.776445, 2.570582, 2.446912, 2.364624, 2.306004, 2.262157, 2.228139, 2.200985,
        2.178813, 2.160369, 2.144787, 2.131450, 2.119905, 2.109816, 2.100922, 2.093024, 2.085963, 2.079614, 2.073873,
        2.068658, 2.063899, 2.059539, 2.055529, 2.051831, 2.048407, 2.045230, 2.042272,
    ];
    if df == 0 {
        return f64::NAN;
    }
    match TABLE.get(df - 1) {
        Some(&t) => t,
        None => t975_expansion(df as f64),
    }
}

/// The Cornish-Fisher expansion of t(0.975) in 1/`v`, to the fourth order.
fn t975_expansion(v: f64) -> f64 {
    let z = 1.959_963_984_540_054_f64;
    let z2 = z * z;
    z + z * (z2 + 1.0) / (4.0 * v)
        + z * ((5.0 * z2 + 16.0) * z2 + 3.0) / (96.0 * v * v)
        + z * (((3.0 * z2 + 19.0) * z2 + 17.0) * z2 - 15.0) / (384.0 * v.powi(3))
        + z * ((((79.0 * z2 + 776.0) * z2 + 1482.0) * z2 - 1920.0) * z2 - 945.0) / (92160.0 * v.powi(4))
}

/// A run that stopped a measurement: the program could not start, or it failed.
#[derive(Debug)]
pub struct FailedRun {
    pub configuration: String,
    /// Which round (0 = the first run of each configuration).
    pub round: usize,
    pub failure: Failure,
}

#[derive(Debug)]
pub enum Failure {
    CannotStart(Error),
    Exited(Box<RunOutcome>),
}

/// Runs every configuration `repeat` times, interleaved (A B C A B C ...), so that the
/// machine's slow and fast spells hit all alike. `progress` hears of each run as it ends;
/// a run whose program fails stops the measurement.
pub fn measure(
    runner: &Runner,
    configs: &[Configuration],
    repeat: usize,
    progress: &mut dyn FnMut(&Configuration, usize, &RunOutcome),
) -> std::result::Result<Vec<ConfigurationResult>, Box<FailedRun>> {
    // A measurement that switches the kernel's NUMA balancing owns it from start to end: a
    // second run is refused before anything runs, and never switches it under this one.
    let _owner = match configs.iter().find(|c| matches!(c.procedure, mechanism::Procedure::NumaBalancing)) {
        Some(c) => Some(sysctl::NumaBalancingGuard::take().map_err(|e| {
            Box::new(FailedRun { configuration: c.name.clone(), round: 0, failure: Failure::CannotStart(e) })
        })?),
        None => None,
    };
    let mut seconds = vec![Vec::with_capacity(repeat); configs.len()];
    let mut plans = vec![None; configs.len()];
    let mut timelines = vec![None; configs.len()];
    let mut counts: Vec<Vec<counters::Counts>> = vec![Vec::new(); configs.len()];
    let mut autopin: Vec<Option<AutopinChoices>> = vec![None; configs.len()];
    let mut timed = None;
    for round in 0..repeat {
        for (c, config) in configs.iter().enumerate() {
            let failed = |failure| Box::new(FailedRun { configuration: config.name.clone(), round, failure });
            let mut chosen = config;
            let winner;
            let mut round_probation = 0.0;
            if let mechanism::Procedure::Autopin { candidates, oracle } = &config.procedure {
                // Probation: each candidate once; the one kept (sharemap-decide's rule: the
                // most work per second, here the inverse of its time) runs for the round.
                let mut rates = Vec::with_capacity(candidates.len());
                let choices = autopin[c].get_or_insert_with(|| AutopinChoices {
                    picks: candidates.iter().map(|(n, _)| (n.clone(), 0)).collect(),
                    oracle: 0,
                    probation_seconds: 0.0,
                    chosen_seconds: 0.0,
                });
                for (name, pinning) in candidates {
                    let probe = Configuration::fixed(
                        &format!("{} ({name})", config.name),
                        pinning.clone(),
                        config.memory.clone(),
                    );
                    let outcome =
                        runner.run(&probe, round as u64, None).map_err(|e| failed(Failure::CannotStart(e)))?;
                    if outcome.exit != 0 {
                        return Err(failed(Failure::Exited(Box::new(outcome))));
                    }
                    choices.probation_seconds += outcome.seconds;
                    round_probation += outcome.seconds;
                    rates.push(1.0 / outcome.seconds.max(f64::MIN_POSITIVE));
                }
                let best = sharemap_decide::autopin::kept(&rates);
                choices.picks[best].1 += 1;
                if best == *oracle {
                    choices.oracle += 1;
                }
                winner = Configuration::fixed(&config.name, candidates[best].1.clone(), config.memory.clone());
                chosen = &winner;
            }
            // A timeline is spread over the baseline's mean time so far, or over one
            // uncounted run under the scheduler's placement when it is the baseline itself.
            let scale = match &chosen.timeline {
                None => None,
                Some(_) if c > 0 && !seconds[0].is_empty() => Some(mean_ci95(&seconds[0]).0),
                Some(_) => match timed {
                    Some(t) => Some(t),
                    None => {
                        let t = runner.timing_run().map_err(|e| failed(Failure::CannotStart(e)))?;
                        timed = Some(t);
                        timed
                    }
                },
            };
            let outcome = runner.run(chosen, round as u64, scale).map_err(|e| failed(Failure::CannotStart(e)))?;
            progress(config, round, &outcome);
            if outcome.exit != 0 {
                return Err(failed(Failure::Exited(Box::new(outcome))));
            }
            // Autopin's time includes what it spent choosing, as seed 000 and the simulator
            // count it: this round's probation runs, then the run it chose.
            if let Some(choices) = autopin[c].as_mut() {
                choices.chosen_seconds += outcome.seconds;
            }
            seconds[c].push(outcome.seconds + round_probation);
            if let Some(observed) = outcome.observed {
                plans[c] = observed.plan;
                timelines[c] = observed.timeline;
                counts[c].extend(observed.counts);
            }
        }
    }
    let base = seconds.first().map(|s| mean_ci95(s).0).unwrap_or(1.0);
    Ok(configs
        .iter()
        .zip(seconds)
        .zip(plans)
        .zip(timelines)
        .zip(counts)
        .zip(autopin)
        .map(|(((((config, seconds), plan), timeline), counts), autopin)| {
            // A ratio is reported only when every run has it.
            let mean_of = |f: fn(&counters::Counts) -> Option<f64>| {
                let v: Option<Vec<f64>> = counts.iter().map(f).collect();
                v.filter(|v| v.len() == seconds.len()).map(|v| v.iter().sum::<f64>() / v.len() as f64)
            };
            let (llc_mpki, remote_pki) = (mean_of(counters::Counts::llc_mpki), mean_of(counters::Counts::remote_pki));
            ConfigurationResult {
                llc_mpki,
                remote_pki,
                plan,
                timeline,
                autopin,
                ..ConfigurationResult::of_times(config.name.clone(), seconds, base)
            }
        })
        .collect::<Vec<_>>())
    .map(|mut results| {
        mark_significance(&mut results);
        results
    })
}

/// Named samples of run times (seconds), compared as `measure` compares its configurations:
/// each one's mean and interval, over the first's mean, and whether the difference stands
/// out of the noise.
pub fn compare(named: Vec<(String, Vec<f64>)>) -> Vec<ConfigurationResult> {
    let base = named.first().map(|(_, s)| mean_ci95(s).0).unwrap_or(1.0);
    let mut results: Vec<ConfigurationResult> =
        named.into_iter().map(|(name, seconds)| ConfigurationResult::of_times(name, seconds, base)).collect();
    mark_significance(&mut results);
    results
}

/// Sets each configuration's `significant` against the first's intervals.
fn mark_significance(results: &mut [ConfigurationResult]) {
    let Some((base, others)) = results.split_first_mut() else { return };
    let Some(b) = base.ci95 else { return };
    for r in others {
        r.significant = r.ci95.map(|c| (r.mean - base.mean).abs() > c + b);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against a textbook sample: 1..5 has mean 3, s = 1.5811, t(0.975, 4) = 2.7764, so the
    /// half-width is 2.7764 x 1.5811 / sqrt(5) = 1.9632.
    #[test]
    fn confidence_interval_of_a_known_sample() {
        let (mean, ci) = mean_ci95(&[1.0, 2.0, 3.0, 4.0, 5.0]);
        assert_eq!(mean, 3.0);
        assert!((ci.unwrap() - 1.9632).abs() < 1e-4, "{ci:?}");
        // Two values: t(0.975, 1) = 12.706.
        let (_, ci) = mean_ci95(&[10.0, 12.0]);
        assert!((ci.unwrap() - 12.706 * 1.0).abs() < 1e-3, "{ci:?}");
        assert_eq!(mean_ci95(&[7.0]), (7.0, None));
    }

    /// A difference counts when the 95 % intervals are apart: samples 1..5 (mean 3, half-width
    /// 1.9632) against 10..14 (mean 12) differ, against 2..6 (mean 4) they overlap.
    #[test]
    fn differences_are_significant_only_beyond_the_intervals() {
        // Over the baseline's mean, 3: the far sample is slower.
        let result = |name: &str, seconds: Vec<f64>| ConfigurationResult::of_times(name.into(), seconds, 3.0);
        let mut results = vec![
            result("os", vec![1.0, 2.0, 3.0, 4.0, 5.0]),
            result("far", vec![10.0, 11.0, 12.0, 13.0, 14.0]),
            result("near", vec![2.0, 3.0, 4.0, 5.0, 6.0]),
            result("once", vec![9.0]),
        ];
        mark_significance(&mut results);
        let marks: Vec<Option<bool>> = results.iter().map(|r| r.significant).collect();
        assert_eq!(marks, [None, Some(true), Some(false), None]);
        let verdicts: Vec<&str> = results.iter().map(|r| r.verdict("os")).collect();
        assert_eq!(verdicts, ["(baseline)", "slower (intervals apart)", "not significant (intervals overlap)", "-"]);
    }

    /// The quantiles past the table, against published values of t(0.975): the expansion
    /// meets the table at 30 and the normal quantile far out.
    #[test]
    fn t_quantiles_beyond_the_table() {
        for (df, published) in [(30, 2.042272), (31, 2.039513), (40, 2.021075), (60, 2.000298), (120, 1.979930)] {
            let expansion = t975_expansion(df as f64);
            assert_eq!(t975(df), if df == 30 { 2.042272 } else { expansion });
            assert!((expansion - published).abs() < 1e-5, "df {df}: {expansion} against {published}");
        }
        assert!((t975(1_000_000) - 1.959966).abs() < 1e-5);
        assert!(t975(0).is_nan());
    }
}
