//! The one plugin shape every registry uses: a [`Plugin`] row (name, source, summary, typed
//! parameters with their real defaults, declared capabilities, and how to build it), and the
//! [`Params`] a row is built from: its table's defaults, overridden by settings and spec
//! options, each value checked by its parameter's kind.

use crate::spec::{Spec, SpecError};
use std::fmt;

/// What values a parameter takes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ParamKind {
    /// A whole number from `min` to `max`.
    Integer { min: u64, max: u64 },
    /// A finite number, at least 0.
    Number,
    /// A finite number above 0.
    Positive,
    /// A number from 0 to 1.
    Share,
    /// On or off: given bare or as 1/on/true, off as 0/off/false.
    Switch,
    /// One of these words.
    Choice(&'static [&'static str]),
    /// Any text (a name the plugin resolves itself: a mapping algorithm, a policy).
    Text,
}

impl ParamKind {
    /// What a value must be, as a noun phrase ("a positive integer").
    pub fn expected(self) -> String {
        match self {
            ParamKind::Integer { min: 0, max: u64::MAX } => "a non-negative integer".into(),
            ParamKind::Integer { min: 1, max: u64::MAX } => "a positive integer".into(),
            ParamKind::Integer { min, max: u64::MAX } => format!("an integer of at least {min}"),
            ParamKind::Integer { min, max } => format!("an integer from {min} to {max}"),
            ParamKind::Number => "a non-negative number of at most 1e12".into(),
            ParamKind::Positive => "a positive number of at most 1e12".into(),
            ParamKind::Share => "a number from 0 to 1".into(),
            ParamKind::Switch => "a switch (1, on, true; 0, off, false)".into(),
            ParamKind::Choice(words) => format!("one of {}", words.join(", ")),
            ParamKind::Text => "a value".into(),
        }
    }

    /// The value `text` stands for, if this kind takes it.
    fn parse(self, text: Option<&str>) -> Option<Value> {
        let Some(text) = text else {
            // A bare key: a switch turned on.
            return (self == ParamKind::Switch).then_some(Value::Switch(true));
        };
        let text = text.trim();
        match self {
            ParamKind::Integer { min, max } => {
                text.parse::<u64>().ok().filter(|v| (min..=max).contains(v)).map(Value::Integer)
            }
            ParamKind::Number => text.parse::<f64>().ok().filter(|v| (0.0..=MAX_NUMBER).contains(v)).map(Value::Number),
            ParamKind::Positive => text.parse::<f64>().ok().filter(|v| *v > 0.0 && *v <= MAX_NUMBER).map(Value::Number),
            ParamKind::Share => text.parse::<f64>().ok().filter(|v| (0.0..=1.0).contains(v)).map(Value::Number),
            ParamKind::Switch => match text {
                "1" | "on" | "true" => Some(Value::Switch(true)),
                "0" | "off" | "false" => Some(Value::Switch(false)),
                _ => None,
            },
            ParamKind::Choice(words) => words.contains(&text).then(|| Value::Text(text.to_string())),
            ParamKind::Text => (!text.is_empty()).then(|| Value::Text(text.to_string())),
        }
    }
}

/// A parameter a plugin takes: its key, default, meaning and kind. The default is the
/// value the plugin is built with when nobody sets it (parsed by the kind); a parameter
/// whose value comes from elsewhere when unset (the run's seed) says where instead.
#[derive(Clone, Copy, Debug)]
pub struct Param {
    pub key: &'static str,
    /// As listed: the default value, or where the value comes from when `given`.
    pub default: &'static str,
    pub doc: &'static str,
    pub kind: ParamKind,
    /// Unset, the value is not `default` but given by the caller (`default` says by whom).
    pub given: bool,
}

const ANY: ParamKind = ParamKind::Integer { min: 0, max: u64::MAX };

/// The largest number a `number` or `positive` parameter takes: 10^12 (milliseconds: 31
/// years; megabytes: an exabyte). Beyond it a time turned into nanoseconds leaves the range
/// of a 64-bit count, and no experiment needs it.
pub const MAX_NUMBER: f64 = 1e12;

