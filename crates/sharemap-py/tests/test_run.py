"""sharemap.run and sharemap.record against the command line on the same program: the same
recording, the same configurations in the same order, and errors as exception classes."""

import json
import os
import subprocess
from pathlib import Path

import pytest

import sharemap

ROOT = Path(__file__).resolve().parents[3]
CLI = os.environ.get("SHAREMAP_BIN", str(ROOT / "target" / "release" / "sharemap"))

# Two threads, each storing to 1000 ints of its own half of one array: 2000 traced stores.
PROGRAM = r"""
#include <pthread.h>
#include <stdlib.h>
static int data[2000];
static void *work(void *arg) {
    volatile int *half = data + 1000 * (long)arg;
    for (int i = 0; i < 1000; i++) half[i] = i;
    return NULL;
}
int main(int argc, char **argv) {
    pthread_t t[2];
    for (long k = 0; k < 2; k++) pthread_create(&t[k], NULL, work, (void *)k);
    for (int k = 0; k < 2; k++) pthread_join(t[k], NULL);
    return argc > 1 ? atoi(argv[1]) : 0;
}
"""


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    d = tmp_path_factory.mktemp("program")
    src = d / "halves.c"
    src.write_text(PROGRAM)
    out = subprocess.run([CLI, "cc", "-O2", "-pthread", str(src), "-o", str(d / "halves")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return d / "halves"


def test_record_matches_the_cli(program, tmp_path):
    ours = sharemap.record([program], tmp_path / "py.trace", sharemap_binary=CLI)
    subprocess.run([CLI, "record", "-o", str(tmp_path / "cli.trace"), "--", str(program)], check=True, capture_output=True)
    theirs = json.loads(subprocess.run([CLI, "info", str(tmp_path / "cli.trace"), "--json"], capture_output=True, text=True, check=True).stdout)
    assert ours["exit"] == 0 and ours["lost"] == 0
    assert (ours["threads"], ours["accesses"]) == (theirs["threads"], theirs["accesses"])
    assert ours["accesses"] >= 2000
    assert sharemap.Session(tmp_path / "py.trace").info()["accesses"] == ours["accesses"]


def test_run_measures_against_os_first(program):
    runs = sharemap.run([program], thread_maps=["compact"], repeat=3, sharemap_binary=CLI)
    assert list(runs["name"]) == ["os", "compact"]
    assert runs["normalized"][0] == 1.0
    assert all(len(s) == 3 for s in runs["seconds"])
    assert runs["ci95"].notna().all()
    assert runs.attrs["repeat"] == 3
    # The CLI measures the same configurations, in the same order.
    out = subprocess.run(
        [CLI, "run", "--thread-map", "compact", "--repeat", "3", "--json", "--", str(program)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert [r["name"] for r in json.loads(out.stdout)] == list(runs["name"])


def test_run_refusals_are_exceptions(program):
    with pytest.raises(sharemap.SpecError, match="unknown mechanism 'nosuch'"):
        sharemap.run([program], mechanisms=["nosuch"], sharemap_binary=CLI)
    with pytest.raises(sharemap.SettingError, match="expected a number of runs"):
        sharemap.run([program], repeat=0, sharemap_binary=CLI)
    with pytest.raises(sharemap.RunError, match="no such file"):
        sharemap.run(["./no-such-program"], sharemap_binary=CLI)
    with pytest.raises(sharemap.RunError, match="exited with status 3"):
        sharemap.run([program, "3"], repeat=2, sharemap_binary=CLI)
    with pytest.raises(sharemap.ArgumentTypeError):
        sharemap.run(str(program), sharemap_binary=CLI)
    with pytest.raises(sharemap.RunError, match="libsharemap_pin.so is missing"):
        sharemap.run([program], sharemap_binary=Path("/nonexistent/bin/sharemap"))
