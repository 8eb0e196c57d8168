"""``python -m bench.mutations``: the mutation benchmark (issues 29 and 30)."""

from __future__ import annotations

from bench.mutations.cli import main

raise SystemExit(main())
