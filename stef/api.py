"""The Python API (docs/python.md): :class:`Judge` scores records in-process through the same
record path as the CLI (settings, rules, backend, calibration), and :func:`load_results` reads a
results file back as :class:`~stef.models.Result` models. ``stef judge`` is built on it."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from stef import results_file
from stef.errors import InvalidInput
from stef.models import InputRecord, Result, ResultInput
from stef.pipeline import Pipeline
from stef.rules import load_rules
from stef.service.wiring import build_backend, build_pipeline
from stef.settings import Settings, load_settings

RecordLike = Mapping[str, Any] | InputRecord | bytes | str


class Judge:
    """A judge built once and used for many records (thread-safe; close it, or use ``with``).

    ``Judge()`` reads the settings the way the CLI does: defaults, then ``STEF_CONFIG`` and the
    ``STEF_*`` environment; with no LLM endpoint configured it is the deterministic heuristic
    judge. ``Judge(settings)`` takes :class:`~stef.settings.Settings` as they are;
    ``Judge(config="stef.yaml", rules="rules/")`` reads a config file and overrides settings by
    keyword (any top-level setting: ``rules``, ``field_mapping``, ``llm={...}`` ...).

    Raises:
        ConfigError: a setting, the rules or the calibration is invalid (``RulesError`` for a
            rules file, with its ``problems``).
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        config: str | Path | None = None,
        **overrides: Any,
    ) -> None:
        if settings is not None and (config is not None or overrides):
            raise TypeError("Judge(settings) takes no config file or setting keywords")
        self.settings = settings if settings is not None else load_settings(config, overrides)
        rules = load_rules(self.settings.rules)
        self._stack = contextlib.ExitStack()
        backend = build_backend(self.settings)
        self._stack.callback(backend.close)
        try:
            self.pipeline: Pipeline = build_pipeline(self.settings, rules, backend)
        except BaseException:
            self._stack.close()
            raise

    def judge(self, record: RecordLike) -> Result:
        """Judge one record: a dict in the log's own field names (``field_mapping`` applies), its
        JSON text or bytes, or an :class:`~stef.models.InputRecord`. A judge that cannot decide
        is ``outcome == "judge_error"`` in the result, as in the CLI, never an exception.

        Raises:
            InvalidInput: the record cannot be judged (``reason``: ``missing_field``,
                ``wrong_type``, ``not_json`` ...); the CLI writes it as a dead letter.
        """
        if isinstance(record, InputRecord):
            result = self.pipeline.judge_record(record)
            if self.pipeline.options.include_input:
                result = result.model_copy(
                    update={
                        "input": ResultInput(
                            question=record.question,
                            enriched_question=record.enriched_question,
                            sql=record.sql,
                        )
                    }
                )
            return result
        payload = _payload(record)
        processed = self.pipeline.process(payload, {"file": "<python>", "line": 1})
        if processed.result is None:
            raise InvalidInput(processed.reason or "invalid", processed.error or "")
        return processed.result

    def judge_many(
        self, records: Iterable[RecordLike], *, concurrency: int | None = None
    ) -> list[Result | InvalidInput]:
        """Judge many records at once (``concurrency`` threads, the settings' by default); the
        results in the order of ``records``, an :class:`InvalidInput` in place of a record that
        cannot be judged (one bad record does not lose the others)."""
        workers = concurrency or self.settings.concurrency
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="stef-judge") as pool:
            return list(pool.map(self._judge_or_invalid, records))

    async def ajudge(self, record: RecordLike) -> Result:
        """:meth:`judge` for asyncio code: the call runs in a worker thread."""
        return await asyncio.to_thread(self.judge, record)

    def _judge_or_invalid(self, record: RecordLike) -> Result | InvalidInput:
        try:
            return self.judge(record)
        except InvalidInput as exc:
            return exc

    def close(self) -> None:
        """Let go of the backend (its HTTP connections, its cache file)."""
        self._stack.close()

    def __enter__(self) -> Judge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def load_results(path: str | Path) -> list[Result]:
    """The results of a results JSONL file (``stef replay -o``, ``stef run``), in file order.

    Raises:
        StefError: a ``FileError``: the file cannot be read, or a line is not UTF-8 or not a
            result (the message names the file and line; ``__cause__`` is the ``OSError``
            when the file could not be opened).
    """
    return list(iter_results(path))


def iter_results(path: str | Path) -> Iterator[Result]:
    """:func:`load_results` one at a time, for files too large to hold. Fields a newer STEF
    version added are passed over."""
    for _, result in results_file.iter_results(path):
        yield result


def _payload(record: Mapping[str, Any] | bytes | str) -> bytes:
    if isinstance(record, bytes):
        return record
    if isinstance(record, str):
        return record.encode("utf-8", "surrogatepass")
    if isinstance(record, Mapping):
        return json.dumps(dict(record), ensure_ascii=False).encode("utf-8", "surrogatepass")
    raise TypeError(f"a record is a dict, JSON text or an InputRecord, not {type(record).__name__}")
