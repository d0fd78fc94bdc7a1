//! Mapping quality against Scotch (`scotch_gmap`, Debian's scotch package) on the synthetic
//! matrices, at 64 and 256 PUs, under sharemap's latency metric. Prints each algorithm's cost
//! relative to Scotch's (below 1 = cheaper than Scotch) and its time. Scotch runs with
//! `-b0 -cb` (strict load balance): by default it may put two threads on one PU, which no
//! other mapping here is allowed to do; the run stops if a mapping of Scotch still does.
//!
//! cargo run --release -p sharemap-mapping --example versus_scotch [SEEDS]

use sharemap_machine::Machine;
use sharemap_mapping::{CostModel, PairCosts, build, mapping_cost, matrices, scotch};
use std::process::Command;
use std::time::Instant;

fn main() {
    let seeds: u64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(3);
    let dir = tempfile::tempdir().expect("temporary directory");
    let algos = ["sharemap", "bisection", "eagermap", "treematch", "compact"];
    println!(
        "{:<13} {:>4} {:>14} {:>9} {}",
        "matrix",
        "PUs",
        "Scotch cost",
        "Scotch ms",
        algos.map(|a| format!("{a:>10} {:>6}", "ms")).join(" ")
    );
    for spec in ["pack:4 numa:1 l3:1 core:8 pu:2", "pack:8 numa:1 l3:1 core:16 pu:2"] {
        let machine = Machine::from_spec(spec).unwrap();
        let costs = PairCosts::new(&machine, CostModel::Latency);
        let p = machine.pu_count();
        let tgt = dir.path().join("machine.tgt");
        std::fs::write(&tgt, scotch::tleaf(&machine, CostModel::Latency)).unwrap();
        for (kind, _) in matrices::KINDS {
            let mut ratio = vec![0.0; algos.len()];
            let mut ms = vec![0.0; algos.len()];
            let (mut scotch_cost, mut scotch_ms) = (0.0, 0.0);
            for seed in 1..=seeds {
                let m = matrices::make(kind, p, seed).unwrap();
                let grf = dir.path().join("comm.grf");
                std::fs::write(&grf, scotch::graph(&m)).unwrap();
                let out = dir.path().join("scotch.map");
                let t = Instant::now();
                let run = Command::new("scotch_gmap")
                    .args(["-b0", "-cb"])
                    .arg(&grf)
                    .arg(&tgt)
                    .arg(&out)
                    .output()
                    .expect("scotch_gmap (apt-get install scotch)");
                scotch_ms += t.elapsed().as_secs_f64() * 1e3 / seeds as f64;
                assert!(run.status.success(), "scotch_gmap: {}", String::from_utf8_lossy(&run.stderr));
                let mut theirs = vec![0usize; p];
                for line in std::fs::read_to_string(&out).unwrap().lines().skip(1) {
                    let f: Vec<usize> = line.split_whitespace().map(|x| x.parse().unwrap()).collect();
                    theirs[f[0]] = f[1];
                }
                let mut used = theirs.clone();
                used.sort();
                used.dedup();
                assert_eq!(used.len(), p, "Scotch put two threads on one PU ({kind}, seed {seed})");
                let reference = mapping_cost(&m, &theirs, &costs);
                scotch_cost += reference / seeds as f64;
                for (i, name) in algos.iter().enumerate() {
                    let t = Instant::now();
                    let mine = build(name, seed).unwrap().map(&m, &machine, &costs).unwrap();
                    ms[i] += t.elapsed().as_secs_f64() * 1e3 / seeds as f64;
                    ratio[i] += mapping_cost(&m, &mine, &costs) / reference / seeds as f64;
                }
            }
            let cells: Vec<String> = ratio.iter().zip(&ms).map(|(r, t)| format!("{r:>10.3} {t:>6.1}")).collect();
            println!("{kind:<13} {p:>4} {scotch_cost:>14.0} {scotch_ms:>9.1} {}", cells.join(" "));
        }
    }
}
