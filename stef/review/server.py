"""``stef review``: a labelling page and its JSON API, served from the standard library.

Routes: ``GET /`` the page (one HTML file, inline CSS and script, no external asset);
``GET /api/state`` the records in queue order, the labels so far and the filter values;
``POST /api/label`` one label, appended to the labels file before the answer.

Records are untrusted: the page builds every field as a text node, and the server adds a
Content-Security-Policy that allows no image, frame or remote script whatever a record holds. A
POST must come from the page itself: its ``Origin`` must be this server's and it must carry the
session token the page was served with (a fresh one per ``stef review``). ``Host`` is checked on
every request, so a rebound DNS name cannot read the records.
"""

from __future__ import annotations

import hmac
import json
import secrets
import socket
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from importlib import resources
from pathlib import Path
from typing import Any

from stef.errors import FileError
from stef.io.http_server import BoundedServer
from stef.results_file import Record
from stef.review import explain as E
from stef.review import records as R
from stef.review.labels import append_label, label_line, latest_labels
from stef.review.sqlview import formatted, spans

MAX_BODY = 64 * 1024
MAX_NOTE = 4000
MAX_REVIEWER = 100
MAX_HANDLERS = 8
SOCKET_TIMEOUT_S = 15.0


class Review:
    """What the server serves: the queue, the labels file and the session's identity."""

    def __init__(
        self,
        records: list[Record],
        labels: Path,
        *,
        reviewer: str,
        order: str = "teaching",
    ) -> None:
        self.queue = R.queue(records, order=order)
        self.by_id = {str(r["id"]): r for r in self.queue}
        self.labels = labels
        self.reviewer = reviewer
        self.order = order
        self.token = secrets.token_urlsafe(32)
        self.origins: set[str] = set()
        self.hosts: set[str] = set()
        self.any_host = False

    def bind(self, host: str, port: int) -> None:
        """The names this server answers to (for the Host and Origin checks)."""
        # A wildcard address has no one name: any Host is served, and a POST's Origin must
        # then name the Host it was sent to (the session token still decides).
        self.any_host = host in ("0.0.0.0", "::", "")
        names = {host, "127.0.0.1", "localhost"} if host in ("127.0.0.1", "localhost") else {host}
        if ":" in host:
            names = {f"[{host}]"}
        self.hosts = {f"{n}:{port}" for n in names}
        self.origins = {f"http://{h}" for h in self.hosts}

    def host_ok(self, host: str | None) -> bool:
        return host is not None and (self.any_host or host in self.hosts)

    def origin_ok(self, origin: str | None, host: str | None) -> bool:
        if self.any_host:
            return origin is not None and origin == f"http://{host}"
        return origin in self.origins

    def state(self) -> dict[str, Any]:
        labels = latest_labels(self.labels)
        return {
            "reviewer": self.reviewer,
            "order": self.order,
            "records": [view(r, self.order) for r in self.queue],
            "labels": {
                rid: {"label": line.get("label"), "reviewer": line.get("reviewer")}
                for rid, line in labels.items()
                if rid in self.by_id
            },
        }

    def label(self, body: dict[str, Any]) -> dict[str, Any]:
        """Append the label a POST gives. Raises ValueError on a malformed one."""
        rid, value, note = body.get("id"), body.get("label"), body.get("note", "")
        if not isinstance(rid, str) or rid not in self.by_id:
            raise ValueError("unknown record id")
        if not (value is None or isinstance(value, bool)):
            raise ValueError("label must be true, false or null")
        if not isinstance(note, str) or len(note) > MAX_NOTE:
            raise ValueError(f"note must be a string of at most {MAX_NOTE} characters")
        who = body.get("reviewer")
        if who is not None and (not isinstance(who, str) or len(who) > MAX_REVIEWER):
            raise ValueError(f"reviewer must be a name of at most {MAX_REVIEWER} characters")
        rec = self.by_id[rid]
        line = label_line(
            rec,
            value,
            note=note,
            # The name the page asked for (kept per browser), else the server's --reviewer.
            reviewer=(who or "").strip() or self.reviewer,
            queue=self.order,
            p_correct=R.p_correct(rec),
        )
        append_label(self.labels, line)
        return line


