"""STEF: a production judge for Text-to-SQL agents (schema-agnostic, reference-free).

The Python API (docs/python.md) is loaded on first use, so ``import stef`` (and ``stef
--version``) stays cheap: ``stef.Judge``, ``stef.load_results``, ``stef.Result``,
``stef.InputRecord``, ``stef.Settings``, ``stef.InvalidInput``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from stef.api import Judge, iter_results, load_results
    from stef.errors import InvalidInput, StefError
    from stef.models import InputRecord, Result
    from stef.settings import Settings

# Each public name and the module that defines it.
_LAZY = {
    "Judge": "stef.api",
    "load_results": "stef.api",
    "iter_results": "stef.api",
    "Result": "stef.models",
    "InputRecord": "stef.models",
    "Settings": "stef.settings",
    "InvalidInput": "stef.errors",
    "StefError": "stef.errors",
}

__all__ = [
    "InputRecord",
    "InvalidInput",
    "Judge",
    "Result",
    "Settings",
    "StefError",
    "__version__",
    "iter_results",
    "load_results",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'stef' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # looked up once
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
