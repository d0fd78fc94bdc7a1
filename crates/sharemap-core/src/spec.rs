//! Mechanism specs, one syntax for every registry (detectors, mapping algorithms, placement
//! policies): `name`, `name:key=value,key=value` or `name:flag`. A list separates specs by
//! commas too: an item with `=` but no `:` continues the previous spec's options, so
//! `sammu:l1=32,l2=512,oracle` is two specs.

use std::fmt;

pub use crate::plugin::Param;

/// A parsed spec: the mechanism's name and its options in the order given; a bare option
/// (`oracle:page`) has no value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spec {
    pub name: String,
    pub options: Vec<(String, Option<String>)>,
}

/// A spec that cannot be used: the spec as written and what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{kind} '{spec}': {what}")]
pub struct SpecError {
    /// "detector", "algorithm", "policy".
    pub kind: &'static str,
    pub spec: String,
    pub what: String,
}

/// The items of a comma list, trimmed: an empty one (`1,,2`, a leading or trailing comma)
/// is refused as a typo rather than skipped. Err: the 1-based position of the empty item.
pub fn comma_items(text: &str) -> Result<Vec<&str>, usize> {
    let items: Vec<&str> = text.split(',').map(str::trim).collect();
    if items.len() == 1 && items[0].is_empty() {
        return Ok(Vec::new());
    }
    match items.iter().position(|i| i.is_empty()) {
        Some(k) => Err(k + 1),
        None => Ok(items),
    }
}

/// The message for an empty item of a comma list.
pub fn empty_item(position: usize) -> String {
    format!("item {position} of the comma list is empty")
}

impl Spec {
    pub fn parse(text: &str) -> Result<Spec, SpecError> {
        let text = text.trim();
        let (name, rest) = text.split_once(':').unwrap_or((text, ""));
        let bad = |what: String| SpecError { kind: "spec", spec: text.to_string(), what };
        if name.is_empty() {
            return Err(bad("no name".into()));
        }
        let mut options = Vec::new();
        for item in rest.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            match item.split_once('=') {
                Some((k, _)) if k.trim().is_empty() => return Err(bad(format!("option '{item}' has no key"))),
                Some((k, v)) => options.push((k.trim().to_string(), Some(v.trim().to_string()))),
                None => options.push((item.to_string(), None)),
            }
        }
        Ok(Spec { name: name.trim().to_string(), options })
    }

    /// A comma list of specs (see the module documentation).
    pub fn parse_list(text: &str) -> Result<Vec<Spec>, SpecError> {
        let mut items: Vec<String> = Vec::new();
        let list = comma_items(text).map_err(|k| SpecError {
            kind: "spec",
            spec: text.trim().to_string(),
            what: empty_item(k),
        })?;
        for item in list {
            match items.last_mut() {
                Some(last) if item.contains('=') && !item.contains(':') && last.contains(':') => {
                    last.push(',');
                    last.push_str(item);
                }
                _ => items.push(item.to_string()),
            }
        }
        items.iter().map(|s| Spec::parse(s)).collect()
    }

    /// A comma list in which the item `all` stands for `everything` (the kind's own set),
    /// wherever it comes: `all,first-touch:k=2`. Each spec in order, marked true when `all`
    /// brought it; a spec given twice is kept once, where it first comes. `all` takes no
    /// options.
    pub fn parse_list_with_all(
        text: &str,
        kind: &'static str,
        everything: impl Fn() -> Vec<Spec>,
    ) -> Result<Vec<(Spec, bool)>, SpecError> {
        let mut out: Vec<(Spec, bool)> = Vec::new();
        for spec in Spec::parse_list(text)? {
            let from_all = spec.name == "all";
            if from_all && !spec.options.is_empty() {
                return Err(spec.error(kind, "all takes no options"));
            }
            let specs = if from_all { everything() } else { vec![spec] };
            for spec in specs {
                if !out.iter().any(|(s, _)| *s == spec) {
                    out.push((spec, from_all));
                }
            }
        }
        Ok(out)
    }

    /// The value of `key`: None when absent, Some(None) for a bare flag.
    pub fn get(&self, key: &str) -> Option<Option<&str>> {
        self.options.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v.as_deref())
    }

    /// An error about this spec, for the registry of `kind`.
    pub fn error(&self, kind: &'static str, what: impl Into<String>) -> SpecError {
        SpecError { kind, spec: self.to_string(), what: what.into() }
    }

    /// Fails on the first option whose key is not in `params`.
    pub fn check_keys(&self, kind: &'static str, params: &[Param]) -> Result<(), SpecError> {
        for (k, _) in &self.options {
            if !params.iter().any(|p| p.key == k) {
                let known: Vec<&str> = params.iter().map(|p| p.key).collect();
                let list = if known.is_empty() { "none".to_string() } else { known.join(", ") };
                let hint = crate::did_you_mean(k, known.iter().copied());
                return Err(self.error(kind, format!("unknown option '{k}' ({hint}options: {list})")));
            }
        }
        Ok(())
    }

    /// `key`'s value as a positive integer, or `default` when absent or given bare.
    pub fn positive(&self, kind: &'static str, key: &str, default: u64) -> Result<u64, SpecError> {
        match self.get(key) {
            None | Some(None) => Ok(default),
            Some(v) => v
                .and_then(|v| v.parse::<u64>().ok())
                .filter(|&n| n > 0)
                .ok_or_else(|| self.error(kind, format!("{key} must be a positive integer"))),
        }
    }

    /// `key` as an on/off switch: off when absent; on when given bare or as 1, on or true;
    /// off as 0, off or false.
    pub fn switch(&self, kind: &'static str, key: &str) -> Result<bool, SpecError> {
        match self.get(key) {
            None => Ok(false),
            Some(None | Some("1" | "on" | "true")) => Ok(true),
            Some(Some("0" | "off" | "false")) => Ok(false),
            Some(Some(_)) => Err(self.error(kind, format!("{key} is a switch: {key}, {key}=1 or {key}=0"))),
        }
    }

    /// `key`'s value as an integer (zero allowed), or `default` when absent or given bare.
    pub fn integer(&self, kind: &'static str, key: &str, default: u64) -> Result<u64, SpecError> {
        match self.get(key) {
            None | Some(None) => Ok(default),
            Some(v) => v
                .and_then(|v| v.parse::<u64>().ok())
                .ok_or_else(|| self.error(kind, format!("{key} must be an integer"))),
        }
    }
}

