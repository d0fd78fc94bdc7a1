//! Suggestions for mistyped names: every registry (presets, policies, detectors, options,
//! ...) answers an unknown name with the closest known one, as clap does for flags.

/// The known name closest to `given` when it is close enough to be a typo of it (Jaro-Winkler
/// similarity at least 0.8, letter case ignored).
pub fn closest<'a>(given: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let given = given.to_lowercase();
    known
        .into_iter()
        .map(|k| (strsim::jaro_winkler(&given, &k.to_lowercase()), k))
        .filter(|(similarity, _)| *similarity >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, k)| k)
}

/// "did you mean 'x'? " when a known name is close to `given`, else nothing: the start of
/// the parenthesis that lists the known names.
pub fn did_you_mean<'a>(given: &str, known: impl IntoIterator<Item = &'a str>) -> String {
    closest(given, known).map_or(String::new(), |k| format!("did you mean '{k}'? "))
}

#[cfg(test)]
mod tests {
    use super::closest;

    #[test]
    fn typos_find_their_name_and_strangers_find_none() {
        let detectors = ["oracle", "sammu", "stmap", "sampled", "faults"];
        assert_eq!(closest("stmp", detectors), Some("stmap"));
        assert_eq!(closest("Orcale", detectors), Some("oracle"));
        assert_eq!(closest("sammmu", detectors), Some("sammu"));
        assert_eq!(closest("xyz", detectors), None);
        let policies = ["first-touch", "numa-balancing", "carrefour", "replicate-count"];
        assert_eq!(closest("first_touch", policies), Some("first-touch"));
        assert_eq!(closest("numa-balance", policies), Some("numa-balancing"));
        assert_eq!(closest("kmaf", policies), None);
    }
}
