"""Traces beyond one machine, on Dask.

A trace is cut into a Parquet dataset partitioned by page range (``sharemap convert TRACE DIR
--partition-pages N``, or ``partition`` below): every page's accesses are in one part. Once
the thread placement is fixed, the optimum and the policies that decide a page from its own
references (``sharemap list policies``: first touch, first-n-fills, interleave, random,
bind, the counter replication policies, ACE, Delay) give per part what the whole trace gives
its pages, and the oracle's sharing is a sum over cache lines; so each part runs through a
Session on a Dask worker and the results add up::

    from distributed import Client
    import sharemap.dask
    client = Client("tcp://scheduler:8786")      # or LocalCluster(n_workers=...)
    sharemap.dask.partition("big.trace", "big-parts", pages=4096)
    df = sharemap.dask.place("big-parts", machine="numa:4 pu:16", policies="first-touch,ace")
    a = sharemap.dask.analyze("big-parts", machine="numa:4 pu:16")

Every worker needs the ``sharemap`` package and the dataset's files (a shared file system, or
the same path on each). Policies that follow the whole trace's clock or order (time-driven
ones, round-robin's touch order, SAMMU's TLBs, profile samplers) are refused, as is a
dataset whose trace had annotations (left out of the parts).
"""

from __future__ import annotations

import json
import os
from typing import Iterable, Optional, Sequence

from . import Analysis, MissingFileError, SettingError, SpecError, TraceError, _arg, _call, _native, _path, _strings

__all__ = ["partition", "place", "analyze", "read_index"]


def partition(trace, output, pages: int, format: Optional[str] = None) -> dict:
    """Writes ``trace`` as a dataset in the directory ``output`` (one Parquet trace per
    ``pages`` pages, and ``_sharemap.json``); returns its index."""
    args = (_path(trace), _path(output), _arg("pages", pages, "u64"), _arg("format", format, "str?"))
    return json.loads(_call(_native.partition, *args))


