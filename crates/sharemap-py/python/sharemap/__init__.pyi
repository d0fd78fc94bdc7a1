from dataclasses import dataclass
from os import PathLike
from typing import Any, Iterable, Optional, Union

import numpy
import pandas

class Error(Exception):
    kind: str

class TraceError(Error): ...
class MachineError(Error): ...
class SpecError(Error): ...
class SettingError(Error): ...

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
        exclude: Optional[str] = None,
    ) -> None: ...
    def info(self) -> dict[str, Any]: ...
    def machine(self) -> dict[str, Any]: ...
    def analyze(self, detector: str = "oracle", compare: Optional[str] = None, window: int = 0) -> Analysis: ...
    def place(
        self,
        policies: str = "all",
        cost: Optional[str] = None,
        page_size: Optional[int] = None,
        thread_map: str = "os",
        sharing: str = "oracle",
        refs_per_ms: Optional[float] = None,
        settings: Iterable[str] = (),
        costliest: int = 0,
        memory_mb: int = 256,
        plan: Optional[str] = None,
    ) -> pandas.DataFrame: ...
    def simulate(
        self,
        mechanisms: str = "all",
        page_size: Optional[int] = None,
        params: Iterable[str] = (),
        settings: Iterable[str] = (),
    ) -> pandas.DataFrame: ...
    def map(self, algorithms: str = "sharemap", cost_model: str = "latency") -> Mapping: ...

def machine(spec: str) -> dict[str, Any]: ...
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
) -> dict[str, Any]: ...
def patterns() -> dict[str, str]: ...
