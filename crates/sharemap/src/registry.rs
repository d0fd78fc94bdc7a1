//! The mechanisms each kind of analysis offers, listed the same way for every kind: name,
//! source, summary and parameters.

pub use sharemap_core::Param;

/// What kind of mechanism a registry holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Placement policies (`place --policy`).
    Policy,
    /// Sharing detectors (`analyze --detector`).
    Detector,
    /// Thread-mapping algorithms (`map --algo`, `--thread-map`).
    Algorithm,
    /// The simulator's mechanisms (`simulate --mechanism`).
    Mechanism,
}

/// One registry row.
#[derive(Clone, Copy, Debug)]
pub struct Row {
    pub name: &'static str,
    /// Where it comes from (seed paper and section, or tool).
    pub source: &'static str,
    pub summary: &'static str,
    pub params: &'static [Param],
}

/// Whether a placement policy decides each page from its own references alone, so that a
/// trace cut by page range gives the answer the whole trace gives (`sharemap.dask`).
pub fn policy_is_per_page(spec: &str) -> Option<bool> {
    use sharemap_placement::policies::{Prepass, Settings, build, find};
    let spec = sharemap_core::Spec::parse(spec).ok()?;
    let row = find(&spec.name)?;
    // A row that decides per page, built as asked: still per page unless its partition pass
    // must work in trace order across pages (a profile, a cache whose fills it counts).
    let built = build(row, &Settings::default(), &spec.options).ok()?;
    Some(row.caps.per_page && built.prepass(64) == Prepass::default())
}

/// Every row of a kind, in the order `all` runs them.
pub fn rows(kind: Kind) -> Vec<Row> {
    match kind {
        Kind::Policy => rows_of(sharemap_placement::policies::POLICIES),
        Kind::Detector => rows_of(sharemap_detect::DETECTORS),
        Kind::Algorithm => rows_of(sharemap_mapping::ALGORITHMS),
        Kind::Mechanism => rows_of(sharemap_sim::MECHANISMS),
    }
}

/// The placement policies that move or copy pages while the program runs (their rows'
/// `Caps::moves`), in registry order.
pub fn moving_policies() -> Vec<&'static str> {
    sharemap_placement::policies::POLICIES.iter().filter(|p| p.caps.moves).map(|p| p.name).collect()
}

/// A registry's specs in brief, from its rows: `name[:key=..,switch]` each, comma-separated
/// (help texts list them so, and stay true as rows come and go).
pub fn synopsis(kind: Kind) -> String {
    rows(kind)
        .iter()
        .map(|r| {
            // A switch is given bare (`oracle:page`).
            let keys: Vec<String> = r
                .params
                .iter()
                .map(|p| match p.kind {
                    sharemap_core::plugin::ParamKind::Switch => p.key.to_string(),
                    _ => format!("{}=..", p.key),
                })
                .collect();
            if keys.is_empty() { r.name.to_string() } else { format!("{}[:{}]", r.name, keys.join(",")) }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn rows_of<B>(plugins: &'static [sharemap_core::Plugin<B>]) -> Vec<Row> {
    plugins.iter().map(|p| Row { name: p.name, source: p.source, summary: p.summary, params: p.params }).collect()
}