def view(rec: Record, order: str = "teaching") -> dict[str, Any]:
    """The fields of a result the page shows (values as data; the page renders them as text).
    A value that is not there is None (the page shows a dash)."""
    spec = _mapping(rec.get("sql_spec"))
    dialect = spec.get("dialect") if isinstance(spec.get("dialect"), str) else None
    components = _mapping(rec.get("components"))
    given = _mapping(rec.get("input"))
    sql, extracted = E.judged_sql(rec)
    return {
        "id": rec.get("id"),
        "app": rec.get("app"),
        "tier": rec.get("tier"),
        "outcome": rec.get("outcome"),
        "error": rec.get("error"),
        "score": R.score(rec),
        "p_correct": R.p_correct(rec),
        "confidence": components.get("confidence"),
        "confidence_source": components.get("confidence_source"),
        "verdict": E.verdict(rec),
        "decider": E.decider(rec),
        "second_opinion": E.second_opinion(rec),
        "agent": E.agent(rec),
        "timestamp": E.when(rec),
        "queue_reason": E.queue_reason(rec, order),
        "needs_review": rec.get("needs_review") is True,
        "second_opinion_disagrees": R.second_opinion_disagrees(rec),
        "unsafe": R.unsafe(rec),
        "question": given.get("question"),
        "enriched_question": given.get("enriched_question"),
        "sql": spans(formatted(sql, dialect)) if sql else [],
        "sql_extracted": extracted,
        "alignment": rec.get("alignment"),
        "issues": R.issues(rec),
        "normalizations": rec.get("normalizations") or [],
        "rationale": rec.get("rationale") or "",
        "examples": R.examples(rec),
        "reference": E.reference(rec),
        "differences": E.differences(rec),
        "counterexample": E.counterexample(rec),
    }


def _mapping(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def page(token: str, nonce: str) -> bytes:
    text = resources.files("stef.review").joinpath("page.html").read_text(encoding="utf-8")
    # Both are URL-safe base64: nothing in them can leave the attribute they go in.
    return text.replace("{{TOKEN}}", token).replace("{{NONCE}}", nonce).encode("utf-8")


class _Handler(BaseHTTPRequestHandler):
    server: ReviewServer
    timeout = SOCKET_TIMEOUT_S
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass  # one line per request on stderr would bury the URL the reviewer needs

    def do_GET(self) -> None:
        review = self.server.review
        if not self._host_ok():
            return
        if self.path == "/":
            nonce = secrets.token_urlsafe(16)
            csp = (
                "default-src 'none'; connect-src 'self'; img-src 'none'; "
                f"script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; "
                "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
            )
            self._send(HTTPStatus.OK, page(review.token, nonce), "text/html; charset=utf-8", csp)
        elif self.path == "/api/state":
            try:
                state = review.state()
            except (FileError, OSError) as exc:
                self._json(HTTPStatus.INTERNAL_SERVER_ERROR, {"error": str(exc)})
                return
            self._json(HTTPStatus.OK, state)
        else:
            self._json(HTTPStatus.NOT_FOUND, {"error": "not found"})

    def do_POST(self) -> None:
        review = self.server.review
        if not self._host_ok():
            return
        if self.path != "/api/label":
            self._json(HTTPStatus.NOT_FOUND, {"error": "not found"})
            return
        if not review.origin_ok(self.headers.get("Origin"), self.headers.get("Host")):
            self._json(HTTPStatus.FORBIDDEN, {"error": "cross-origin request refused"})
            return
        token = self.headers.get("X-Stef-Token", "")
        if not hmac.compare_digest(token.encode(), review.token.encode()):
            self._json(HTTPStatus.FORBIDDEN, {"error": "missing or wrong session token"})
            return
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            self._json(HTTPStatus.LENGTH_REQUIRED, {"error": "Content-Length required"})
            return
        if not 0 < length <= MAX_BODY:
            self._json(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, {"error": "body too large"})
            return
        try:
            body = json.loads(self.rfile.read(length))
            if not isinstance(body, dict):
                raise ValueError("body must be a JSON object")
            line = review.label(body)
        except ValueError as exc:
            self._json(HTTPStatus.BAD_REQUEST, {"error": str(exc)})
            return
        except OSError as exc:
            self._json(HTTPStatus.INTERNAL_SERVER_ERROR, {"error": f"labels file: {exc}"})
            return
        self._json(HTTPStatus.OK, {"ok": True, "label": line})

    def _host_ok(self) -> bool:
        if self.server.review.host_ok(self.headers.get("Host")):
            return True
        self._json(HTTPStatus.MISDIRECTED_REQUEST, {"error": "unknown Host"})
        return False

    def _json(self, status: HTTPStatus, obj: Any) -> None:
        self._send(status, json.dumps(obj).encode("utf-8"), "application/json")

    def _send(self, status: HTTPStatus, body: bytes, kind: str, csp: str | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        if csp:
            self.send_header("Content-Security-Policy", csp)
        self.end_headers()
        self.wfile.write(body)


class ReviewServer(BoundedServer):
    """A threaded server with at most :data:`MAX_HANDLERS` requests served at once (more wait
    for a slot for the socket timeout, then are closed) and a timeout on every connection."""

    def __init__(self, review: Review, host: str, port: int) -> None:
        if ":" in host:
            self.address_family = socket.AF_INET6
        self.review = review
        super().__init__((host, port), _Handler, MAX_HANDLERS, slot_wait_s=SOCKET_TIMEOUT_S)
        review.bind(host, self.server_address[1])

    @property
    def port(self) -> int:
        return int(self.server_address[1])
