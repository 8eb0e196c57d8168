"""Benchmarks (`make bench`): not tests; they write bench/report.json and bench/report.md."""

import sys


def clear_caches() -> None:
    """Empty every functools cache of the stef package: each measured record starts cold."""
    for name, module in list(sys.modules.items()):
        if name != "stef" and not name.startswith("stef."):
            continue
        for value in list(vars(module).values()):
            clear = getattr(value, "cache_clear", None)
            if callable(clear) and getattr(value, "__module__", None) == name:
                clear()
