"""Trace files -> sources of records, through the same span mappings as the Kafka source: the
Collector's file exporter (OTLP JSON, one ``TracesData`` / ``LogsData`` per line) and trace
exports of Langfuse (observations) and LangSmith (runs), as JSON lines or Parquet (read with
DuckDB, the ``duckdb`` extra). Each row of an export is a span; a file's traces close at its end."""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO, Literal

from stef.errors import ConfigError, InvalidInput
from stef.fields import REQUIRED
from stef.io import Envelope, Oversized
from stef.io.otlp.spans import Span

TraceFormat = Literal["otlp", "otlp_logs", "langfuse", "langsmith"]
FORMATS: tuple[str, ...] = ("records", "otlp", "otlp_logs", "langfuse", "langsmith")
# Attribute every span read from an export carries: the presets select by it.
EXPORT_ATTRIBUTE = "stef.export"


# How much of the first line format detection reads.
_DETECT_BYTES = 1 << 20
# The opening of an OTLP JSON line: its message's one field, first.
_OTLP_OPENING = re.compile(rb'\s*\{\s*"resource(Spans|Logs)"\s*:')


def _first_line_head(handle: BinaryIO) -> bytes:
    """The first non-blank line, cut at ``_DETECT_BYTES`` (a line that long is not read whole)."""
    while True:
        line = handle.readline(_DETECT_BYTES)
        if not line or line.strip():
            return line


def detect_format(path: str) -> str:
    """``records`` (STEF's flat JSONL), ``otlp``, ``otlp_logs``, ``langfuse`` or ``langsmith``,
    from a Parquet file's columns or the first line of a JSON lines file.

    Raises:
        ConfigError: a Parquet file of neither export, or duckdb missing.
    """
    if path.endswith(".parquet"):
        columns = set(_parquet_columns(path))
        found = _export_of(columns)
        if found is None:
            raise ConfigError(
                f"{path}: a Parquet file that is neither a Langfuse observations export "
                "(parent_observation_id) nor a LangSmith runs export (run_type)"
            )
        return found
    try:
        with open(path, "rb") as handle:
            first = _first_line_head(handle)
    except OSError:
        return "records"  # the record path reports what is wrong with it, line by line
    if not first.endswith(b"\n") and len(first) >= _DETECT_BYTES:
        # A long first line is read by its opening only (a 200 MB line is not loaded to look):
        # an OTLP message has one field, so the exporter writes it first.
        opening = _OTLP_OPENING.match(first)
        if opening is None:
            return "records"
        return "otlp" if opening.group(1) == b"Spans" else "otlp_logs"
    try:
        row = json.loads(first) if first.strip() else None
    except (ValueError, RecursionError):  # the record path says what is wrong with the line
        return "records"
    if not isinstance(row, dict) or any(field in row for field in REQUIRED):
        # A record may carry any other key (a trace id, even resourceSpans): a field every record
        # has (no export row has either) is enough.
        return "records"
    if "resourceSpans" in row:
        return "otlp"
    if "resourceLogs" in row:
        return "otlp_logs"
    return _export_of(set(row)) or "records"


def _export_of(columns: set[str]) -> str | None:
    if "parent_observation_id" in columns and "trace_id" in columns:
        return "langfuse"
    if "run_type" in columns and "trace_id" in columns:
        return "langsmith"
    return None


def row_spans(payload: bytes, fmt: str) -> list[Span]:
    """The span of one export row (a JSON object).

    Raises:
        InvalidInput: ``not_json`` / ``not_object``, or ``missing_field`` without ids.
    """
    try:
        row = json.loads(payload)
    except ValueError as exc:
        raise InvalidInput("not_json", f"export row is not JSON: {exc}") from exc
    except RecursionError:
        raise InvalidInput("not_json", "export row is not JSON (nested too deeply)") from None
    if not isinstance(row, dict):
        raise InvalidInput("not_object", f"export row is a JSON {type(row).__name__}")
    if fmt == "langfuse":
        parent, kind_key, kind = (
            row.get("parent_observation_id"),
            "langfuse.observation.type",
            "type",
        )
        attrs = {
            "input": row.get("input"),
            "output": row.get("output"),
            "metadata": row.get("metadata"),
        }
        resource = {"service.name": row.get("trace_name"), "service.version": row.get("version")}
    else:
        parent, kind_key, kind = row.get("parent_run_id"), "langsmith.run_type", "run_type"
        attrs = {"inputs": row.get("inputs"), "outputs": row.get("outputs")}
        resource = {"service.name": row.get("session_name"), "service.version": None}
    trace, span = _id(row.get("trace_id")), _id(row.get("id"))
    if not trace or not span:
        raise InvalidInput("missing_field", f"{fmt} export row without trace_id and id")
    attrs[kind_key] = str(row.get(kind) or "").upper()
    attrs[EXPORT_ATTRIBUTE] = fmt
    return [
        Span(
            trace_id=trace,
            span_id=span,
            parent_span_id=_id(parent),
            name=str(row.get("name") or ""),
            kind="INTERNAL",
            attributes={k: v for k, v in attrs.items() if v is not None},
            resource={k: v for k, v in resource.items() if v is not None},
            start_ns=_ns(row.get("start_time")),
            end_ns=_ns(row.get("end_time")),
        )
    ]


def _id(value: Any) -> str:
    """An id as text; a UUID without its dashes (32 hex digits, the width of a trace id)."""
    if value is None:
        return ""
    text = str(value).strip()
    bare = text.replace("-", "")
    try:
        bytes.fromhex(bare)
    except ValueError:
        return text
    return bare.lower()