/// The largest per-thread model cache a parameter sets, in KiB (64 MiB: above any core's
/// share of a last-level cache). The model keeps every line's tag per thread.
pub const MAX_CACHE_KB: u64 = 1 << 16;

/// The most entries of a per-thread model TLB a parameter sets.
pub const MAX_TLB_ENTRIES: u64 = 1 << 20;

/// A whole number, 0 or more.
pub const fn integer(key: &'static str, default: &'static str, doc: &'static str) -> Param {
    Param { key, default, doc, kind: ANY, given: false }
}

/// A whole number, 1 or more.
pub const fn count(key: &'static str, default: &'static str, doc: &'static str) -> Param {
    Param { key, default, doc, kind: ParamKind::Integer { min: 1, max: u64::MAX }, given: false }
}

/// A whole number from `min` to `max`.
pub const fn ranged(key: &'static str, default: &'static str, min: u64, max: u64, doc: &'static str) -> Param {
    Param { key, default, doc, kind: ParamKind::Integer { min, max }, given: false }
}

/// A number, 0 or more.
pub const fn number(key: &'static str, default: &'static str, doc: &'static str) -> Param {
    Param { key, default, doc, kind: ParamKind::Number, given: false }
}

/// A number above 0 (a period, a duration).
pub const fn positive(key: &'static str, default: &'static str, doc: &'static str) -> Param {
    Param { key, default, doc, kind: ParamKind::Positive, given: false }
}

/// A number from 0 to 1.
pub const fn share(key: &'static str, default: &'static str, doc: &'static str) -> Param {
    Param { key, default, doc, kind: ParamKind::Share, given: false }
}

/// On or off.
pub const fn switch(key: &'static str, default: &'static str, doc: &'static str) -> Param {
    Param { key, default, doc, kind: ParamKind::Switch, given: false }
}

/// One of a few words.
pub const fn choice(
    key: &'static str,
    default: &'static str,
    words: &'static [&'static str],
    doc: &'static str,
) -> Param {
    Param { key, default, doc, kind: ParamKind::Choice(words), given: false }
}

/// A name the plugin resolves itself.
pub const fn text(key: &'static str, default: &'static str, doc: &'static str) -> Param {
    Param { key, default, doc, kind: ParamKind::Text, given: false }
}

/// A parameter of `kind` whose value, unset, comes from the caller: `by` says from what.
pub const fn given(key: &'static str, by: &'static str, kind: ParamKind, doc: &'static str) -> Param {
    Param { key, default: by, doc, kind, given: true }
}

/// A checked value.
#[derive(Clone, Debug, PartialEq)]
enum Value {
    Integer(u64),
    Number(f64),
    Switch(bool),
    Text(String),
}

/// Declared capabilities of a plugin, known before it is built.
#[derive(Clone, Copy, Debug)]
pub struct Caps {
    /// Reads a trace cut into windows (`analyze --split`): its state does not span the run.
    pub windows: bool,
    /// Run by `all` (a plugin whose defaults repeat another's is left out).
    pub in_all: bool,
    /// Needs a recording of the program (real runs).
    pub recording: bool,
    /// Needs a host of several NUMA nodes (real runs).
    pub numa: bool,
    /// Whether this process can run it here (switching a kernel setting needs root).
    pub available: fn() -> bool,
    /// Decides a page from that page's own references in order, whatever their positions in
    /// the trace and the other pages (a trace cut by page range gives the same answer).
    pub per_page: bool,
    /// Moves or copies pages while the program runs (a placement policy): one that did on
    /// no input is said to have, not left to look like one that chose to stay.
    pub moves: bool,
}

fn always() -> bool {
    true
}

impl Caps {
    /// No particular capability or need.
    pub const NONE: Caps = Caps {
        windows: false,
        in_all: true,
        recording: false,
        numa: false,
        available: always,
        per_page: false,
        moves: false,
    };

