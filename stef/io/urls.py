"""Source and sink URLs: ``kafka://HOST:PORT[,HOST:PORT]/TOPIC?group=G``, ``file:PATH``, ``-``;
OpenTelemetry: ``otlp+kafka://HOST:PORT/TOPIC?group=G&encoding=otlp_proto|otlp_json``
(a source of traces or logs, a sink of evaluation results) and ``otlp+http://HOST:PORT`` (a sink:
OTLP/HTTP logs)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from urllib.parse import parse_qs, unquote

from stef.errors import ConfigError


@dataclass(frozen=True)
class Endpoint:
    """A parsed source or sink URL.

    Attributes:
        kind: ``kafka``, ``file``, ``std`` (stdin for a source, stdout for a sink),
            ``otlp+kafka`` or ``otlp+http``.
        bootstrap: Kafka bootstrap servers (``host:port`` each).
        topic: the Kafka topic.
        group: the consumer group (sources only; None means the settings' default).
        path: the file path; for ``otlp+http`` the logs URL (``http://HOST:PORT/v1/logs``).
        options: further query parameters, single-valued.
    """

    kind: str
    bootstrap: tuple[str, ...] = ()
    topic: str | None = None
    group: str | None = None
    path: str | None = None
    options: tuple[tuple[str, str], ...] = ()

    def option(self, name: str, default: str) -> str:
        return dict(self.options).get(name, default)

    @property
    def is_kafka(self) -> bool:
        return self.kind in ("kafka", "otlp+kafka")

    def __str__(self) -> str:
        if self.is_kafka:
            group = f"?group={self.group}" if self.group else ""
            return f"{self.kind}://{','.join(self.bootstrap)}/{self.topic}{group}"
        if self.kind == "otlp+http":
            return f"otlp+{self.path}"
        if self.kind == "file":
            return f"file:{self.path}"
        return "-"


def parse_endpoint(url: str, *, what: str = "source") -> Endpoint:
    """Parse a source or sink URL.

    Raises:
        ConfigError: the URL is not one of the three forms, or lacks a host or topic.
    """
    url = url.strip()
    if url in ("-", "stdin:", "stdout:"):
        return Endpoint(kind="std")
    if url.startswith("file:"):
        path = url[len("file:") :]
        if path.startswith("//"):
            path = path[2:]
        if not path:
            raise ConfigError(f"{what} {url!r}: file: needs a path")
        return Endpoint(kind="file", path=unquote(path))
    if url.startswith("otlp+http://") or url.startswith("otlp+https://"):
        return _otlp_http(url, what)
    if url.startswith("kafka://") or url.startswith("otlp+kafka://"):
        return _kafka(url, what)
    raise ConfigError(
        f"{what} {url!r}: expected kafka://HOST:PORT/TOPIC, file:PATH, - (stdin/stdout), "
        "otlp+kafka://HOST:PORT/TOPIC or otlp+http://HOST:PORT"
    )


# Query parameters of an otlp+kafka:// URL beside group, and the values they take.
OTLP_OPTIONS = {"encoding": ("otlp_proto", "otlp_json"), "signal": ("traces", "logs")}


def _kafka(url: str, what: str) -> Endpoint:
    kind, _, rest = url.partition("://")
    rest, _, query = rest.partition("?")
    hosts, _, topic = rest.partition("/")
    servers = tuple(h.strip() for h in hosts.split(",") if h.strip())
    if not servers or not all(":" in h for h in servers):
        raise ConfigError(f"{what} {url!r}: kafka:// needs HOST:PORT before the topic")
    topic = unquote(topic.strip("/"))
    if not topic or "/" in topic:
        raise ConfigError(f"{what} {url!r}: kafka:// needs exactly one topic after the host")
    params = {k: v[-1] for k, v in parse_qs(query, keep_blank_values=True).items()}
    allowed = {"group", *(OTLP_OPTIONS if kind == "otlp+kafka" else ())}
    unknown = set(params) - allowed
    if unknown:
        raise ConfigError(f"{what} {url!r}: unknown parameter(s) {sorted(unknown)}")
    group = params.pop("group", None) or None
    if group is not None and what != "source":
        raise ConfigError(f"{what} {url!r}: group= only applies to a source")
    for name, value in params.items():
        if value not in OTLP_OPTIONS[name]:
            raise ConfigError(
                f"{what} {url!r}: {name}= takes {' or '.join(OTLP_OPTIONS[name])}, not {value!r}"
            )
    return Endpoint(
        kind=kind, bootstrap=servers, topic=topic, group=group, options=tuple(params.items())
    )


def _otlp_http(url: str, what: str) -> Endpoint:
    """``otlp+http://HOST:PORT[/PATH]``: a sink of OTLP/HTTP logs (``/v1/logs`` by default)."""
    if what == "source":
        raise ConfigError(f"{what} {url!r}: otlp+http:// is a sink (STEF receives no OTLP/HTTP)")
    target = url[len("otlp+") :]
    scheme, _, rest = target.partition("://")
    host, slash, path = rest.partition("/")
    if ":" not in host or "?" in rest:
        raise ConfigError(f"{what} {url!r}: otlp+http:// needs HOST:PORT and no query")
    path = "/" + path if slash and path else "/v1/logs"
    return Endpoint(kind="otlp+http", path=f"{scheme}://{host}{path}")


def same_place(source: Endpoint, sink: Endpoint) -> bool:
    """Whether writing to ``sink`` would write into what ``source`` reads: the same topic on a
    bootstrap server both name, or the same file (by resolved path, or by identity when both
    exist: a hard link or a bind mount). Standard input and output are never the same place."""
    if source.is_kafka and sink.is_kafka:
        servers = {s.lower() for s in source.bootstrap}
        return source.topic == sink.topic and bool(servers & {s.lower() for s in sink.bootstrap})
    if source.kind != sink.kind:
        return False
    if source.kind == "file" and source.path and sink.path:
        if os.path.realpath(source.path) == os.path.realpath(sink.path):
            return True
        try:
            return os.path.samefile(source.path, sink.path)
        except OSError:  # either does not exist (yet): not the same file
            return False
    return False
