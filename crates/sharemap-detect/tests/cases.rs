//! The shared case suite's sharing cases (sharemap-decide's cases.toml, `[[sharing]]`) in
//! the detectors: each case as a trace of transactions, the matrix and the distinct
//! addresses the detector finds compared with the case's (the STM's own STMap runs the same
//! cases in sharemap-cli's tests/stm.rs).

use sharemap_decide::cases::sharing;
use sharemap_machine::{Machine, ThreadPlacement};

#[test]
fn the_detectors_find_each_sharing_case_matrix() {
    let cases = sharing::for_layer("detect");
    assert!(cases.len() >= 4, "the suite has STMap's cases");
    let placement = ThreadPlacement::identity(&Machine::from_spec("pu:1").unwrap());
    let mut failures = Vec::new();
    for case in &cases {
        let found = sharemap_detect::detect(&mut case.trace(), &case.detector, &placement).unwrap();
        let report = found.report.as_ref().expect("STMap reports its decision");
        let distinct = report.json["distinct_addresses"].as_u64().expect("distinct addresses in the report");
        let m = &found.matrix;
        if let Err(e) = case.check("detect", m.threads(), |a, b| m.get(a, b), distinct) {
            failures.push(e);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
