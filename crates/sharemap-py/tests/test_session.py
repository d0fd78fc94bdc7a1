"""The Python Session against the command line's JSON on the same inputs: identical numbers,
numpy dtypes and shapes, and errors as exception classes."""

import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import sharemap

ROOT = Path(__file__).resolve().parents[3]
CLI = os.environ.get("SHAREMAP_BIN", str(ROOT / "target" / "release" / "sharemap"))
MACHINE = "numa:4 pu:2"


def cli(*args):
    out = subprocess.run([CLI, *args], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    path = tmp_path_factory.mktemp("traces") / "sor.trace"
    report = sharemap.gen("sor", path, threads=8, accesses=200_000, seed=3)
    assert report["accesses"] == 200_000 and path.exists()
    return path


def test_info_matches_the_cli(trace):
    ours = sharemap.Session(trace).info()
    theirs = json.loads(cli("info", str(trace), "--json"))
    for key in ("accesses", "reads", "writes", "threads", "pages", "sharing", "per_thread"):
        assert ours[key] == theirs[key], key


def test_place_matches_the_cli(trace):
    df = sharemap.Session(trace, machine=MACHINE).place(policies="all")
    theirs = json.loads(cli("place", str(trace), "--machine", MACHINE, "--policy", "all", "--json"))
    assert list(df["name"]) == [p["name"] for p in theirs["policies"]]
    assert df["name"].iloc[0] == "optimal"
    for column in ("cost", "mcpr", "local_ratio", "remote", "moves", "replications", "vs_optimal"):
        assert list(df[column]) == [p[column] for p in theirs["policies"]], column
    assert df["cost"].dtype == np.float64 and df["remote"].dtype == np.int64
    assert df.attrs["accesses"] == theirs["accesses"] and df.attrs["pages"] == theirs["pages"]
    assert df.attrs["situation"]["costs"] == theirs["costs"]


def test_place_with_a_thread_map_and_settings(trace):
    s = sharemap.Session(trace, machine=MACHINE)
    df = s.place(policies="first-n-fills,bind", thread_map="scatter", settings=["first-n-fills.n=4", "bind.node=3"])
    theirs = json.loads(
        cli("place", str(trace), "--machine", MACHINE, "-p", "first-n-fills,bind", "--thread-map", "scatter",
            "--set", "first-n-fills.n=4", "--set", "bind.node=3", "--json")
    )
    assert list(df["cost"]) == [p["cost"] for p in theirs["policies"]]


def test_analyze_gives_numpy_and_pandas(trace, tmp_path):
    a = sharemap.Session(trace, machine=MACHINE).analyze(compare="sampled:every=4")
    assert a.matrix.dtype == np.float64 and a.matrix.shape == (8, 8)
    assert np.array_equal(a.matrix, a.matrix.T) and np.all(np.diag(a.matrix) == 0)
    cli("analyze", str(trace), "--machine", MACHINE, "-o", str(tmp_path / "out"))
    # numalize's comm.csv lists threads from the last to the first; TopoMatch's .mat in order.
    comm = np.loadtxt(tmp_path / "out" / "comm.csv", delimiter=",")
    assert np.array_equal(a.matrix, comm[::-1])
    assert np.array_equal(a.matrix, np.loadtxt(tmp_path / "out" / "comm.mat"))
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert a.mapping_potential == summary["mapping_potential"]
    assert len(a.pages) == summary["pages"]
    assert list(a.pages.columns[:2]) == ["page", "first_touch"] and a.pages["t0"].dtype == np.uint64
    assert int(a.pages[[f"t{t}" for t in range(8)]].to_numpy().sum()) == summary["accesses"]
    assert 0.0 <= a.raw["accuracy"]["correlation"] <= 1.0
    html = a._repr_html_()
    assert html.startswith("<figure><svg") and "8 threads" in html
    # The heatmap is the command line's own drawing of the oracle's matrix (the compared
    # detector's is not it).
    oracle = sharemap.Session(trace, machine=MACHINE).analyze()
    assert (tmp_path / "out" / "heatmap.svg").read_text() in oracle._repr_html_()


def test_simulate_matches_the_cli(trace):
    df = sharemap.Session(trace, machine="sammu").simulate(mechanisms="os,oracle,random")
    theirs = json.loads(cli("simulate", str(trace), "--mechanism", "os,oracle,random", "--json"))
    assert list(df["mechanism"]) == ["os", "oracle", "random"]
    for k, m in enumerate(theirs["mechanisms"]):
        assert df["time_ns"].iloc[k] == m["time_ns"]
        assert df["local_dram_share"].iloc[k] == m["local_dram_share"]
        assert df["L1_mpka"].iloc[k] == m["mpka"][0]["mpka"]
    assert df["vs_os_time"].iloc[0] == 1.0


def test_map_matches_the_cli(trace):
    m = sharemap.Session(trace, machine="pack:2 core:4 pu:1").map(algorithms="sharemap,compact,scatter")
    theirs = json.loads(cli("map", str(trace), "--machine", "pack:2 core:4 pu:1", "--algo", "sharemap,compact,scatter", "--json"))
    assert list(m.mappings["algorithm"]) == [t["algorithm"] for t in theirs]
    assert list(m.mappings["cost"]) == [t["cost"] for t in theirs]
    assert [list(x) for x in m.mappings["mapping"]] == [t["mapping"] for t in theirs]
    assert 0.0 <= m.potential["structural"] <= 1.0 and m.random_cost >= m.mappings["cost"].min()


def test_gen_by_footprint_matches_the_cli(tmp_path):
    """A footprint and iterations size the run as `sharemap gen` does: same bytes on disk."""
    ours, theirs = tmp_path / "py.trace", tmp_path / "cli.trace"
    report = sharemap.gen("neighbor", ours, threads=4, footprint=16, iterations=3, reuse=2, word=4)
    cli("gen", "neighbor", "--threads", "4", "--footprint", "16", "--iterations", "3", "--reuse", "2", "--word", "4", "-o", str(theirs))
    assert ours.read_bytes() == theirs.read_bytes()
    assert report["footprint_pages"] == 16
    info = json.loads(cli("info", str(ours), "--json"))
    assert info["pages"] == 4 * 16
    with pytest.raises(sharemap.SettingError):
        sharemap.gen("neighbor", tmp_path / "x.trace", footprint="auto")
    with pytest.raises(sharemap.SettingError):
        sharemap.gen("neighbor", tmp_path / "x.trace", footprint="3 parsecs")


def test_machine_matches_the_cli():
    assert sharemap.machine("pack:2 numa:2 core:4 pu:2") == json.loads(cli("machine", "pack:2 numa:2 core:4 pu:2", "--json"))


def test_errors_are_exception_classes(trace, tmp_path):
    # A missing trace is refused when the Session is made, as a file Python cannot find.
    with pytest.raises(sharemap.MissingFileError) as e:
        sharemap.Session(tmp_path / "missing.trace")
    assert isinstance(e.value, FileNotFoundError) and isinstance(e.value, sharemap.TraceError)
    with pytest.raises(sharemap.MachineError):
        sharemap.Session(trace, machine="pack:2 core:3")
    with pytest.raises(sharemap.SpecError) as e:
        sharemap.Session(trace, machine=MACHINE).place(policies="nosuch")
    assert "unknown policy 'nosuch'" in str(e.value) and e.value.kind == "Policy"
    with pytest.raises(sharemap.SettingError) as e:
        sharemap.Session(trace, machine=MACHINE).place(cost="r=x")
    assert e.value.kind == "Cost"
    with pytest.raises(sharemap.SettingError):
        sharemap.Session(trace, machine=MACHINE).place(policies="bind", settings=["bind.node=9"])
    with pytest.raises(sharemap.SpecError):
        sharemap.Session(trace).analyze(detector="oracle:nosuch")
    with pytest.raises(sharemap.SettingError):
        sharemap.Session(trace, exclude="0x10")
    bad = tmp_path / "bad.trace"
    bad.write_bytes(b"not a trace at all")
    with pytest.raises(sharemap.TraceError):
        sharemap.Session(bad)
    assert issubclass(sharemap.TraceError, sharemap.Error)


# Arguments out of range or of the wrong type: each raises a sharemap.Error that is also the
# ValueError or TypeError Python code expects, naming the argument.
OUT_OF_RANGE = [
    ("seed", lambda t: sharemap.Session(t, seed=-1)),
    ("seed", lambda t: sharemap.Session(t, seed=2**70)),
    ("window", lambda t: sharemap.Session(t).analyze(window=2**64)),
    ("memory_mb", lambda t: sharemap.Session(t).place(policies="first-touch", memory_mb=-5)),
    ("memory_mb", lambda t: sharemap.Session(t).place(policies="first-touch", memory_mb=5)),
    ("page_size", lambda t: sharemap.Session(t).simulate(mechanisms="os", page_size=-4096)),
    ("accesses", lambda t: sharemap.gen("sor", t.parent / "never.trace", accesses=-1)),
    ("threads", lambda t: sharemap.gen("sor", t.parent / "never.trace", threads=2**32)),
    ("format", lambda t: sharemap.gen("sor", t.parent / "never.trace", accesses=100, format="nosuch")),
]

WRONG_TYPE = [
    ("seed", lambda t: sharemap.Session(t, seed="1")),
    ("machine", lambda t: sharemap.Session(t, machine=4)),
    ("path", lambda t: sharemap.Session(4)),
    ("window", lambda t: sharemap.Session(t).analyze(window=1.5)),
    ("settings", lambda t: sharemap.Session(t).place(settings="bind.node=1")),
    ("threads", lambda t: sharemap.gen("sor", t.parent / "never.trace", threads="8")),
]


@pytest.mark.parametrize("name,call", OUT_OF_RANGE)
def test_values_out_of_range_raise_setting_errors(trace, name, call):
    with pytest.raises(sharemap.SettingError) as e:
        call(trace)
    assert isinstance(e.value, ValueError) and isinstance(e.value, sharemap.Error)
    assert name in str(e.value), str(e.value)
    assert not (trace.parent / "never.trace").exists()


@pytest.mark.parametrize("name,call", WRONG_TYPE)
def test_wrong_types_raise_argument_type_errors(trace, name, call):
    with pytest.raises(sharemap.ArgumentTypeError) as e:
        call(trace)
    assert isinstance(e.value, TypeError) and isinstance(e.value, sharemap.Error)
    assert name in str(e.value) or name == "path", str(e.value)


def test_error_classes_pickle_and_carry_a_kind(trace):
    """Errors raised on a Dask worker travel back pickled: each class is found by its name."""
    import pickle

    try:
        sharemap.Session(trace, seed=-1)
    except sharemap.SettingError as e:
        again = pickle.loads(pickle.dumps(e))
    assert type(again) is sharemap.SettingError and str(again) == "seed=-1: expected an integer from 0 to 18446744073709551615"
    assert sharemap.SettingError.kind == "Setting" and sharemap.Error.kind == "Error"


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    path = tmp_path_factory.mktemp("big") / "random.trace"
    sharemap.gen("random", path, threads=8, accesses=20_000_000, seed=1)
    return path


def test_long_passes_release_the_gil(big):
    """Python threads run while sharemap reads: a counter in another thread advances."""
    import threading

    count, stop = [0], threading.Event()

    def spin():
        while not stop.is_set():
            count[0] += 1

    spinner = threading.Thread(target=spin)
    spinner.start()
    try:
        before = count[0]
        sharemap.Session(big).info()
        during = count[0] - before
    finally:
        stop.set()
        spinner.join()
    assert during > 10_000, during


def test_ctrl_c_stops_a_pass(big):
    """A signal during a long pass stops it and raises KeyboardInterrupt, soon."""
    import signal
    import threading
    import time

    # Python turns SIGINT into KeyboardInterrupt only if it was not ignored when Python
    # started: a test suite launched as a background job of a script inherits it ignored.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        session = sharemap.Session(big, machine="sammu")
        timer = threading.Timer(0.5, lambda: signal.pthread_kill(threading.main_thread().ident, signal.SIGINT))
        start = time.monotonic()
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            session.simulate(mechanisms="all")
        timer.join()
        assert time.monotonic() - start < 5.0
    finally:
        signal.signal(signal.SIGINT, previous)


def test_type_stubs_cover_the_api():
    stubs = (Path(sharemap.__file__).parent / "__init__.pyi").read_text()
    for name in sharemap.__all__:
        assert f"class {name}" in stubs or f"def {name}" in stubs or f"{name}: " in stubs, name
    for method in ("info", "machine", "analyze", "place", "simulate", "map", "advise", "window"):
        assert f"def {method}(" in stubs
    # Each call says what it raises, naming only sharemap's classes.
    import ast

    for name in ("__init__.pyi", "dask.pyi"):
        tree = ast.parse((Path(sharemap.__file__).parent / name).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and (node.name == "__init__" or not node.name.startswith("_")):
                doc = ast.get_docstring(node) or ""
                assert doc.startswith("Raises "), (name, node.name)
                named = {w.strip(",.()") for w in doc.split() if w.strip(",.()").endswith("Error")}
                assert all(hasattr(sharemap, n) for n in named), (name, node.name, named)


def test_the_package_says_its_version_and_exports_what_it_names():
    # The version is the command line's: one release, one number.
    assert cli("--version").split()[-1] == sharemap.__version__
    for name in sharemap.__all__:
        assert hasattr(sharemap, name), name


def test_a_window_or_a_phase_is_what_every_analysis_reads(trace):
    s = sharemap.Session(trace, machine=MACHINE, window="1000-51000")
    assert s.window()["accesses"] == 50_000 and s.window()["total"] == 200_000
    assert s.info()["accesses"] == 50_000
    theirs = json.loads(
        cli("place", str(trace), "--machine", MACHINE, "-p", "first-touch", "--window", "1000-51000", "--json")
    )
    assert list(s.place(policies="first-touch")["cost"]) == [p["cost"] for p in theirs["policies"]]
    phased = trace.parent / "phases.trace"
    sharemap.gen("phase-change", phased, threads=4, accesses=100_000, seed=3)
    by_number = sharemap.Session(phased, phase=2)
    assert by_number.window()["what"].startswith("phase 2")
    accesses = by_number.info()["accesses"]
    assert 0 < accesses < 100_000
    theirs = json.loads(cli("simulate", str(phased), "--phase", "2", "--mechanism", "os", "--json"))
    assert theirs["mechanisms"][0]["accesses"] == accesses
    # The generated trace marks no region of interest: all of it is read, or none is required.
    assert sharemap.Session(trace).window() is None
    with pytest.raises(sharemap.SettingError) as e:
        sharemap.Session(trace, roi=True)
    assert e.value.kind == "Window" and "no region of interest" in str(e.value)
    with pytest.raises(sharemap.SettingError):
        sharemap.Session(trace, roi=False, phase=1)
    with pytest.raises(sharemap.ArgumentTypeError):
        sharemap.Session(trace, roi="yes")


def test_advise_matches_the_cli(trace):
    ours = sharemap.Session(trace, machine="pack:2 numa:1 l3:1(size=1MiB) core:4 pu:1").advise()
    theirs = json.loads(cli("advise", str(trace), "--machine", "pack:2 numa:1 l3:1(size=1MiB) core:4 pu:1", "--json"))
    for key in ("verdict", "why", "check", "apply", "best", "worth_it"):
        assert ours[key] == theirs[key], key
    assert [c["speedup"] for c in ours["candidates"]] == [c["speedup"] for c in theirs["candidates"]]
    with pytest.raises(sharemap.SettingError):
        sharemap.Session(trace).advise(threshold=150)


def test_shared_matches_the_cli(trace, tmp_path):
    df = sharemap.Session(trace).shared()
    cli("analyze", str(trace), "--objects", "-o", str(tmp_path / "out"))
    theirs = json.loads((tmp_path / "out" / "summary.json").read_text())["what_is_shared"]
    assert list(df["name"]) == [o["name"] for o in theirs["objects"]]
    assert list(df["lines_read_shared"]) == [o["lines"]["read_shared"] for o in theirs["objects"]]
    assert df.attrs["lines"] == theirs["lines"]
    assert df.attrs["named"] is False
    assert (df["kind"] == "unknown").all()


def test_comma_lists_are_also_taken_as_lists(trace):
    s = sharemap.Session(trace, machine="numa:2 pu:4")
    as_text = s.simulate(mechanisms="os,oracle")
    as_list = s.simulate(mechanisms=["os", "oracle"])
    assert list(as_list["mechanism"]) == list(as_text["mechanism"])
    assert list(as_list["time_ns"]) == list(as_text["time_ns"])
    assert list(s.place(policies=("first-touch", "bind"))["name"]) == list(s.place(policies="first-touch,bind")["name"])
    assert s.map(algorithms=["sharemap", "compact"]).mappings.shape[0] == 2
    with pytest.raises(sharemap.ArgumentTypeError, match="policies"):
        s.place(policies=["os", 3])
    with pytest.raises(sharemap.ArgumentTypeError, match="mechanisms"):
        s.simulate(mechanisms=5)
