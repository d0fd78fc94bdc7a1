"""sharemap: sharing-aware thread and data mapping for NUMA machines.

A Session holds a trace (native, CSV or Parquet), the machine it is studied on and a seed::

    import sharemap
    s = sharemap.Session("sor.trace", machine="numa:4 pu:2")
    a = s.analyze()              # a.matrix: numpy (threads x threads); a.pages: DataFrame
    s.place(policies="all")      # DataFrame: the optimum first, then each policy
    s.simulate(mechanisms="os,oracle")
    s.map(algorithms="all")

Real runs go through the same actors as the command line (they need its runtime libraries:
the ``sharemap`` command on PATH, or ``sharemap_binary=``)::

    sharemap.record(["./prog", "20000"], "prog.trace", no_aslr=True)
    sharemap.run(["./prog", "200000"], thread_maps=["os", "sharemap"], sharing="prog.trace", repeat=10)

Every number is the one the command line prints with ``--json`` on the same inputs.
Errors are ``sharemap.Error`` subclasses with a ``kind``, each also the built-in exception
its case calls for: ``TraceError``, ``MachineError``, ``SpecError`` and ``SettingError`` (a
value wrong or out of range, ``seed=-1`` included) are ``ValueError``\ s,
``MissingFileError`` (a trace or dataset that does not exist) is a ``TraceError`` and a
``FileNotFoundError``, ``ArgumentTypeError`` (an argument of the wrong type) a ``TypeError``.
Ctrl-C stops a long pass.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass, field
from typing import Any, Iterable, Optional, Sequence

from . import _native
from ._native import (
    ArgumentTypeError,
    Error,
    MachineError,
    MissingFileError,
    RunError,
    SettingError,
    SpecError,
    TraceError,
)

__version__: str = _native.__version__
"""The version of sharemap this package was built from (the command line's `sharemap --version`)."""

__all__ = [
    "__version__",
    "Session",
    "Analysis",
    "Mapping",
    "machine",
    "gen",
    "patterns",
    "run",
    "record",
    "Error",
    "TraceError",
    "MachineError",
    "SpecError",
    "SettingError",
    "MissingFileError",
    "ArgumentTypeError",
    "RunError",
]


def _call(function, *args):
    """Calls the native layer: the errors its argument conversions raise (a value out of an
    integer's range, a wrong type) become sharemap's, naming the argument."""
    try:
        return function(*args)
    except Error:
        raise
    except OverflowError as e:
        raise SettingError(f"{e}: out of range") from None
    except TypeError as e:
        raise ArgumentTypeError(str(e)) from None


_BITS = {"u32": 32, "u64": 64}


def _arg(name: str, value, kind: str):
    """An argument checked before it crosses to the native layer: ``kind`` is ``bool``,
    ``str``, ``list`` (a comma list given as a string or as its items), ``float``, ``u32`` or
    ``u64`` (unsigned integers of that width), with ``?`` when None is allowed. A wrong type raises ``ArgumentTypeError``, a value out of range ``SettingError``,
    both naming the argument."""
    import operator

    if value is None and kind.endswith("?"):
        return None
    kind = kind.rstrip("?")
    if kind == "bool":
        if not isinstance(value, bool):
            raise ArgumentTypeError(f"argument '{name}': expected True or False, not {type(value).__name__}")
        return value
    if kind == "str":
        if not isinstance(value, str):
            raise ArgumentTypeError(f"argument '{name}': expected a string, not {type(value).__name__}")
        return value
    if kind == "list":
        # A comma list, as the command line takes it, or its items.
        if isinstance(value, str):
            return value
        try:
            items = list(value)
        except TypeError:
            raise ArgumentTypeError(
                f"argument '{name}': expected a comma list or a list of strings, not {type(value).__name__}"
            ) from None
        for item in items:
            if not isinstance(item, str):
                raise ArgumentTypeError(f"argument '{name}': expected strings in the list, not {type(item).__name__}")
        return ",".join(items)
    if kind == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ArgumentTypeError(f"argument '{name}': expected a number, not {type(value).__name__}")
        return float(value)
    try:
        if isinstance(value, bool):
            raise TypeError
        number = operator.index(value)
    except TypeError:
        raise ArgumentTypeError(f"argument '{name}': expected an integer, not {type(value).__name__}") from None
    top = 2 ** _BITS[kind] - 1
    if not 0 <= number <= top:
        raise SettingError(f"{name}={number}: expected an integer from 0 to {top}")
    return number


def _path(value) -> str:
    """A path argument (str or os.PathLike) as text."""
    import os

    try:
        return os.fspath(value)
    except TypeError:
        raise ArgumentTypeError(f"expected a path (str or os.PathLike), not {type(value).__name__}") from None


def _strings(name: str, values) -> list:
    """An iterable of strings argument as a list (a lone string is refused: it would be read
    one character at a time)."""
    if isinstance(values, str):
        raise ArgumentTypeError(f"argument '{name}': expected an iterable of strings, not one string")
    try:
        return list(values)
    except TypeError:
        raise ArgumentTypeError(f"argument '{name}': expected an iterable of strings, not {type(values).__name__}") from None


def _frame(rows: Sequence[dict], attrs: dict):
    import pandas as pd

    df = pd.DataFrame(list(rows))
    df.attrs.update(attrs)
    return df


def _pages_frame(entries: Sequence[dict], threads: int):
    """Page usage as a DataFrame: ``page`` (address), ``first_touch`` (thread) and one column
    of accesses per thread, ``t0``.."""
    import numpy as np
    import pandas as pd

    threads = max([threads] + [len(e["accesses"]) for e in entries])
    counts = np.zeros((len(entries), threads), dtype=np.uint64)
    for k, e in enumerate(entries):
        counts[k, : len(e["accesses"])] = e["accesses"]
    pages = pd.DataFrame(counts, columns=[f"t{t}" for t in range(threads)])
    pages.insert(0, "first_touch", np.array([e["first_touch"] for e in entries], dtype=np.uint32))
    pages.insert(0, "page", np.array([e["page"] for e in entries], dtype=np.uint64))
    return pages


def _heatmap_svg(matrix, title: str) -> str:
    """The matrix as the command line draws it (sharemap-report's heatmap), an SVG."""
    import numpy as np

    n = matrix.shape[0]
    return _native.heatmap_svg(np.ascontiguousarray(matrix, dtype="<f8").tobytes(), n, title)


@dataclass
class Analysis:
    """What a detector found: its sharing matrix, page usage and the rest of its report."""

    detector: str
    #: Sharing between each pair of threads (float64, threads x threads, symmetric).
    matrix: Any
    #: One row per page: ``page`` (address), ``first_touch`` (thread) and ``t0``.. accesses.
    pages: Any
    #: The mapping-potential gate of the matrix on the session's machine.
    mapping_potential: float
    #: Everything else the analysis says (accuracy, windows, phase changes, reports).
    raw: dict = field(repr=False)

    def _repr_html_(self) -> str:
        n = self.matrix.shape[0]
        caption = html.escape(f"{self.detector}: {n} threads, {len(self.pages)} pages, mapping potential {self.mapping_potential:.3f}")
        svg = _heatmap_svg(self.matrix, f"Sharing between threads ({self.detector})")
        return f"<figure>{svg}<figcaption>{caption}</figcaption></figure>"


@dataclass
class Mapping:
    """Thread mappings of a sharing matrix onto the machine."""

    #: One row per algorithm: ``algorithm``, ``mapping`` (logical PU per thread), ``cost``,
    #: ``elapsed_ms``.
    mappings: Any
    #: The seeded random mapping's cost: the baseline.
    random_cost: float
    #: The mapping-potential gate (score, structural gain, sharing weight, threshold).
    potential: dict
    raw: dict = field(repr=False)

    def _repr_html_(self) -> str:
        table = self.mappings[["algorithm", "cost", "elapsed_ms"]].to_html(index=False)
        # As the command line's gate: without an access count (a matrix file) no verdict.
        if self.potential.get("accesses") is None:
            worth = "not judged: a matrix file has no access count"
        elif self.potential["score"] >= self.potential["threshold"]:
            worth = "worth mapping"
        else:
            worth = "too little sharing to group threads by"
        return f"{table}<p>random mapping cost {self.random_cost:g}; mapping potential {self.potential['score']:.3f} ({worth})</p>"


class Session:
    """A trace studied on a machine: ``Session(path, machine="sammu", seed=1, format=None,
    exclude=None, roi=None, phase=None, window=None)``. ``machine`` is a preset, an hwloc
    synthetic string, an hwloc XML file or ``live``; ``exclude`` leaves address ranges out
    (``"0x601040+64"``). Every analysis reads the trace's region of interest when its program
    marked one (``roi=None``); ``roi=True`` requires one, ``roi=False`` reads the whole trace,
    ``phase`` one phase (number or name), ``window`` access positions (``"2M-10M"``).
    ``window()`` says which part is read."""

    def __init__(
        self,
        path,
        machine: str = "sammu",
        seed: int = 1,
        format: Optional[str] = None,
        exclude: Optional[str | Sequence[str]] = None,
        roi: Optional[bool] = None,
        phase=None,
        window: Optional[str] = None,
    ):
        args = (_arg("machine", machine, "str"), _arg("seed", seed, "u64"), _arg("format", format, "str?"))
        parts = (_arg("roi", roi, "bool?"), None if phase is None else str(phase), _arg("window", window, "str?"))
        self._native = _call(_native.Session, _path(path), *args, _arg("exclude", exclude, "list?"), *parts)
        self.path = str(path)

    def window(self) -> Optional[dict]:
        """The part of the trace every analysis reads (``what``, ``spans``, ``accesses``,
        ``total``, ...), or None for all of it."""
        return json.loads(_call(self._native.window))

    def info(self) -> dict:
        """Accesses, threads, pages, page sharing and per-thread counts."""
        return json.loads(_call(self._native.info))

    def machine(self) -> dict:
        """The session's machine: levels, PUs, NUMA nodes, distances, cost parameters."""
        return json.loads(_call(self._native.machine))

    def analyze(self, detector: str = "oracle", compare: Optional[str] = None, window: int = 0) -> Analysis:
        """One detector over the trace (``oracle``, ``sammu:l1=32``, ...), optionally scored
        against ``compare`` and cut into windows of ``window`` accesses."""
        import numpy as np

        args = (_arg("detector", detector, "str"), _arg("compare", compare, "str?"), _arg("window", window, "u64"))
        text, matrix, n = _call(self._native.analyze, *args)
        raw = json.loads(text)
        matrix = np.frombuffer(matrix, dtype="<f8").reshape(n, n).copy()
        pages = _pages_frame(raw["detection"]["pages"], n)
        return Analysis(raw["detector"], matrix, pages, raw["mapping_potential"], raw)

    def place(
        self,
        policies: str | Sequence[str] = "all",
        cost: Optional[str] = None,
        page_size: Optional[int] = None,
        thread_map: str = "os",
        sharing: str = "oracle",
        refs_per_ms: Optional[float] = None,
        settings: Iterable[str] = (),
        costliest: int = 0,
        memory_mb: int = 256,
        plan: Optional[str] = None,
    ):
        """The off-line optimum and the policies (a comma list of specs, or ``all``): a
        DataFrame, the optimum first, one row per policy (cost, MCPR, local ratio, remote
        references, moves, replications, cost relative to the optimum). ``df.attrs`` holds
        the model it ran in and, with ``costliest``, the costliest pages."""
        raw = json.loads(
            _call(
                self._native.place,
                _arg("policies", policies, "list"),
                _arg("cost", cost, "str?"),
                _arg("page_size", page_size, "u64?"),
                _arg("thread_map", thread_map, "str"),
                _arg("sharing", sharing, "str"),
                _arg("refs_per_ms", refs_per_ms, "float?"),
                _strings("settings", settings),
                _arg("costliest", costliest, "u32"),
                _arg("memory_mb", memory_mb, "u32"),
                None if plan is None else _path(plan),
            )
        )
        rows = raw["evaluation"]["results"]
        attrs = {
            "accesses": raw["accesses"],
            "pages": raw["pages"],
            "threads": raw["threads"],
            "situation": raw["situation"],
            "costliest": raw["evaluation"]["costliest"],
        }
        return _frame(rows, attrs)

    def shared(self):
        """What is shared, by name: a DataFrame with one row per data object (a static
        variable, the allocations of one call site, a thread's stack, or an address range
        where the trace has no allocation records), its lines by class (``lines_true_shared``,
        ``lines_false_shared``, ``lines_read_shared``, ``lines_private``), the accesses to them,
        its pages and the source lines of the samples on its shared lines (``code``). Objects
        with the most accesses to truly or falsely shared lines come first. ``df.attrs``
        holds the trace-wide line counts (``lines``), the source lines (``code``: site and
        samples by class), ``named`` and the sampling period."""
        import pandas as pd

        raw = json.loads(_call(self._native.shared))
        rows = []
        for o in raw["objects"]:
            row = {k: o[k] for k in ("name", "kind", "allocations", "bytes", "threads", "accesses", "writes")}
            row["site"] = o.get("site")
            for cls, n in o["lines"].items():
                row[f"lines_{cls}"] = n
            for cls, n in o["line_accesses"].items():
                row[f"accesses_{cls}"] = n
            row["pages"], row["shared_pages"] = o["pages"], o["shared_pages"]
            row["code"] = [(c["site"], c["samples"]) for c in o.get("code", [])]
            rows.append(row)
        df = pd.DataFrame(rows)
        df.attrs.update({k: raw[k] for k in ("lines", "line_accesses", "named", "samples", "sample_period", "line_size", "word_size", "accesses")})
        df.attrs["code"] = raw["code"]
        return df

    def advise(self, params: Iterable[str] = (), page_size: Optional[int] = None, threshold: float = 2.0) -> dict:
        """Which mapping and placement to use (``sharemap advise``): every candidate simulated
        in one pass; ``verdict``, ``why``, ``check``, ``apply``, ``avoid``, ``notes`` and the
        ``candidates`` with their ``speedup`` over the OS's placement."""
        args = (_strings("params", params), _arg("page_size", page_size, "u64?"), _arg("threshold", threshold, "float"))
        return json.loads(_call(self._native.advise, *args))

    def simulate(
        self,
        mechanisms: str | Sequence[str] = "all",
        page_size: Optional[int] = None,
        params: Iterable[str] = (),
        settings: Iterable[str] = (),
    ):
        """The trace on the simulated machine under each mechanism: a DataFrame with one row
        per mechanism (time, misses per level, local DRAM share, traffic, migrations, and
        ratios to ``os``). ``params`` set the model (``dram-ns=100``)."""
        args = (_arg("mechanisms", mechanisms, "list"), _arg("page_size", page_size, "u64?"))
        raw = json.loads(_call(self._native.simulate, *args, _strings("params", params), _strings("settings", settings)))
        rows = []
        for m in raw["mechanisms"]:
            row = {k: v for k, v in m.items() if k not in ("mpka", "vs_os")}
            for level in m["mpka"]:
                row[f"L{level['level']}_mpka"] = level["mpka"]
            for k, v in (m.get("vs_os") or {}).items():
                if isinstance(v, list):
                    for level, x in zip(m["mpka"], v):
                        row[f"vs_os_L{level['level']}_mpka"] = x
                else:
                    row[f"vs_os_{k}"] = v
            rows.append(row)
        attrs = {k: v for k, v in raw.items() if k != "mechanisms"}
        return _frame(rows, attrs)

    def map(self, algorithms: str | Sequence[str] = "sharemap", cost_model: str = "latency") -> Mapping:
        """Thread mappings of the trace's oracle sharing onto the machine (a comma list of
        algorithms, or ``all``), priced by ``latency`` or ``hops``."""
        raw = json.loads(_call(self._native.map, _arg("algorithms", algorithms, "list"), _arg("cost_model", cost_model, "str")))
        return Mapping(_frame(raw["mappings"], {}), raw["random_cost"], raw["potential"], raw)


def machine(spec: str) -> dict:
    """A machine's description: a preset, an hwloc synthetic string, an XML file or ``live``."""
    return json.loads(_call(_native.machine, _arg("spec", spec, "str")))


def gen(
    pattern: str,
    output,
    threads: int = 8,
    accesses: Optional[int] = None,
    seed: int = 1,
    page_size: int = 4096,
    format: Optional[str] = None,
    footprint=None,
    iterations: Optional[int] = None,
    reuse: int = 1,
    word: int = 8,
    halo: int = 1,
    nnz: int = 8,
) -> dict:
    """Generates one of the seed programs' sharing patterns into a trace file (see
    ``patterns()``); returns what was written. ``footprint`` is pages per thread (an int),
    bytes (``"4MiB"``) or ``"auto"`` (sized from ``accesses``); left out, it is the pattern's
    paper-like footprint (1024 pages per thread) run for its iterations, unless ``accesses``
    alone is given, which sizes the data from it as before. ``halo`` is ``neighbor``'s, in
    pages of each neighbour's block read per iteration; ``nnz`` is ``all-to-all``'s nonzeros
    per row."""
    fp = None if footprint is None else str(footprint)
    return json.loads(
        _call(
            _native.gen,
            _arg("pattern", pattern, "str"),
            _path(output),
            _arg("threads", threads, "u32"),
            _arg("accesses", accesses, "u64?"),
            _arg("seed", seed, "u64"),
            _arg("page_size", page_size, "u64"),
            _arg("format", format, "str?"),
            fp,
            _arg("iterations", iterations, "u64?"),
            _arg("reuse", reuse, "u32"),
            _arg("word", word, "u64"),
            _arg("halo", halo, "u64"),
            _arg("nnz", nnz, "u64"),
        )
    )


def patterns() -> dict:
    """The generator's patterns and what each models."""
    return dict(_native.patterns())


def _sharemap_binary(given) -> str:
    """The ``sharemap`` binary whose runtime libraries (the pinning actor, the tracer) a run
    or a recording uses: the one given, else the one on PATH."""
    import shutil

    if given is not None:
        return _path(given)
    found = shutil.which("sharemap")
    if found is None:
        raise RunError(
            "run and record need sharemap's runtime libraries: install the command line (scripts/install) "
            "or give sharemap_binary= (a build's target/release/sharemap)"
        )
    return found


def _command(command) -> list:
    import os

    if isinstance(command, (str, bytes)) or isinstance(command, os.PathLike):
        raise ArgumentTypeError("argument 'command': expected a list (the program and its arguments), not one string")
    words = [os.fspath(w) if isinstance(w, os.PathLike) else w for w in _strings("command", command)]
    if not words:
        raise SettingError("argument 'command': no program given")
    if not all(isinstance(w, str) for w in words):
        raise ArgumentTypeError("argument 'command': expected strings")
    return words


def run(
    command,
    thread_maps: Iterable[str] = ("os",),
    mechanisms: Iterable[str] = (),
    placement: str = "first-touch",
    sharing=None,
    recording=None,
    repeat: int = 1,
    seed: int = 1,
    no_aslr: bool = False,
    thp: str = "split",
    sharemap_binary=None,
):
    """A program run with its threads pinned and its pages placed, as ``sharemap run`` does
    (docs/run.md): each thread map and mechanism a configuration, run ``repeat`` times
    interleaved against ``os`` (the kernel's own placement, first). A DataFrame, a row per
    configuration: its mean seconds with the 95 % interval's half-width, its time over the
    baseline's, whether it differs beyond the noise (``significant``, None for the baseline
    or one run) and every run's time; ``attrs`` hold the notes and the repeat count. One run
    of one configuration passes the program's output through. Raises SettingError, SpecError
    (a mechanism), TraceError (a recording or sharing file) and RunError (the program could
    not start or failed)."""
    raw = json.loads(
        _call(
            _native.run,
            _command(command),
            _sharemap_binary(sharemap_binary),
            _strings("thread_maps", thread_maps),
            _strings("mechanisms", mechanisms),
            _arg("placement", placement, "str"),
            None if sharing is None else _path(sharing),
            None if recording is None else _path(recording),
            _arg("repeat", repeat, "u64"),
            _arg("seed", seed, "u64"),
            bool(no_aslr),
            _arg("thp", thp, "str"),
        )
    )
    report = raw["report"]
    keep = ("name", "mean", "ci95", "normalized", "significant", "seconds", "llc_mpki", "remote_pki")
    rows = [{k: r.get(k) for k in keep} for r in report["results"]]
    attrs = {"notes": raw["notes"], "repeat": report["repeat"], "no_counters": report.get("no_counters")}
    return _frame(rows, attrs)


def record(
    command,
    output,
    backend: str = "auto",
    no_aslr: bool = False,
    sample: int = 1,
    exclude_stack: bool = False,
    burst: Optional[str] = None,
    exclude: Optional[str | Sequence[str]] = None,
    event: str = "page-faults",
    format: Optional[str] = None,
    env: Optional[dict] = None,
    sharemap_binary=None,
) -> dict:
    """A program recorded into a trace, as ``sharemap record`` does (docs/source-tracer.md):
    ``backend`` ``auto`` (the tracer for a program built with ``sharemap cc``, else valgrind),
    ``tracer``, ``valgrind``, ``perf`` or ``faults``; ``env`` adds variables for the program.
    Returns what was recorded (threads, accesses, bytes, records lost, forks, the program's
    exit status and the notes made before it started). Raises SettingError (an option the
    backend does not take), TraceError (the output) and RunError."""
    variables = [(str(k), str(v)) for k, v in (env or {}).items()]
    return json.loads(
        _call(
            _native.record,
            _command(command),
            _path(output),
            _sharemap_binary(sharemap_binary),
            _arg("backend", backend, "str"),
            _arg("event", event, "str"),
            _arg("sample", sample, "u64"),
            bool(exclude_stack),
            _arg("burst", burst, "str?"),
            bool(no_aslr),
            _arg("exclude", exclude, "list?"),
            _arg("format", format, "str?"),
            variables,
        )
    )
