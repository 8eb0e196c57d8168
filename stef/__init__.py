"""STEF: a production judge for Text-to-SQL agents (schema-agnostic, reference-free)."""

from __future__ import annotations

__version__ = "0.1.0"
