"""sharemap.dask on a local cluster of two worker processes: the same answers as one Session
on the whole trace."""

import math
import subprocess
from pathlib import Path

import numpy as np
import pytest

import sharemap
import sharemap.dask

ROOT = Path(__file__).resolve().parents[3]
CLI = str(ROOT / "target" / "release" / "sharemap")
MACHINE = "numa:4 pu:2"
# The fill counters count fills at a cache every page's accesses go through, and mappings
# end at a TLB's evictions: by parts only when counting references (fills-kb=0) with
# mappings that end at writes alone (tlb=0).
POLICIES = "first-touch,first-n-fills:fills-kb=0,interleave,random,bind,replicate-counter:fills-kb=0,tlb=0,ace,delay"


@pytest.fixture(scope="module")
def cluster():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as lc:
        with distributed.Client(lc) as client:
            yield client


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    d = tmp_path_factory.mktemp("dask")
    trace = d / "nb.trace"
    sharemap.gen("neighbor", trace, threads=8, accesses=400_000, seed=5)
    parts = d / "nb-parts"
    # The command line writes the same dataset as the Python function.
    out = subprocess.run([CLI, "convert", str(trace), str(parts), "--partition-pages", "16"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    index = sharemap.dask.read_index(parts)
    assert len(index["parts"]) > 2 and index["accesses"] == 400_000
    again = sharemap.dask.partition(trace, d / "again", pages=16)
    assert again == index
    return trace, parts


def test_place_by_parts_is_the_whole_traces(cluster, traces):
    trace, parts = traces
    whole = sharemap.Session(trace, machine=MACHINE).place(policies=POLICIES, cost="ace")
    split = sharemap.dask.place(parts, machine=MACHINE, policies=POLICIES, cost="ace", client=cluster)
    assert list(split["name"]) == list(whole["name"])
    for column in ("local", "remote", "global", "moves", "replications"):
        assert list(split[column]) == list(whole[column]), column
    assert list(split.columns) == list(whole.columns)
    for a, b in zip(split["cost"], whole["cost"]):
        assert math.isclose(a, b, rel_tol=1e-12), (a, b)
    for a, b in zip(split["vs_optimal"], whole["vs_optimal"]):
        assert math.isclose(a, b, rel_tol=1e-12)


def test_policies_counting_fills_are_refused_by_parts(cluster, traces):
    _, parts = traces
    with pytest.raises(sharemap.SpecError) as e:
        sharemap.dask.place(parts, machine=MACHINE, policies="first-touch,replicate-counter", cost="ace", client=cluster)
    assert "replicate-counter" in str(e.value)


def test_analyze_by_parts_is_the_whole_traces(cluster, traces):
    trace, parts = traces
    whole = sharemap.Session(trace, machine=MACHINE).analyze()
    split = sharemap.dask.analyze(parts, machine=MACHINE, client=cluster)
    assert np.array_equal(split.matrix, whole.matrix)
    assert split.pages.equals(whole.pages)
    assert math.isclose(split.mapping_potential, whole.mapping_potential, rel_tol=1e-12)


def test_per_page_names_what_places_by_parts_and_it_matches_the_whole(cluster, traces):
    trace, parts = traces
    named = sharemap.dask.per_page()
    assert "first-touch" in named and "numa-balancing" not in named and "optimal" not in named
    # Each is what "all" runs by parts, and each gives the whole trace's counts.
    split = sharemap.dask.place(parts, machine=MACHINE, policies="all", cost="ace", client=cluster)
    assert list(split["name"])[1:] == named
    whole = sharemap.Session(trace, machine=MACHINE).place(policies=",".join(named), cost="ace")
    assert list(split["local"]) == list(whole["local"])
    assert sharemap.dask.per_page("first-n-fills") == []
    assert sharemap.dask.per_page("first-n-fills:fills-kb=0") == ["first-n-fills:fills-kb=0"]


def test_policies_that_need_the_whole_trace_are_refused(traces):
    _, parts = traces
    for policy in ("numa-balancing", "round-robin", "sammu", "marathe:source=tlb-miss"):
        with pytest.raises(sharemap.SpecError, match="whole trace"):
            sharemap.dask.place(parts, machine=MACHINE, policies=policy)
    with pytest.raises(sharemap.SettingError, match="fixed placement"):
        sharemap.dask.place(parts, machine=MACHINE, thread_map="sharemap")


def test_a_missing_or_damaged_dataset_raises_sharemap_errors(traces, tmp_path):
    with pytest.raises(sharemap.MissingFileError) as e:
        sharemap.dask.place(tmp_path / "nonexistent-parts")
    assert isinstance(e.value, FileNotFoundError) and "_sharemap.json" in str(e.value)
    _, parts = traces
    for name, text in [
        ("corrupt", "{not json"),
        ("binary", "\udcff"),
        ("list", "[]"),
        ("no-parts", '{"accesses": 1, "annotations": 0, "partition_pages": 16}'),
        ("escaping", '{"accesses": 1, "annotations": 0, "partition_pages": 16, "parts": [{"file": "../x.parquet"}]}'),
        ("negative", '{"accesses": -1, "annotations": 0, "partition_pages": 16, "parts": [{"file": "a.parquet"}]}'),
    ]:
        d = tmp_path / name
        d.mkdir()
        (d / "_sharemap.json").write_bytes(text.encode("utf-8", "surrogateescape"))
        with pytest.raises(sharemap.TraceError) as e:
            sharemap.dask.read_index(d)
        assert isinstance(e.value, ValueError) and "not a dataset index" in str(e.value), (name, str(e.value))
    with pytest.raises(sharemap.SettingError):
        sharemap.dask.place(parts, seed=-1)
    with pytest.raises(sharemap.ArgumentTypeError):
        sharemap.dask.place(parts, settings="bind.node=1")


def test_a_bad_machine_is_refused_before_any_task_starts(traces):
    # No client is given: a task started would run (and fail) on the local scheduler; the
    # error comes from the check before, with the spec's own words.
    _, parts = traces
    for call in (sharemap.dask.place, sharemap.dask.analyze):
        with pytest.raises(sharemap.MachineError, match="nonsense"):
            call(parts, machine="nonsense:3")
    split = sharemap.dask.place(parts, machine=MACHINE, policies=["first-touch", "bind"], cost="ace")
    assert list(split["name"])[1:] == ["first-touch", "bind"]
