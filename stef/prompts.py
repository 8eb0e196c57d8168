"""Prompt templates: the one Jinja2 environment, every template compiled at start (SPEC §2 "Judge").

Templates ship inside the package (``stef/templates/*.j2``, read with :mod:`importlib.resources`);
``$STEF_PROMPTS_DIR`` points at another folder of them.
Untrusted values (questions, SQL, rule values, predicate texts) reach a template only through the
``tojson`` filter, inside a block delimited by ``<name>`` and ``</name>`` lines. ``tojson`` writes
one line of JSON (newlines in values are escaped) and escapes every ``<`` that could start a tag as
``\\u003c``, so no value can close its block or open another; a value that looks like template
code (``{{ ... }}``) is text: templates are rendered once, never from rendered output.

:func:`data_blocks` reads the blocks back out of a rendered prompt; the fake LLM server and the
prompt-injection tests use it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2

from stef.errors import FileError, TemplateError
from stef.files import read_bounded, utf8_text

REQUIRED_TEMPLATES = ("system.j2", "user.j2", "reask.j2")
# Templates read only when a setting turns them on (``few_shot.j2``: ``llm.few_shot`` above 0):
# left out of :attr:`Prompts.version`, so a judge that does not use one keeps its version (and
# its calibration and cache); the judge that does adds it (:meth:`Prompts.digest`).
OPTIONAL_TEMPLATES = ("few_shot.j2",)
# A template is a page of instructions (the shipped ones are under 8 KB); a larger file is not one.
MAX_TEMPLATE_BYTES = 1 << 20

# A data block: a ``<name>`` line, one line of JSON (tojson never emits a raw newline), ``</name>``.
_BLOCK = re.compile(r"^<(?P<name>[a-z_]+)>\n(?P<body>[^\n]*)\n</(?P=name)>$", re.M)


def default_prompts_dir() -> Path:
    """``$STEF_PROMPTS_DIR`` when set, else the templates shipped in the package."""
    env = os.environ.get("STEF_PROMPTS_DIR")
    if env:
        return Path(env)
    # Installed as files (wheel or editable), so the traversable is a real folder.
    return Path(str(resources.files("stef").joinpath("templates")))


_TAG_OPEN = re.compile(r"<(?=[/!?A-Za-z])")
_LINE_BREAKS = (("\u0085", "\\u0085"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029"))
# ``json.dumps(value, ensure_ascii=False, sort_keys=True)``, its encoder built once (a dozen values
# a prompt: building it was half the time of encoding an empty list).
_JSON = json.JSONEncoder(ensure_ascii=False, sort_keys=True)


def _tojson(value: Any) -> str:
    """One line of JSON in which no ``<`` can start a tag, so a value cannot close its block.

    Only a ``<`` that could begin a tag (``</x``, ``<x``, ``<!``, ``<?``) is escaped as
    ``\\u003c``; comparisons such as ``a < 5`` and ``a <> b`` stay readable for the model.
    """
    if isinstance(value, jinja2.Undefined):
        # StrictUndefined raises UndefinedError (naming the variable) when turned into text.
        str(value)
    text = _JSON.encode(value)
    # JSON leaves these raw, yet many readers (and models) take them for line breaks.
    for ch, esc in _LINE_BREAKS:
        text = text.replace(ch, esc)
    return _TAG_OPEN.sub(r"\\u003c", text) if "<" in text else text


def _source(path: Path) -> str:
    """A template's text, with its line ends as Jinja reads them (CRLF and CR are LF).

    Raises:
        TemplateError: not a regular file (a FIFO held the start for ever, deaf to SIGTERM;
            /dev/zero filled the memory), too large, or not UTF-8 (a traceback before).
    """
    try:
        raw = read_bounded(path, MAX_TEMPLATE_BYTES, kind="prompt template")
        text = utf8_text(raw, path)
    except FileError as exc:
        raise TemplateError(f"prompt template {exc}") from exc
    return text.replace("\r\n", "\n").replace("\r", "\n")


@dataclass(frozen=True)
class Prompts:
    """The compiled templates and their version.

    Attributes:
        directory: where the templates were read from.
        version: a hash of every template source (and of ``extra_version``), for every result.
    """

    directory: Path
    version: str
    _env: jinja2.Environment
    _templates: dict[str, jinja2.Template]

    @classmethod
    def load(cls, directory: str | Path | None = None, *, extra_version: str = "") -> Prompts:
        """Compile every ``*.j2`` template of ``directory``.

        Args:
            directory: the template folder; default :func:`default_prompts_dir`.
            extra_version: more text that changes what the model sees (the reply schema), hashed
                into :attr:`version`.

        Raises:
            TemplateError: a required template is missing, or any template is not a regular
                UTF-8 file of at most :data:`MAX_TEMPLATE_BYTES` or does not compile.
        """
        folder = Path(directory) if directory is not None else default_prompts_dir()
        if not folder.is_dir():
            raise TemplateError(f"prompt template folder not found: {folder}")
        env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(str(folder)),
            undefined=jinja2.StrictUndefined,
            # Prompts are not HTML; untrusted values go through tojson instead.
            autoescape=False,
            trim_blocks=True,
            lstrip_blocks=True,
            keep_trailing_newline=False,
            auto_reload=False,
        )
        env.filters["tojson"] = _tojson
        names = sorted(n for n in env.list_templates() if n.endswith(".j2"))
        missing = [n for n in REQUIRED_TEMPLATES if n not in names]
        if missing:
            raise TemplateError(f"missing prompt templates in {folder}: {', '.join(missing)}")
        digest = hashlib.sha256()
        templates: dict[str, jinja2.Template] = {}
        for name in names:
            source = _source(folder / name)
            if name not in OPTIONAL_TEMPLATES:
                digest.update(name.encode() + b"\0" + source.encode() + b"\0")
            try:
                templates[name] = env.get_template(name)
            except jinja2.TemplateError as exc:
                raise TemplateError(f"prompt template {name} does not compile: {exc}") from exc
        digest.update(extra_version.encode())
        return cls(folder, digest.hexdigest()[:12], env, templates)

    def require(self, *names: str) -> None:
        """Check that these templates are there (a mode's own, checked when it is chosen).

        Raises:
            TemplateError: one is missing from the template folder.
        """
        missing = [n for n in names if n not in self._templates]
        if missing:
            raise TemplateError(
                f"missing prompt templates in {self.directory}: {', '.join(missing)}"
            )

    def digest(self, name: str, extra: str = "") -> str:
        """:attr:`version` with template ``name`` (an optional one) and ``extra`` hashed in."""
        self.require(name)
        source, _, _ = self._env.loader.get_source(self._env, name)  # type: ignore[union-attr]
        text = f"{self.version}\0{name}\0{source}\0{extra}"
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    def render(self, name: str, **context: Any) -> str:
        """Render one template.

        Raises:
            TemplateError: unknown template, or a variable it needs is missing.
        """
        template = self._templates.get(name)
        if template is None:
            raise TemplateError(f"no prompt template named {name}")
        try:
            return template.render(**context).strip() + "\n"
        except (jinja2.TemplateError, TypeError, ValueError) as exc:
            # TypeError/ValueError: a value that is not JSON data reached tojson.
            raise TemplateError(f"prompt template {name} failed to render: {exc}") from exc


def data_blocks(prompt: str) -> dict[str, Any]:
    """The JSON data blocks of a rendered prompt, decoded: ``{"user_question": "...", ...}``.

    A block is a ``<name>`` line, one line of JSON, and a ``</name>`` line.
    """
    out: dict[str, Any] = {}
    for m in _BLOCK.finditer(prompt):
        out[m.group("name")] = json.loads(m.group("body"))
    return out


def strip_data_blocks(prompt: str) -> str:
    """The prompt with every data block removed: the text that is instructions, not data."""
    return _BLOCK.sub("", prompt)