    /// Reads the trace in windows.
    pub const WINDOWS: Caps = Caps { windows: true, ..Caps::NONE };

    /// Decides each page from its own references alone.
    pub const PER_PAGE: Caps = Caps { per_page: true, ..Caps::NONE };

    /// Moves or copies pages during the run.
    pub const MOVES: Caps = Caps { moves: true, ..Caps::NONE };

    /// Moves or copies pages during the run, deciding each from its own references alone.
    pub const MOVES_PER_PAGE: Caps = Caps { moves: true, per_page: true, ..Caps::NONE };
}

/// A registry row, the same for every kind of plugin: `B` builds it.
pub struct Plugin<B: 'static> {
    pub name: &'static str,
    /// Where it comes from (seed paper and section, or tool).
    pub source: &'static str,
    pub summary: &'static str,
    pub params: &'static [Param],
    pub caps: Caps,
    pub build: B,
}

impl<B> Plugin<B> {
    /// Its parameters at their defaults, then `layers` of settings in order (later ones win):
    /// each `(key, value)` checked against the table and the parameter's kind. `kind` names
    /// the registry in errors ("policy", "detector").
    pub fn params(&self, kind: &'static str, layers: &[&[(String, Option<String>)]]) -> Result<Params, SpecError> {
        Params::resolve(kind, self.name, self.params, layers)
    }
}

/// The row of `name` in a registry.
pub fn find<'a, B>(rows: &'a [Plugin<B>], name: &str) -> Option<&'a Plugin<B>> {
    rows.iter().find(|r| r.name == name)
}

/// A registry's names, comma-separated (for errors that list them).
pub fn names<B>(rows: &[Plugin<B>]) -> String {
    rows.iter().map(|r| r.name).collect::<Vec<_>>().join(", ")
}

/// Parameter keys renamed since they were first published, as (kind, plugin, old, new): the
/// old spelling still sets the parameter. SAMMU's counter width was `bits` in `place` while
/// the detector and the simulator called it `nc`, as seed 000 does.
const RENAMED: &[(&str, &str, &str, &str)] = &[("policy", "sammu", "bits", "nc")];

/// The key that `key` of plugin `name` (of `kind`) is now spelt, when it was renamed; the
/// note saying so is printed once per process, wherever the old spelling came in.
pub fn renamed(kind: &str, name: &str, key: &str) -> Option<&'static str> {
    let (.., new) = RENAMED.iter().find(|r| (r.0, r.1, r.2) == (kind, name, key))?;
    static NOTED: std::sync::Once = std::sync::Once::new();
    NOTED.call_once(|| {
        eprintln!("sharemap: note: {kind} {name}: '{key}' is now spelt '{new}' (the old spelling still works)")
    });
    Some(new)
}

/// A plugin's parameter values: every key of its table, at its default unless set.
#[derive(Clone, Debug)]
pub struct Params {
    kind: &'static str,
    name: &'static str,
    table: &'static [Param],
    values: Vec<Option<Value>>,
    /// The settings as given, for labels and errors.
    given: Vec<(String, Option<String>)>,
}

impl Params {
    /// A table's parameters at their defaults.
    pub fn defaults(kind: &'static str, name: &'static str, table: &'static [Param]) -> Params {
        Params::resolve(kind, name, table, &[]).expect("no settings to refuse")
    }

    fn resolve(
        kind: &'static str,
        name: &'static str,
        table: &'static [Param],
        layers: &[&[(String, Option<String>)]],
    ) -> Result<Params, SpecError> {
        let mut values = Vec::with_capacity(table.len());
        for p in table {
            values.push(if p.given {
                None
            } else {
                Some(p.kind.parse(Some(p.default)).unwrap_or_else(|| {
                    panic!("{kind} {name}: the documented default {}={} is not {}", p.key, p.default, p.kind.expected())
                }))
            });
        }
        let mut params = Params { kind, name, table, values, given: Vec::new() };
        for layer in layers {
            for (key, value) in layer.iter() {
                params.set(key, value.as_deref())?;
            }
        }
        Ok(params)
    }

