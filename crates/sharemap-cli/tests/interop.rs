//! Parquet traces as pandas/pyarrow users see them: pyarrow reads what sharemap writes,
//! and sharemap reads what pyarrow writes (int64 columns, large strings, dictionaries).

use std::process::Command;

fn pyarrow_available() -> bool {
    let ok = Command::new("python3").args(["-c", "import pyarrow"]).output().is_ok_and(|o| o.status.success());
    if !ok {
        assert!(std::env::var_os("CI").is_none(), "CI must install pyarrow (scripts/setup)");
        eprintln!("pyarrow missing: skipping");
    }
    ok
}

fn python(script: &str, args: &[&str]) -> String {
    let out = Command::new("python3").arg("-c").arg(script).args(args).output().unwrap();
    assert!(out.status.success(), "python failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn sharemap(args: &[&str]) -> std::process::Output {
    let out = Command::new(env!("CARGO_BIN_EXE_sharemap")).args(args).output().unwrap();
    assert!(out.status.success(), "sharemap {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    out
}

#[test]
fn pyarrow_reads_sharemap_parquet() {
    if !pyarrow_available() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let pq = d.path().join("t.parquet");
    let pqs = pq.to_str().unwrap();
    sharemap(&["gen", "neighbor", "--threads", "4", "--accesses", "100k", "-o", pqs]);
    let info: serde_json::Value = serde_json::from_slice(&sharemap(&["info", pqs, "--json"]).stdout).unwrap();
    let got = python(
        r#"
import sys, json, pyarrow.parquet as pq
t = pq.read_table(sys.argv[1])
kinds = t.column("kind").to_pylist()
threads = t.column("thread").to_pylist()
meta = json.loads(pq.read_metadata(sys.argv[1]).metadata[b"sharemap.metadata"])
print(t.num_rows, kinds.count("W"), len(set(threads)), t.schema.field("addr").type, meta["source"]["name"])
"#,
        &[pqs],
    );
    let expect = format!("100000 {} 4 uint64 neighbor\n", info["writes"]);
    assert_eq!(got, expect);
}

#[test]
fn sharemap_reads_parquet_written_by_pyarrow() {
    if !pyarrow_available() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let pq = d.path().join("from_pandas.parquet");
    let pqs = pq.to_str().unwrap();
    python(
        r#"
import sys, pyarrow as pa, pyarrow.parquet as pq
n = 1000
t = pa.table({
    "thread": pa.array([i % 3 for i in range(n)], pa.int64()),
    "addr": pa.array([4096 * (i % 7) + 8 * i for i in range(n)], pa.int64()),
    "size": pa.array([8] * n, pa.int64()),
    "kind": pa.array(["W" if i % 4 == 0 else "R" for i in range(n)], pa.large_string()),
})
pq.write_table(t, sys.argv[1])
t2 = t.set_column(3, "kind", t.column("kind").cast(pa.string()).dictionary_encode())
pq.write_table(t2, sys.argv[1] + ".dict")
"#,
        &[pqs],
    );
    for path in [pqs.to_string(), format!("{pqs}.dict")] {
        let info: serde_json::Value =
            serde_json::from_slice(&sharemap(&["info", &path, "--from", "parquet", "--json"]).stdout).unwrap();
        assert_eq!(info["accesses"], 1000, "{path}");
        assert_eq!(info["writes"], 250, "{path}");
        assert_eq!(info["threads"], 3, "{path}");
    }
    // And it converts to a native trace and back to CSV with the same rows.
    let csv = d.path().join("x.csv");
    sharemap(&["convert", pqs, csv.to_str().unwrap()]);
    let text = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(text.lines().count(), 1001);
    assert_eq!(text.lines().nth(2).unwrap(), "1,0x1008,8,R");
}
