"""Command line: one parser tree, a module per subcommand (SPEC §5)."""

from stef.cli.main import main

__all__ = ["main"]