def _ns(value: Any) -> int:
    if isinstance(value, datetime):
        return int(value.timestamp() * 1e9)
    if isinstance(value, str) and value:
        try:
            return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1e9)
        except ValueError:
            return 0
    return 0


def _duckdb() -> Any:
    try:
        import duckdb  # noqa: PLC0415 -- an optional extra, imported only for a Parquet file
    except ImportError as exc:
        raise ConfigError(
            "reading Parquet needs the duckdb package: pip install 'stef[duckdb]'"
        ) from exc
    return duckdb


# A line of the Collector's file exporter is a whole batch of spans: far longer than a record;
# an export's line or Parquet row is held to the same.
MAX_TRACE_LINE_BYTES = 16 * 1024 * 1024
_PREFIX_BYTES = 4096


def _rows_query(columns: list[str], limit: int) -> str:
    """The export's rows in trace order: each column, then, for a row whose values are longer
    than ``limit`` bytes (as text), the length, sha256 and first characters of its JSON instead
    (every column null). Measured in DuckDB, so no such value is ever held by Python; the JSON
    is made only for such a row."""

    def name(c: str) -> str:
        return '"' + c.replace('"', '""') + '"'

    taken = {c.casefold() for c in columns}  # the JSON's name: none of the file's columns
    json_ = next(f"__stef_json{i}" for i in range(len(taken) + 1) if f"__stef_json{i}" not in taken)
    size = " + ".join(f"coalesce(strlen(CAST(t.{name(c)} AS VARCHAR)), 0)" for c in columns)
    big = f"({size or '0'}) > {int(limit)}"
    picked = ", ".join(f"CASE WHEN r.{json_} IS NULL THEN r.{name(c)} END" for c in columns)
    order = ", ".join(f"r.{name(c)}" for c in ("trace_id", "start_time") if c in columns)
    return (
        f"SELECT {picked}, strlen(r.{json_}), sha256(r.{json_}), "
        f"left(r.{json_}, {_PREFIX_BYTES}) "
        f"FROM (SELECT *, CASE WHEN {big} THEN to_json(t)::VARCHAR END AS {json_} "
        "FROM read_parquet(?) t) r" + (f" ORDER BY {order}" if order else "")
    )


def _parquet_columns(path: str) -> list[str]:
    duckdb = _duckdb()
    try:
        with duckdb.connect() as conn:
            rows = conn.execute("DESCRIBE SELECT * FROM read_parquet(?)", [path]).fetchall()
    except duckdb.Error as exc:
        raise ConfigError(f"{path}: not a readable Parquet file: {exc}") from exc
    return [str(r[0]) for r in rows]


class ParquetRows:
    """The rows of a Parquet trace export, one envelope each (a JSON object), in trace order so
    a trace's spans come together. Positions are ``{"file", "row"}``; nothing to commit.

    A row whose values (as text) are longer than ``max_row_bytes`` is not fetched: DuckDB
    measures it and hands over its JSON's first characters, length and sha256, and it is
    dead-lettered as too large, as a JSON lines export's line is (a 700 MB cell was fetched,
    judged as part of its trace, with 2.9 GB resident; now 2.2 GB, all of it DuckDB's reading
    and measuring)."""

    def __init__(self, path: str, batch: int = 1000, max_row_bytes: int = MAX_TRACE_LINE_BYTES):
        self.path = path
        self.batch = batch
        self.max_row_bytes = max_row_bytes
        self._conn: Any = None
        self._columns: list[str] = []
        self._row = 0
        self._done = False

    def start(self) -> None:
        duckdb = _duckdb()
        if not Path(self.path).is_file():
            raise ConfigError(f"{self.path}: no such file")
        self._columns = _parquet_columns(self.path)
        try:
            self._conn = duckdb.connect()
            self._conn.execute(_rows_query(self._columns, self.max_row_bytes), [self.path])
        except duckdb.Error as exc:
            raise ConfigError(f"{self.path}: cannot read: {exc}") from exc

    def poll(self, max_records: int, timeout_s: float) -> list[Envelope]:
        if self._done or self._conn is None or max_records <= 0:  # none asked: none read
            return []
        rows = self._conn.fetchmany(max(1, min(max_records, self.batch)))
        if not rows:
            self._done = True
            self._conn.close()
            return []
        out = []
        width = len(self._columns)
        for values in rows:
            self._row += 1
            position = {"file": self.path, "row": self._row}
            size, sha256, prefix = values[width:]
            if sha256 is not None:
                oversized = Oversized(int(size), str(sha256), self.max_row_bytes)
                out.append(Envelope(str(prefix).encode("utf-8"), position, oversized=oversized))
                continue
            row = dict(zip(self._columns, values[:width], strict=True))
            payload = json.dumps(row, default=str, ensure_ascii=False).encode("utf-8")
            out.append(Envelope(payload, position))
        return out

    @property
    def exhausted(self) -> bool:
        return self._done

    def pause(self) -> None:
        pass

    def resume(self) -> None:
        pass

    def commit(self) -> None:
        pass

    def lag(self) -> dict[tuple[str, int], int]:
        return {}

    def uncommitted(self) -> int:
        return 0

    def close(self) -> None:
        """Closed is not exhausted: a replay stopped before the file's end must say so."""
        if self._conn is not None and not self._done:
            self._conn.close()
        self._conn = None

    def unreachable(self) -> str | None:
        return None
