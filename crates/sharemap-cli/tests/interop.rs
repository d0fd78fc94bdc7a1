//! Parquet traces as pandas/pyarrow users see them: pyarrow reads what sharemap writes,
//! and sharemap reads what pyarrow writes (int64 columns, large strings, dictionaries).

use std::process::Command;

fn pyarrow_available() -> bool {
    let ok = Command::new("python3").args(["-c", "import pyarrow"]).output().is_ok_and(|o| o.status.success());
    if !ok {
        use sharemap_testkit::{Need, skip};
        skip(Need::Pyarrow, "python3 cannot import pyarrow (scripts/setup installs it)");
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

/// Row groups smaller and larger than a chunk, unsigned and nullable columns, and what
/// cannot be a trace (an empty value, a negative address, a kind other than R or W, a
/// float column) refused in one line naming the column or row.
#[test]
fn row_groups_column_types_and_bad_values_from_pyarrow() {
    if !pyarrow_available() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let base = d.path().join("t.parquet");
    let b = base.to_str().unwrap();
    python(
        r#"
import sys, pyarrow as pa, pyarrow.parquet as pq
n = 200_000
cols = {
    "thread": pa.array([i % 5 for i in range(n)], pa.uint32()),
    "addr": pa.array([(1 << 63) + 64 * i for i in range(n)], pa.uint64()),
    "size": pa.array([4] * n, pa.uint16()),
    "kind": pa.array(["w" if i % 10 == 0 else "r" for i in range(n)]),
}
pq.write_table(pa.table(cols), sys.argv[1] + ".groups", row_group_size=3001)
def bad(name, column, values, typ=None):
    c = dict(cols)
    c = {k: v.slice(0, 10) for k, v in c.items()}
    c[column] = pa.array(values, typ)
    pq.write_table(pa.table(c), sys.argv[1] + "." + name)
bad("null", "addr", [1, 2, None, 4, 5, 6, 7, 8, 9, 10], pa.int64())
bad("negative", "addr", [1, 2, 3, -4, 5, 6, 7, 8, 9, 10], pa.int64())
bad("kind", "kind", ["R"] * 7 + ["X", "R", "R"])
bad("float", "size", [8.0] * 10)
"#,
        &[b],
    );
    let info: serde_json::Value =
        serde_json::from_slice(&sharemap(&["info", &format!("{b}.groups"), "--from", "parquet", "--json"]).stdout)
            .unwrap();
    assert_eq!(
        (info["accesses"].as_u64(), info["writes"].as_u64(), info["threads"].as_u64()),
        (Some(200_000), Some(20_000), Some(5))
    );
    assert_eq!(info["max_addr"].as_u64(), Some((1 << 63) + 64 * 199_999), "unsigned addresses past 2^63 kept");
    for (name, says) in [
        ("null", "column 'addr' has empty values"),
        ("negative", "column 'addr' has negative values"),
        ("kind", "row 7: bad kind 'X' (R or W)"),
        ("float", "column 'size' must be integers, not DOUBLE"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_sharemap"))
            .args(["info", &format!("{b}.{name}"), "--from", "parquet"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}: {err}");
        assert!(err.contains(says) && err.lines().count() == 1, "{name}: {err}");
    }
}

/// More rows than one row group holds: written, read back by pyarrow and by sharemap, the
/// same accesses in the same order.
#[test]
fn traces_beyond_one_row_group_round_trip() {
    if !pyarrow_available() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let native = d.path().join("t.trace");
    let pq = d.path().join("t.parquet");
    let back = d.path().join("back.trace");
    let s = |p: &std::path::Path| p.to_str().unwrap().to_string();
    sharemap(&["gen", "migratory", "--threads", "6", "--accesses", "2500k", "-o", &s(&native)]);
    sharemap(&["convert", &s(&native), &s(&pq)]);
    let groups = python(
        "import sys, pyarrow.parquet as pq; m = pq.read_metadata(sys.argv[1]); print(m.num_rows, m.num_row_groups)",
        &[&s(&pq)],
    );
    assert_eq!(groups, "2500000 3\n");
    sharemap(&["convert", &s(&pq), &s(&back)]);
    let csv = |p: &std::path::Path| {
        let out = d.path().join(format!("{}.csv", p.file_name().unwrap().to_string_lossy()));
        sharemap(&["convert", &s(p), &s(&out)]);
        std::fs::read(out).unwrap()
    };
    assert!(csv(&native) == csv(&back), "native -> Parquet -> native changed the rows");
}