    /// Sets one parameter, checked.
    pub fn set(&mut self, key: &str, value: Option<&str>) -> Result<(), SpecError> {
        if let Some(new) = renamed(self.kind, self.name, key) {
            return self.set(new, value);
        }
        let Some(at) = self.table.iter().position(|p| p.key == key) else {
            let known: Vec<&str> = self.table.iter().map(|p| p.key).collect();
            let list = if known.is_empty() { "none".to_string() } else { known.join(", ") };
            let hint = crate::did_you_mean(key, known.iter().copied());
            return Err(self.error(format!("unknown option '{key}' ({hint}options: {list})")));
        };
        let p = self.table[at];
        // A bare key sets a switch, or a parameter to its default (`sampled:cache`).
        let value = match value {
            None if p.kind != ParamKind::Switch && !p.given => Some(p.default),
            v => v,
        };
        let parsed = p.kind.parse(value).ok_or_else(|| match value {
            None => self.error(format!("{key} needs a value")),
            Some(_) => self.error(format!("{key} must be {}", p.kind.expected())),
        })?;
        self.values[at] = Some(parsed);
        self.given.retain(|(k, _)| k != key);
        self.given.push((key.to_string(), value.map(str::to_string)));
        Ok(())
    }

    /// An error about these parameters.
    pub fn error(&self, what: impl Into<String>) -> SpecError {
        SpecError { kind: self.kind, spec: self.spec().to_string(), what: what.into() }
    }

    /// The plugin's name and the settings given (not the defaults).
    pub fn spec(&self) -> Spec {
        Spec { name: self.name.to_string(), options: self.given.clone() }
    }

    /// The plugin's name and every parameter with its value (given ones as given).
    pub fn full_spec(&self) -> Spec {
        let options = self
            .table
            .iter()
            .zip(&self.values)
            .filter_map(|(p, v)| v.as_ref().map(|v| (p.key.to_string(), Some(v.to_string()))))
            .collect();
        Spec { name: self.name.to_string(), options }
    }

    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Whether the table has `key`.
    pub fn has(&self, key: &str) -> bool {
        self.table.iter().any(|p| p.key == key)
    }

    /// Whether `key` was set rather than left at its default.
    pub fn is_set(&self, key: &str) -> bool {
        self.given.iter().any(|(k, _)| k == key)
    }

    fn value(&self, key: &str) -> Option<&Value> {
        let at = self.table.iter().position(|p| p.key == key);
        let at = at.unwrap_or_else(|| panic!("{} {} has no parameter '{key}' in its table", self.kind, self.name));
        self.values[at].as_ref()
    }

    /// A whole-number parameter (None: a `given` one left unset).
    pub fn get_integer(&self, key: &str) -> Option<u64> {
        match self.value(key) {
            Some(Value::Integer(v)) => Some(*v),
            None => None,
            Some(other) => panic!("{} {}: {key} is not an integer ({other:?})", self.kind, self.name),
        }
    }

    /// A whole-number parameter with a default of its own.
    pub fn integer(&self, key: &str) -> u64 {
        self.get_integer(key).unwrap_or_else(|| panic!("{} {}: {key} has no value", self.kind, self.name))
    }

    /// A number parameter (None: a `given` one left unset).
    pub fn get_number(&self, key: &str) -> Option<f64> {
        match self.value(key) {
            Some(Value::Number(v)) => Some(*v),
            Some(Value::Integer(v)) => Some(*v as f64),
            None => None,
            Some(other) => panic!("{} {}: {key} is not a number ({other:?})", self.kind, self.name),
        }
    }

    pub fn number(&self, key: &str) -> f64 {
        self.get_number(key).unwrap_or_else(|| panic!("{} {}: {key} has no value", self.kind, self.name))
    }

