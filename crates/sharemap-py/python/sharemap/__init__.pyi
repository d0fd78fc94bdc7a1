from dataclasses import dataclass
from os import PathLike
from typing import Any, Iterable, Optional, Sequence, Union

import numpy
import pandas

__version__: str

# Every call raises only these (and KeyboardInterrupt at Ctrl-C). Each is a sharemap.Error
# and the built-in exception its case calls for.

class Error(Exception):
    """The base: ``kind`` names what it is about (the facade's ErrorKind, or the class's)."""

    kind: str

class TraceError(Error, ValueError):
    """A trace or dataset that cannot be read or written."""

class MissingFileError(TraceError, FileNotFoundError):
    """A trace or dataset that does not exist."""

class MachineError(Error, ValueError):
    """A machine that cannot be read or modelled."""

class SpecError(Error, ValueError):
    """A policy, detector, algorithm or mechanism spec that is wrong."""

class SettingError(Error, ValueError):
    """A setting or argument value that is wrong or out of range (``seed=-1``)."""

class ArgumentTypeError(Error, TypeError):
    """An argument of the wrong type."""

class RunError(Error, RuntimeError):
    """A program that could not be built, started or run to its end."""

@dataclass
class Analysis:
    detector: str
    matrix: numpy.ndarray
    pages: pandas.DataFrame
    mapping_potential: float
    raw: dict[str, Any]
    def _repr_html_(self) -> str: ...

@dataclass
class Mapping:
    mappings: pandas.DataFrame
    random_cost: float
    potential: dict[str, Any]
    raw: dict[str, Any]
    def _repr_html_(self) -> str: ...

class Session:
    path: str
    def __init__(
        self,
        path: Union[str, PathLike[str]],
        machine: str = "sammu",
        seed: int = 1,
        format: Optional[str] = None,
        exclude: Optional[str | Sequence[str]] = None,
        roi: Optional[bool] = None,
        phase: Optional[Union[int, str]] = None,
        window: Optional[str] = None,
    ) -> None:
        """Raises MissingFileError, TraceError (the file is no trace), MachineError,
        SettingError (seed, exclude, format, roi, phase, window), ArgumentTypeError."""
    def window(self) -> Optional[dict[str, Any]]:
        """Raises nothing: the window was resolved when the Session was made."""
    def info(self) -> dict[str, Any]:
        """Raises TraceError (the file changed since the Session was made)."""
    def machine(self) -> dict[str, Any]:
        """Raises nothing."""
    def analyze(self, detector: str = "oracle", compare: Optional[str] = None, window: int = 0) -> Analysis:
        """Raises SpecError (detector, compare), SettingError (window), TraceError, ArgumentTypeError."""
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
    ) -> pandas.DataFrame:
        """Raises SpecError (policies), SettingError (cost, page_size, thread_map, sharing,
        refs_per_ms, settings, memory_mb below 16), TraceError (the trace, or the plan
        cannot be written), ArgumentTypeError."""
    def shared(self) -> pandas.DataFrame:
        """Raises TraceError, KeyboardInterrupt."""
    def advise(
        self, params: Iterable[str] = (), page_size: Optional[int] = None, threshold: float = 2.0
    ) -> dict[str, Any]:
        """Raises TraceError, MachineError, SettingError (params, page_size, threshold),
        ArgumentTypeError, KeyboardInterrupt."""
    def simulate(
        self,
        mechanisms: str | Sequence[str] = "all",
        page_size: Optional[int] = None,
        params: Iterable[str] = (),
        settings: Iterable[str] = (),
    ) -> pandas.DataFrame:
        """Raises SpecError (mechanisms), SettingError (page_size, params, settings),
        MachineError (a model the simulator cannot hold), TraceError, ArgumentTypeError."""
    def map(self, algorithms: str | Sequence[str] = "sharemap", cost_model: str = "latency") -> Mapping:
        """Raises SpecError (algorithms), SettingError (cost_model), TraceError, ArgumentTypeError."""

def machine(spec: str) -> dict[str, Any]:
    """Raises MachineError, ArgumentTypeError."""
def gen(
    pattern: str,
    output: Union[str, PathLike[str]],
    threads: int = 8,
    accesses: Optional[int] = None,
    seed: int = 1,
    page_size: int = 4096,
    format: Optional[str] = None,
    footprint: Union[int, str, None] = None,
    iterations: Optional[int] = None,
    reuse: int = 1,
    word: int = 8,
    halo: int = 1,
    nnz: int = 8,
) -> dict[str, Any]:
    """Raises SpecError (pattern), SettingError (a size or count out of range, format),
    TraceError (the output cannot be written), ArgumentTypeError."""

def patterns() -> dict[str, str]:
    """Raises nothing."""
def run(
    command: Iterable[Union[str, PathLike[str]]],
    thread_maps: Iterable[str] = ...,
    mechanisms: Iterable[str] = ...,
    placement: str = ...,
    sharing: Optional[Union[str, PathLike[str]]] = ...,
    recording: Optional[Union[str, PathLike[str]]] = ...,
    repeat: int = ...,
    seed: int = ...,
    no_aslr: bool = ...,
    thp: str = ...,
    sharemap_binary: Optional[Union[str, PathLike[str]]] = ...,
) -> pandas.DataFrame:
    """Raises SettingError, SpecError, TraceError, RunError, ArgumentTypeError."""
def record(
    command: Iterable[Union[str, PathLike[str]]],
    output: Union[str, PathLike[str]],
    backend: str = ...,
    no_aslr: bool = ...,
    sample: int = ...,
    exclude_stack: bool = ...,
    burst: Optional[str] = ...,
    exclude: Optional[str | Sequence[str]] = ...,
    event: str = ...,
    format: Optional[str] = ...,
    env: Optional[dict[str, str]] = ...,
    sharemap_binary: Optional[Union[str, PathLike[str]]] = ...,
) -> dict[str, Any]:
    """Raises SettingError, TraceError, RunError, ArgumentTypeError."""