def read_index(dataset) -> dict:
    """The dataset's index (``_sharemap.json``), checked: ``MissingFileError`` when there is
    none, ``TraceError`` when it is not one ``partition`` writes."""
    path = os.path.join(_path(dataset), "_sharemap.json")
    try:
        with open(path, "rb") as f:
            index = json.loads(f.read())
    except FileNotFoundError:
        raise MissingFileError(f"{path}: no such file: {dataset} is not a sharemap dataset (sharemap.dask.partition writes one)") from None
    except OSError as e:
        raise TraceError(f"{path}: {e.strerror or e}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise TraceError(f"{path}: not a dataset index: {e}") from None
    _check_index(path, index)
    return index


def _check_index(path: str, index) -> None:
    """What the parts' arithmetic relies on, so that a damaged index is named, not a KeyError."""

    def bad(what: str):
        return TraceError(f"{path}: not a dataset index: {what}")

    def count(value, what: str) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise bad(f"{what} is {value!r}, not a count")

    if not isinstance(index, dict):
        raise bad("expected a JSON object")
    for key in ("accesses", "annotations", "partition_pages"):
        count(index.get(key), f"'{key}'")
    parts = index.get("parts")
    if not isinstance(parts, list) or not parts:
        raise bad("'parts' is not a list of parts")
    for k, part in enumerate(parts):
        name = part.get("file") if isinstance(part, dict) else None
        # A part is a file inside the dataset: no path that leaves it.
        if not isinstance(name, str) or not name or os.path.isabs(name) or ".." in name.split("/") or "\x00" in name:
            raise bad(f"part {k} names no file inside the dataset ({name!r})")


def _compute(tasks, client):
    import dask

    if client is not None:
        return client.gather(client.compute(tasks))
    return dask.compute(*tasks)


def _place_part(path, machine, seed, policies, cost, thread_map, settings):
    from sharemap import _call
    from sharemap import _native as native

    session = _call(native.Session, path, machine, seed)
    raw = json.loads(_call(session.place, policies, cost, None, thread_map, "oracle", None, list(settings), 0, 256, None))
    return raw["evaluation"]["results"], raw["situation"]


def per_page(policies: str | Sequence[str] = "all") -> list:
    """The policies of a comma list (``all``: every one) that ``place`` runs part by part:
    those whose registry row decides each page from its own references and whose options
    ask for no pass in trace order across pages."""
    return [name for name, by_page in _call(_native.policies, _arg("policies", policies, "list")) if by_page]


def place(
    dataset,
    machine: str = "sammu",
    policies: str | Sequence[str] = "first-touch",
    seed: int = 1,
    cost: Optional[str] = None,
    thread_map: str = "os",
    settings: Iterable[str] = (),
    client=None,
):
    """The optimum and per-page policies over every part, added up: the DataFrame
    ``Session.place`` gives on the whole trace (every count identical; costs are sums of the
    same terms in another order). ``policies`` is a comma list or ``all`` (every per-page
    policy). The thread placement must be fixed: ``os`` (the modelled OS), ``identity`` or a list of PUs."""
    import dask

    from . import _frame

    index = read_index(dataset)
    settings = tuple(_strings("settings", settings))
    # Checked here rather than on every worker.
    machine, seed, cost = _arg("machine", machine, "str"), _arg("seed", seed, "u64"), _arg("cost", cost, "str?")
    thread_map = _arg("thread_map", thread_map, "str")
    policies = _arg("policies", policies, "list")
    # The machine is checked here too: a bad spec fails before any task starts.
    _call(_native.machine, machine)
    chosen = _call(_native.policies, policies)
    if policies.strip() == "all":
        chosen = [(name, True) for name, per_page in chosen if per_page]
    refused = [name for name, per_page in chosen if not per_page]
    if refused:
        raise SpecError(f"{', '.join(refused)}: decided from the whole trace's clock or order, not page by page: run them on one machine (Session.place)")
    if index["annotations"] > 0:
        raise SettingError(
            f"{dataset}: the trace's {index['annotations']} annotations (init-done, phase changes) are not in the parts; place it on one machine"
        )
    if thread_map.strip() not in ("os", "identity") and any(c.isalpha() for c in thread_map):
        raise SettingError(f"thread_map {thread_map!r}: placing by parts needs a fixed placement (os, identity or a list of PUs)")
    spec = ",".join(name for name, _ in chosen)
    task = dask.delayed(_place_part)
    tasks = [task(os.path.join(_path(dataset), p["file"]), machine, seed, spec, cost, thread_map, settings) for p in index["parts"]]
    parts = _compute(tasks, client)
    accesses = index["accesses"]
    rows = []
    for k, first in enumerate(parts[0][0]):
        row = {"name": first["name"], "cost": 0.0}
        for results, _ in parts:
            r = results[k]
            row["cost"] += r["cost"]
            for key in ("local", "remote", "global", "moves", "replications", "profile_samples"):
                row[key] = row.get(key, 0) + r.get(key, 0)
        row["mcpr"] = row["cost"] / max(accesses, 1)
        row["local_ratio"] = row["local"] / max(accesses, 1)
        rows.append(row)
    optimum = rows[0]["cost"]
    for row in rows:
        row["vs_optimal"] = row["cost"] / optimum if optimum > 0 else 1.0
    columns = ["name", "cost", "mcpr", "local", "remote", "global", "moves", "replications", "local_ratio", "vs_optimal"]
    # As the whole trace's result: profile samples only where a policy took some.
    if any(row["profile_samples"] for row in rows):
        columns.append("profile_samples")
    ordered = [{c: row[c] for c in columns} for row in rows]
    return _frame(ordered, {"accesses": accesses, "pages_per_part": index["partition_pages"], "parts": len(parts), "situation": parts[0][1]})


def _analyze_part(path, machine, seed):
    from sharemap import _call
    from sharemap import _native as native

    text, matrix, n = _call(_call(native.Session, path, machine, seed).analyze, "oracle", None, 0)
    raw = json.loads(text)
    return matrix, n, raw["detection"]["pages"], raw["detection"]["seen"], raw["detection"]["accesses"]


def analyze(dataset, machine: str = "sammu", seed: int = 1, client=None) -> Analysis:
    """The oracle's sharing matrix and page usage over every part, added up: what
    ``Session.analyze()`` gives on the whole trace."""
    import dask
    import numpy as np

    from . import _pages_frame

    index = read_index(dataset)
    machine, seed = _arg("machine", machine, "str"), _arg("seed", seed, "u64")
    # Checked before any task starts, rather than on every worker.
    _call(_native.machine, machine)
    task = dask.delayed(_analyze_part)
    parts = _compute([task(os.path.join(_path(dataset), p["file"]), machine, seed) for p in index["parts"]], client)
    n = max(p[1] for p in parts)
    matrix = np.zeros((n, n))
    entries, seen, accesses = [], 0, 0
    for m, k, pages, s, a in parts:
        matrix[:k, :k] += np.frombuffer(m, dtype="<f8").reshape(k, k)
        entries.extend(pages)
        seen += s
        accesses += a
    entries.sort(key=lambda e: e["page"])
    frame = _pages_frame(entries, n)
    potential = _call(_native.potential, matrix.astype("<f8").tobytes(), n, machine, seen)
    raw = {"detector": "oracle:line", "seen": seen, "accesses": accesses, "parts": len(parts)}
    return Analysis("oracle:line", matrix, frame, potential, raw)