    /// A switch (None: a `given` one left unset).
    pub fn get_switch(&self, key: &str) -> Option<bool> {
        match self.value(key) {
            Some(Value::Switch(v)) => Some(*v),
            None => None,
            Some(other) => panic!("{} {}: {key} is not a switch ({other:?})", self.kind, self.name),
        }
    }

    /// A switch; one left unset is off.
    pub fn switch(&self, key: &str) -> bool {
        self.get_switch(key).unwrap_or(false)
    }

    /// A word or text parameter (None: a `given` one left unset).
    pub fn get_text(&self, key: &str) -> Option<&str> {
        match self.value(key) {
            Some(Value::Text(v)) => Some(v),
            None => None,
            Some(other) => panic!("{} {}: {key} is not text ({other:?})", self.kind, self.name),
        }
    }

    pub fn text(&self, key: &str) -> &str {
        self.get_text(key).unwrap_or_else(|| panic!("{} {}: {key} has no value", self.kind, self.name))
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Integer(v) => write!(f, "{v}"),
            Value::Number(v) => write!(f, "{v}"),
            Value::Switch(v) => f.write_str(if *v { "1" } else { "0" }),
            Value::Text(v) => f.write_str(v),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static TABLE: &[Param] = &[
        count("n", "16", "references"),
        number("t-ms", "1.5", "a time"),
        share("share", "0.9", "a share"),
        switch("flush", "0", "a switch"),
        choice("source", "every", &["every", "tlb-miss"], "a choice"),
        given("seed", "the run's --seed", ANY, "a seed"),
    ];

    fn opts(items: &[(&str, Option<&str>)]) -> Vec<(String, Option<String>)> {
        items.iter().map(|(k, v)| (k.to_string(), v.map(str::to_string))).collect()
    }

    #[test]
    fn defaults_come_from_the_table_and_settings_override_them_in_order() {
        let row = Plugin { name: "p", source: "", summary: "", params: TABLE, caps: Caps::NONE, build: () };
        let p = row.params("policy", &[]).unwrap();
        assert_eq!((p.integer("n"), p.number("t-ms"), p.switch("flush"), p.text("source")), (16, 1.5, false, "every"));
        assert_eq!(p.get_integer("seed"), None);
        let settings = opts(&[("n", Some("4")), ("source", Some("tlb-miss"))]);
        let spec = opts(&[("n", Some("8")), ("flush", None), ("seed", Some("3"))]);
        let p = row.params("policy", &[&settings, &spec]).unwrap();
        assert_eq!((p.integer("n"), p.switch("flush"), p.text("source")), (8, true, "tlb-miss"));
        assert_eq!(p.get_integer("seed"), Some(3));
        assert_eq!(p.spec().to_string(), "p:source=tlb-miss,n=8,flush,seed=3");
    }

    #[test]
    fn values_are_checked_by_kind() {
        let row = Plugin { name: "p", source: "", summary: "", params: TABLE, caps: Caps::NONE, build: () };
        let err = |items: &[(&str, Option<&str>)]| row.params("detector", &[&opts(items)]).unwrap_err().to_string();
        assert!(err(&[("n", Some("0"))]).contains("n must be a positive integer"));
        assert!(err(&[("share", Some("2"))]).contains("share must be a number from 0 to 1"));
        assert!(err(&[("t-ms", Some("-1"))]).contains("t-ms must be a non-negative number"));
        for huge in ["1e308", "1.000001e12", "inf", "NaN"] {
            assert!(
                err(&[("t-ms", Some(huge))]).contains("t-ms must be a non-negative number of at most 1e12"),
                "{huge}"
            );
        }
        assert!(row.params("policy", &[&opts(&[("t-ms", Some("1e12"))])]).is_ok());
        assert!(err(&[("source", Some("x"))]).contains("source must be one of every, tlb-miss"));
        assert!(err(&[("flush", Some("yes"))]).contains("flush must be a switch"));
        assert!(err(&[("seed", None)]).contains("seed needs a value"));
        assert!(err(&[("x", Some("1"))]).contains("unknown option 'x' (options: n, t-ms, share, flush, source, seed)"));
    }
}
