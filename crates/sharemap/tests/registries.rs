//! Every registry walked row by row: each parameter's documented default is what the plugin
//! builds with, and each parameter is used (another value builds another plugin).

use sharemap_core::Spec;
use sharemap_core::plugin::{Param, ParamKind, Plugin};
use sharemap_machine::Machine;
use sharemap_machine::ThreadPlacement;

/// A valid value other than the default, or None where no other is checked (a name the
/// plugin resolves, a switch without a default, a given one).
fn another(p: &Param) -> Option<String> {
    if p.given {
        return None;
    }
    Some(match p.kind {
        ParamKind::Integer { min, max } => {
            let d: u64 = p.default.parse().unwrap();
            let v = if d < max { d + 1 } else { d - 1 };
            assert!((min..=max).contains(&v));
            v.to_string()
        }
        ParamKind::Number | ParamKind::Positive => (p.default.parse::<f64>().unwrap() * 2.0 + 1.0).to_string(),
        ParamKind::Share => (if p.default.parse::<f64>().unwrap() < 0.5 { "0.75" } else { "0.25" }).into(),
        ParamKind::Switch => (if p.default == "1" { "0" } else { "1" }).into(),
        ParamKind::Choice(words) => words.iter().find(|w| **w != p.default)?.to_string(),
        ParamKind::Text => return None,
    })
}

/// A spec's options, `key=value` each.
type Options = [(String, Option<String>)];

fn opts(key: &str, value: &str) -> Vec<(String, Option<String>)> {
    vec![(key.to_string(), Some(value.to_string()))]
}

/// Parameters that choose among alternatives rather than tune one: giving any of them is a
/// choice, so the plugin differs from the one built with none.
const ALTERNATIVES: [(&str, &str); 5] =
    [("sampled", "every"), ("sampled", "cache"), ("sampled", "tlb"), ("sampled", "window"), ("sampled", "gap")];

/// Parameters that act only when another parameter has a value (Marathe's profile: `every`
/// with `source=every`, `tlb-entries` with `source=tlb-miss`): each is checked to change the
/// plugin with that value set.
const CONDITIONAL: [(&str, &str, (&str, &str)); 2] =
    [("marathe", "every", ("source", "every")), ("marathe", "tlb-entries", ("source", "tlb-miss"))];

/// Walks one registry: `describe` builds a row with the given options and describes what
/// it built (None where these options do not build).
fn walk<B>(kind: &str, rows: &'static [Plugin<B>], describe: &dyn Fn(&'static Plugin<B>, &Options) -> Option<String>) {
    for row in rows {
        let defaults =
            describe(row, &[]).unwrap_or_else(|| panic!("{kind} {} does not build with its defaults", row.name));
        for p in row.params.iter().filter(|p| !p.given) {
            let explicit = describe(row, &opts(p.key, p.default));
            if !ALTERNATIVES.contains(&(row.name, p.key)) {
                let (key, default) = (p.key, p.default);
                assert_eq!(
                    explicit.as_ref(),
                    Some(&defaults),
                    "{kind} {}: {key}={default} is not its default",
                    row.name
                );
            }
            if let Some(v) = another(p) {
                let enabling = CONDITIONAL.iter().find(|(r, k, _)| *r == row.name && *k == p.key).map(|c| c.2);
                let base: Vec<(String, Option<String>)> =
                    enabling.iter().map(|(k, val)| (k.to_string(), Some(val.to_string()))).collect();
                let mut with = base.clone();
                with.extend(opts(p.key, &v));
                let before = if base.is_empty() { Some(defaults.clone()) } else { describe(row, &base) };
                let changed = describe(row, &with);
                assert!(
                    changed.is_some() && changed != before,
                    "{kind} {}: {}={v} changes nothing{}",
                    row.name,
                    p.key,
                    enabling.map(|(k, val)| format!(" (with {k}={val})")).unwrap_or_default()
                );
            }
        }
    }
}

#[test]
fn detectors_build_with_their_documented_defaults() {
    let machine = Machine::from_spec("pack:2 core:2 pu:1").unwrap();
    let placement = ThreadPlacement::identity(&machine);
    let meta = sharemap_trace::Metadata::default();
    let ctx = sharemap_detect::DetectorContext::new(&meta, &placement).unwrap();
    walk("detector", sharemap_detect::DETECTORS, &|row, options| {
        let spec = Spec { name: row.name.into(), options: options.to_vec() };
        sharemap_detect::detector::build(&spec, &ctx).ok().map(|d| d.spec())
    });
    // What a detector reports of itself, built with no options, is its table's defaults.
    for row in sharemap_detect::DETECTORS {
        let built = sharemap_detect::detector::build(&Spec { name: row.name.into(), options: vec![] }, &ctx).unwrap();
        for (key, value) in Spec::parse(&built.spec()).unwrap().options {
            if let (Some(p), Some(value)) = (row.params.iter().find(|p| p.key == key && !p.given), value) {
                assert_eq!(value, p.default, "detector {} builds {key}={value}, documents {}", row.name, p.default);
            }
        }
    }
}

#[test]
fn policies_build_with_their_documented_defaults() {
    use sharemap_placement::policies::{POLICIES, Settings, build};
    walk("policy", POLICIES, &|row, options| build(row, &Settings::default(), options).ok().map(|p| format!("{p:?}")));
}

#[test]
fn algorithms_build_with_their_documented_defaults() {
    walk("algorithm", sharemap_mapping::ALGORITHMS, &|row, options| {
        let spec = Spec { name: row.name.into(), options: options.to_vec() };
        sharemap_mapping::build(&spec.to_string(), 1).ok().map(|a| a.spec())
    });
}

#[test]
fn simulator_mechanisms_build_with_their_documented_defaults() {
    walk("mechanism", sharemap_sim::MECHANISMS, &|row, options| {
        let params = row.params("mechanism", &[options]).ok()?;
        (row.build)(&params, 1).ok().map(|m| format!("{m:?}"))
    });
}

/// SAMMU's parameters are written once: the policy and the simulator's mechanism take their
/// shared keys' defaults from the detector's table (the policy's 4-way TLB model takes at
/// least 4 entries).
#[test]
fn sammu_defaults_are_written_once() {
    let detector = sharemap_detect::detector::find("sammu").unwrap().params;
    let policy = sharemap_placement::policies::find("sammu").unwrap().params;
    let mechanism = sharemap_sim::mechanisms::find("sammu").unwrap().params;
    for p in policy.iter().chain(mechanism) {
        let same = detector.iter().find(|d| d.key == p.key || (p.key == "bits" && d.key == "nc"));
        if let Some(d) = same {
            assert_eq!(p.default, d.default, "sammu {}", p.key);
        }
    }
}
