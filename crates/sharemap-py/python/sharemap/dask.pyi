from os import PathLike
from typing import Any, Iterable, Optional, Sequence, Union

import pandas

from . import Analysis

def partition(trace: Union[str, PathLike[str]], output: Union[str, PathLike[str]], pages: int, format: Optional[str] = None) -> dict[str, Any]:
    """Raises MissingFileError, TraceError, SettingError (pages, format), ArgumentTypeError."""

def read_index(dataset: Union[str, PathLike[str]]) -> dict[str, Any]:
    """Raises MissingFileError (no index), TraceError (an index partition does not write)."""
def per_page(policies: str | Sequence[str] = ...) -> list[str]:
    """Raises SpecError (an unknown policy), ArgumentTypeError."""
def place(
    dataset: Union[str, PathLike[str]],
    machine: str = "sammu",
    policies: str | Sequence[str] = "first-touch",
    seed: int = 1,
    cost: Optional[str] = None,
    thread_map: str = "os",
    settings: Iterable[str] = (),
    client: Any = None,
) -> pandas.DataFrame:
    """Raises MissingFileError, TraceError, MachineError, SpecError (policies, or one not
    decided page by page), SettingError, ArgumentTypeError."""

def analyze(dataset: Union[str, PathLike[str]], machine: str = "sammu", seed: int = 1, client: Any = None) -> Analysis:
    """Raises MissingFileError, TraceError, MachineError, SettingError, ArgumentTypeError."""
