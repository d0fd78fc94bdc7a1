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
from typing import Iterable, Optional

from . import Analysis, SettingError, SpecError, _native

__all__ = ["partition", "place", "analyze", "read_index"]


def partition(trace, output, pages: int, format: Optional[str] = None) -> dict:
    """Writes ``trace`` as a dataset in the directory ``output`` (one Parquet trace per
    ``pages`` pages, and ``_sharemap.json``); returns its index."""
    return json.loads(_native.partition(str(trace), str(output), pages, format))


def read_index(dataset) -> dict:
    with open(os.path.join(str(dataset), "_sharemap.json")) as f:
        return json.load(f)


def _compute(tasks, client):
    import dask

    if client is not None:
        return client.gather(client.compute(tasks))
    return dask.compute(*tasks)


def _place_part(path, machine, seed, policies, cost, thread_map, settings):
    from sharemap import _native as native

    raw = json.loads(native.Session(path, machine, seed).place(policies, cost, None, thread_map, "oracle", None, list(settings), 0, 256, None))
    return raw["evaluation"]["results"], raw["situation"]


def place(
    dataset,
    machine: str = "sammu",
    policies: str = "first-touch",
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
    chosen = _native.policies(policies)
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
    tasks = [task(os.path.join(str(dataset), p["file"]), machine, seed, spec, cost, thread_map, tuple(settings)) for p in index["parts"]]
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
    from sharemap import _native as native

    text, matrix, n = native.Session(path, machine, seed).analyze("oracle", None, 0)
    raw = json.loads(text)
    return matrix, n, raw["detection"]["pages"], raw["detection"]["seen"], raw["detection"]["accesses"]


def analyze(dataset, machine: str = "sammu", seed: int = 1, client=None) -> Analysis:
    """The oracle's sharing matrix and page usage over every part, added up: what
    ``Session.analyze()`` gives on the whole trace."""
    import dask
    import numpy as np

    from . import _pages_frame

    index = read_index(dataset)
    task = dask.delayed(_analyze_part)
    parts = _compute([task(os.path.join(str(dataset), p["file"]), machine, seed) for p in index["parts"]], client)
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
    potential = _native.potential(matrix.astype("<f8").tobytes(), n, machine, seen)
    raw = {"detector": "oracle:line", "seen": seen, "accesses": accesses, "parts": len(parts)}
    return Analysis("oracle:line", matrix, frame, potential, raw)