impl fmt::Display for Spec {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(&self.name)?;
        for (i, (k, v)) in self.options.iter().enumerate() {
            f.write_str(if i == 0 { ":" } else { "," })?;
            f.write_str(k)?;
            if let Some(v) = v {
                write!(f, "={v}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn all_stands_for_the_whole_set_anywhere_in_a_list() {
        let every = || vec![Spec::parse("a").unwrap(), Spec::parse("b").unwrap()];
        let names = |text: &str| -> Vec<(String, bool)> {
            Spec::parse_list_with_all(text, "policy", every)
                .unwrap()
                .into_iter()
                .map(|(s, a)| (s.to_string(), a))
                .collect()
        };
        let own = |n: &str, a: bool| (n.to_string(), a);
        assert_eq!(names("all"), [own("a", true), own("b", true)]);
        assert_eq!(names("c:k=1,all"), [own("c:k=1", false), own("a", true), own("b", true)]);
        assert_eq!(names("b,all,b"), [own("b", false), own("a", true)], "a spec given twice is kept once");
        let e = Spec::parse_list_with_all("all:x=1", "policy", every).unwrap_err();
        assert!(e.to_string().contains("all takes no options"), "{e}");
    }

    #[test]
    fn names_options_and_flags() {
        let s = Spec::parse("sampled:cache=16").unwrap();
        assert_eq!((s.name.as_str(), s.get("cache")), ("sampled", Some(Some("16"))));
        let s = Spec::parse("oracle:page").unwrap();
        assert_eq!((s.get("page"), s.get("line")), (Some(None), None));
        assert_eq!(Spec::parse("oracle").unwrap().options, []);
        assert!(Spec::parse(":x").is_err());
        assert!(Spec::parse("a:=3").is_err());
    }

    #[test]
    fn lists_keep_options_with_their_spec() {
        let names =
            |text: &str| -> Vec<String> { Spec::parse_list(text).unwrap().iter().map(|s| s.to_string()).collect() };
        assert_eq!(names("first-touch, ace"), ["first-touch", "ace"]);
        assert_eq!(names("sammu:l1=32,l2=512,oracle:page"), ["sammu:l1=32,l2=512", "oracle:page"]);
        assert_eq!(names("stmap:si=10,mi=5,first-n-fills:n=3,bind"), ["stmap:si=10,mi=5", "first-n-fills:n=3", "bind"]);
    }

    #[test]
    fn keys_are_checked_against_the_parameters() {
        let params = [crate::plugin::count("every", "100", "")];
        let s = Spec::parse("sampled:every=0").unwrap();
        assert!(s.check_keys("detector", &params).is_ok());
        let e = s.positive("detector", "every", 1).unwrap_err();
        assert_eq!(e.to_string(), "detector 'sampled:every=0': every must be a positive integer");
        let e = Spec::parse("sampled:x=1").unwrap().check_keys("detector", &params).unwrap_err();
        assert!(e.to_string().contains("unknown option 'x' (options: every)"), "{e}");
    }

    proptest! {
        #[test]
        fn display_parses_back(name in "[a-z][a-z-]{0,8}", opts in proptest::collection::vec(("[a-z]{1,5}", proptest::option::of("[0-9a-z]{1,4}")), 0..4)) {
            let s = Spec { name, options: opts };
            prop_assert_eq!(Spec::parse(&s.to_string()).unwrap(), s);
        }
    }
}
