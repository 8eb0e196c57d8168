"""Loading rules: every way a file can fail to read or parse is a located RulesError, nothing else.

An edit is written while the service runs; an exception other than RulesError would crash the
reload and, at the next start, the service. Each case goes through ``load_rules`` on a directory,
with libyaml's scanner and with PyYAML's pure-Python one.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

import stef.rules
import stef.rules.safe_yaml
from stef.cli import main
from stef.errors import RuleProblem, RulesError
from stef.rules import MAX_RULES_BYTES, load_rules, parse_rules_text


@pytest.fixture(params=["libyaml", "pure-python"])
def loader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    if request.param == "pure-python":
        monkeypatch.setattr(stef.rules.safe_yaml, "_Loader", stef.rules.safe_yaml._PyRulesLoader)
    elif stef.rules.safe_yaml._Loader is stef.rules.safe_yaml._PyRulesLoader:
        pytest.fail("PyYAML was built without libyaml; the service would reload 10x slower")
    yield request.param


def only_problem(rules_dir: Path) -> RuleProblem:
    """The one problem ``load_rules`` reports for ``rules_dir``, which must be a RulesError."""
    with pytest.raises(RulesError) as info:
        load_rules(rules_dir)
    (problem,) = info.value.problems
    return problem


def only_problem_of_file(d: Path, name: str) -> RuleProblem:
    with pytest.raises(RulesError) as info:
        load_rules(d)
    return next(p for p in info.value.problems if p.path == str(d / name))


def rules_dir_with(tmp_path: Path, name: str, content: bytes) -> Path:
    d = tmp_path / "rules"
    d.mkdir()
    (d / "default.yaml").write_text("limit_min: 100\n")
    (d / name).write_bytes(content)
    return d


LAUGH = b"a%d: &a%d [%s]\n"
# (title, file content, expected line, text the message contains)
YAML_CASES = [
    ("invalid UTF-8", b'limit_min: 5\nnotes:\n  - "caf\xe9"\n', 3, "not UTF-8: byte 0xe9"),
    ("10,000 [", b"notes: " + b"[" * 10_000, 1, "nested deeper than 32"),
    ("10,000 {", b"notes: " + b"{a: " * 10_000, 1, "nested deeper than 32"),
    ("10,000 block levels", b"limit_min: 5\nnotes:\n" + b"- " * 10_000 + b"x\n", 3, "deeper"),
    ("5000-digit integer", b"dialect: postgres\nlimit_min: " + b"9" * 5000 + b"\n", 2, "integer"),
    ("hex integer past the limit", b"limit_min: 0x" + b"f" * 5000 + b"\n", 1, "integer"),
    ("sexagesimal integer", b"limit_min: " + b"59:" * 20_000 + b"1\n", 1, "integer"),
    ("impossible date", b"limit_min: 5\nnotes: [2024-02-30]\n", 2, "unreadable value"),
    ("NUL byte", b"limit_min: 5\n\x00\n", 2, "control character U+0000"),
    ("recursive alias", b"limit_min: 5\nnotes: &n [*n]\n", 2, "alias refers to a node"),
    (
        "billion laughs",
        b"a0: &a0 ["
        + b"x" * 1000
        + b"]\n"  # each level: ten aliases of the one above
        + b"".join(LAUGH % (i, i, b",".join([b"*a%d" % (i - 1)] * 10)) for i in range(1, 9)),
        5,
        "aliases expand past 1 MiB",
    ),
    (
        "merge-key chain",
        b"a0: &a0 {x: 1}\n"
        + b"".join(b"a%d: &a%d {<<: *a%d}\n" % (i, i, i - 1) for i in range(1, 3000)),
        32,
        "aliases nest deeper than 32",
    ),
    ("60,000 values", b"notes: [" + b"x," * 60_000 + b"x]\n", 1, "more than 50000 values"),
    ("tab indentation", b"notes:\n\t- x\n", 2, "not valid YAML"),
    ("python tag", b"notes: !!python/object/apply:os.system [ls]\n", 1, "not valid YAML"),
]


@pytest.mark.parametrize(
    ("content", "line", "message"),
    [pytest.param(c, n, m, id=t) for t, c, n, m in YAML_CASES],
)
def test_bad_content_is_a_located_problem(
    tmp_path: Path, loader: str, content: bytes, line: int, message: str
) -> None:
    d = rules_dir_with(tmp_path, "sales.yaml", content)
    problem = only_problem(d)
    assert (problem.path, problem.line) == (str(d / "sales.yaml"), line)
    assert message in problem.message
    assert str(problem).startswith(f"{d / 'sales.yaml'}:{line}: ")


def test_file_over_one_mib(tmp_path: Path) -> None:
    big = b"notes:\n" + b"  - x\n" * (MAX_RULES_BYTES // 6 + 1)
    d = rules_dir_with(tmp_path, "sales.yaml", big)
    problem = only_problem(d)
    assert problem.path == str(d / "sales.yaml") and problem.message.startswith("larger than 1 MiB")


def test_text_over_one_mib(tmp_path: Path) -> None:
    with pytest.raises(RulesError) as info:
        parse_rules_text("# " + "x" * MAX_RULES_BYTES, "inline.yaml")
    assert [str(p) for p in info.value.problems] == ["inline.yaml: larger than 1 MiB"]


def test_directory_named_yaml(tmp_path: Path) -> None:
    d = rules_dir_with(tmp_path, "ok.yaml", b"limit_min: 7\n")
    (d / "x.yaml").mkdir()
    problem = only_problem(d)
    assert str(problem) == f"{d / 'x.yaml'}: is a directory, not a rules file"


def test_fifo_named_yaml_is_not_opened(tmp_path: Path) -> None:
    d = rules_dir_with(tmp_path, "ok.yaml", b"limit_min: 7\n")
    os.mkfifo(d / "pipe.yaml")  # opening it for reading would block until a writer came
    assert only_problem(d).message == "is not a regular file"


def test_dangling_symlink(tmp_path: Path) -> None:
    d = rules_dir_with(tmp_path, "ok.yaml", b"limit_min: 7\n")
    (d / "gone.yaml").symlink_to(tmp_path / "nowhere.yaml")
    problem = only_problem(d)
    assert problem.path == str(d / "gone.yaml")
    assert problem.message == "cannot be read: No such file or directory"


def test_symlink_loop(tmp_path: Path) -> None:
    d = rules_dir_with(tmp_path, "ok.yaml", b"limit_min: 7\n")
    (d / "loop.yaml").symlink_to(d / "loop.yaml")
    assert only_problem(d).message == "cannot be read: Too many levels of symbolic links"


def test_file_vanishing_between_listing_and_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = rules_dir_with(tmp_path, "sales.yaml", b"limit_min: 7\n")
    listed = stef.rules.rules_files

    def list_then_delete(directory: Path) -> list[Path]:
        files = listed(directory)
        (directory / "sales.yaml").unlink()  # an editor replacing the file, caught mid-way
        return files

    monkeypatch.setattr(stef.rules, "rules_files", list_then_delete)
    problem = only_problem(d)
    assert str(problem) == f"{d / 'sales.yaml'}: cannot be read: No such file or directory"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unreadable_file(tmp_path: Path) -> None:
    d = rules_dir_with(tmp_path, "sales.yaml", b"limit_min: 7\n")
    (d / "sales.yaml").chmod(0)
    assert only_problem(d).message == "cannot be read: Permission denied"


def test_unexpected_exception_becomes_a_problem(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = rules_dir_with(tmp_path, "sales.yaml", b"limit_min: 7\n")

    def broken_check(*args: object) -> list[RuleProblem]:
        raise KeyError("a bug in a check")

    monkeypatch.setattr(stef.rules, "_check_semantics", broken_check)
    problem = only_problem_of_file(d, "sales.yaml")
    assert problem.line is None
    assert problem.message == "could not be loaded: KeyError: 'a bug in a check'"


def test_hidden_files_are_skipped(tmp_path: Path) -> None:
    d = rules_dir_with(tmp_path, "sales.yaml", b"limit_min: 7\n")
    (d / ".#sales.yaml").symlink_to("user@host.1234")  # an Emacs lock file while editing
    (d / ".sales.yaml").write_bytes(b"\xff")
    assert load_rules(d).known_apps == ["sales"]


def test_two_files_for_one_app(tmp_path: Path) -> None:
    d = rules_dir_with(tmp_path, "sales.yaml", b"limit_min: 7\n")
    (d / "sales.yml").write_bytes(b"limit_min: 8\n")
    problem = only_problem(d)
    assert str(problem) == (
        f"{d / 'sales.yml'}: a second rules file for app 'sales' (the first is sales.yaml)"
    )


def test_problems_per_file_are_capped(tmp_path: Path) -> None:
    d = rules_dir_with(tmp_path, "sales.yaml", b"notes: [" + b"1, " * 500 + b"1]\n")
    with pytest.raises(RulesError) as info:
        load_rules(d)
    problems = info.value.problems
    assert len(problems) == 21
    assert str(problems[0]) == f"{d / 'sales.yaml'}:1: [notes.0] Input should be a valid string"
    assert problems[-1].message == "... and 481 more problem(s) in this file"


def test_rules_path_that_cannot_exist(tmp_path: Path) -> None:
    with pytest.raises(RulesError) as info:
        load_rules(str(tmp_path) + "/bad\0name")  # the OS refuses a NUL byte in a path
    (problem,) = info.value.problems
    assert problem.message == "no such rules file or directory"


def test_every_file_reported_at_once(tmp_path: Path) -> None:
    d = rules_dir_with(tmp_path, "a.yaml", b"notes: " + b"[" * 10_000)
    (d / "b.yaml").write_bytes(b"limit_min: " + b"1" * 5000 + b"\n")
    (d / "c.yaml").mkdir()
    (d / "e.yaml").write_bytes(b"\n\n\xc3\x28\n")
    with pytest.raises(RulesError) as info:
        load_rules(d)
    assert [(Path(p.path).name, p.line) for p in info.value.problems] == [
        ("a.yaml", 1),
        ("b.yaml", 1),
        ("c.yaml", None),
        ("e.yaml", 3),
    ]


def test_cli_check_prints_located_problems_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = rules_dir_with(tmp_path, "a.yaml", b"notes: " + b"[" * 10_000)
    (d / "b.yaml").write_bytes(b"limit_min: " + b"1" * 5000 + b"\n")
    (d / "c.yaml").mkdir()
    (d / "e.yaml").write_bytes(b"limit_min: 5\n\xff\n")
    assert main(["rules", "check", str(d)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert f"{d / 'a.yaml'}:1: nested deeper than 32" in err
    assert f"{d / 'b.yaml'}:1: integer of 5000 characters (at most 64)" in err
    assert f"{d / 'c.yaml'}: is a directory, not a rules file" in err
    assert f"{d / 'e.yaml'}:2: not UTF-8: byte 0xff (invalid start byte)" in err
    assert "4 problems in" in err


def test_a_good_file_after_the_caps_still_loads(tmp_path: Path, loader: str) -> None:
    notes = "".join(f"  - note {i} about the sales schema\n" for i in range(2000))
    d = rules_dir_with(tmp_path, "sales.yaml", f"limit_min: 9\nnotes:\n{notes}".encode())
    rules = load_rules(d).for_app("sales")
    assert rules.limit_min == 9 and len(rules.notes) == 2000


@pytest.mark.parametrize(
    ("text", "line"),
    [
        pytest.param("notes: " + "[" * 33, 1, id="33 brackets"),
        pytest.param("notes: " + "[" * 32 + "]" * 32, None, id="32 brackets"),
        pytest.param("a: 1\nb:\n  " + "{x: " * 40, 3, id="braces on line 3"),
        pytest.param("notes: ['" + "[" * 40 + "']", None, id="inside single quotes"),
        pytest.param('notes: ["' + "[" * 40 + '"]', None, id="inside double quotes"),
        pytest.param('notes: ["\\"' + "[" * 40 + '"]', None, id="escaped double quote"),
        pytest.param("notes: ['it''s" + "[" * 40 + "']", None, id="doubled single quote"),
        pytest.param("# " + "[" * 40 + "\nnotes: [x]", None, id="comment"),
        pytest.param("notes: [x] # " + "{" * 40, None, id="trailing comment"),
    ],
)
def test_flow_depth_is_measured_by_stef(text: str, line: int | None) -> None:
    # The nesting problem must not depend on which scanner gave up first, or on its wording.
    assert stef.rules.safe_yaml.flow_too_deep(text, stef.rules.safe_yaml.MAX_DEPTH) == line
