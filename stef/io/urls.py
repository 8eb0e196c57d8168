"""Source and sink URLs: ``kafka://HOST:PORT[,HOST:PORT]/TOPIC?group=G``, ``file:PATH``, ``-``."""

from __future__ import annotations

import os
from dataclasses import dataclass
from urllib.parse import parse_qs, unquote

from stef.errors import ConfigError


@dataclass(frozen=True)
class Endpoint:
    """A parsed source or sink URL.

    Attributes:
        kind: ``kafka``, ``file`` or ``std`` (stdin for a source, stdout for a sink).
        bootstrap: Kafka bootstrap servers (``host:port`` each).
        topic: the Kafka topic.
        group: the consumer group (sources only; None means the settings' default).
        path: the file path.
        options: further query parameters, single-valued.
    """

    kind: str
    bootstrap: tuple[str, ...] = ()
    topic: str | None = None
    group: str | None = None
    path: str | None = None
    options: tuple[tuple[str, str], ...] = ()

    def __str__(self) -> str:
        if self.kind == "kafka":
            group = f"?group={self.group}" if self.group else ""
            return f"kafka://{','.join(self.bootstrap)}/{self.topic}{group}"
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
    if url.startswith("kafka://"):
        rest = url[len("kafka://") :]
        rest, _, query = rest.partition("?")
        hosts, _, topic = rest.partition("/")
        servers = tuple(h.strip() for h in hosts.split(",") if h.strip())
        if not servers or not all(":" in h for h in servers):
            raise ConfigError(f"{what} {url!r}: kafka:// needs HOST:PORT before the topic")
        topic = unquote(topic.strip("/"))
        if not topic or "/" in topic:
            raise ConfigError(f"{what} {url!r}: kafka:// needs exactly one topic after the host")
        params = {k: v[-1] for k, v in parse_qs(query, keep_blank_values=True).items()}
        unknown = set(params) - {"group"}
        if unknown:
            raise ConfigError(f"{what} {url!r}: unknown parameter(s) {sorted(unknown)}")
        group = params.get("group") or None
        if group is not None and what != "source":
            raise ConfigError(f"{what} {url!r}: group= only applies to a source")
        return Endpoint(kind="kafka", bootstrap=servers, topic=topic, group=group)
    raise ConfigError(
        f"{what} {url!r}: expected kafka://HOST:PORT/TOPIC, file:PATH or - (stdin/stdout)"
    )


def same_place(source: Endpoint, sink: Endpoint) -> bool:
    """Whether writing to ``sink`` would write into what ``source`` reads: the same topic on a
    bootstrap server both name, or the same file (by resolved path, or by identity when both
    exist: a hard link or a bind mount). Standard input and output are never the same place."""
    if source.kind != sink.kind:
        return False
    if source.kind == "kafka":
        servers = {s.lower() for s in source.bootstrap}
        return source.topic == sink.topic and bool(servers & {s.lower() for s in sink.bootstrap})
    if source.kind == "file" and source.path and sink.path:
        if os.path.realpath(source.path) == os.path.realpath(sink.path):
            return True
        try:
            return os.path.samefile(source.path, sink.path)
        except OSError:  # either does not exist (yet): not the same file
            return False
    return False
