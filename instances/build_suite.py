#!/usr/bin/env python3
"""Build the bundled pytest-swe-arena benchmark suite.

Run from anywhere::

    python instances/build_suite.py          # rebuild repos/*.bundle + suite.jsonl, then self-check
    python instances/build_suite.py --check  # only re-check the files already on disk

Every instance is a small pure-stdlib Python project whose full text lives in
this file.  For each project the script

1. creates a git repository with a short, deterministic history (fixed author,
   committer and dates, so the commit shas are the same on every run); the
   last commit is the buggy *base*; the test suite must pass at every commit;
2. derives ``patch`` (gold fix, source files only) and ``test_patch`` (tests
   only) with ``git diff`` against the base;
3. writes ``repos/<name>.bundle`` (``git bundle create --all``, branch main);
4. clones the bundle, applies test_patch (then the gold patch) and runs pytest
   with ``-rA`` to compute FAIL_TO_PASS / PASS_TO_PASS;
5. writes ``suite.jsonl`` (sorted by instance_id) and re-checks every row from
   a fresh clone of its bundle: both patches apply, verify fails at
   base + test_patch and passes at base + patch + test_patch, every
   FAIL_TO_PASS test fails before and passes after, every PASS_TO_PASS test
   passes in both.

Any problem aborts with a message and a non-zero exit status; nothing in
``instances/`` is replaced unless the whole build checks out.

Only the Python standard library, git and pytest are needed.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SUITE_FILE = "suite.jsonl"
REPOS_DIR = "repos"

AUTHOR_NAME = "Arena Maintainers"
AUTHOR_EMAIL = "maintainers@arena.invalid"

VERIFY = "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 python -m pytest -q -p no:cacheprovider tests"
GRADE_CMD = ["-m", "pytest", "-rA", "-q", "-p", "no:cacheprovider", "tests"]
VERIFY_WARN_SECONDS = 2.0
VERIFY_MAX_SECONDS = 6.0
INSTANCE_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")

GITIGNORE = "__pycache__/\n*.pyc\n.pytest_cache/\n*.egg-info/\n.venv/\n"


class BuildError(Exception):
    """Anything that makes the suite wrong; aborts the build."""


def D(text: str) -> str:
    """Dedent a file body written inline in this script."""
    return textwrap.dedent(text).lstrip("\n")


def pyproject(name: str, version: str, description: str) -> str:
    return D(f'''
        [project]
        name = "{name}"
        version = "{version}"
        description = "{description}"
        requires-python = ">=3.11"

        [tool.pytest.ini_options]
        testpaths = ["tests"]
        pythonpath = ["."]
        ''')


# --------------------------------------------------------------------------
# file operations used by commits, fixes and test changes
# --------------------------------------------------------------------------

def write(path: str, text: str):
    return ("write", path, text)


def replace(path: str, old: str, new: str):
    return ("replace", path, old, new)


def append(path: str, text: str):
    return ("append", path, text)


def delete(path: str):
    return ("delete", path)


def apply_ops(root: Path, ops) -> None:
    for op in ops:
        kind, rel = op[0], op[1]
        target = root / rel
        if kind == "write":
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(op[2], encoding="utf-8", newline="\n")
        elif kind == "replace":
            old, new = op[2], op[3]  # exact text, indentation included
            text = target.read_text(encoding="utf-8")
            count = text.count(old)
            if count != 1:
                raise BuildError(f"replace in {rel}: expected exactly one match, found {count}:\n{old}")
            target.write_text(text.replace(old, new), encoding="utf-8", newline="\n")
        elif kind == "append":
            text = target.read_text(encoding="utf-8")
            if not text.endswith("\n"):
                text += "\n"
            # dedent but keep leading blank lines (they separate the new text)
            target.write_text(text + textwrap.dedent(op[2]), encoding="utf-8", newline="\n")
        elif kind == "delete":
            target.unlink()
        else:  # pragma: no cover - programming error
            raise BuildError(f"unknown op {kind!r}")


# --------------------------------------------------------------------------
# subprocess helpers
# --------------------------------------------------------------------------

def git_env(date: str | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_CONFIG_NOSYSTEM="1",
        GIT_AUTHOR_NAME=AUTHOR_NAME,
        GIT_AUTHOR_EMAIL=AUTHOR_EMAIL,
        GIT_COMMITTER_NAME=AUTHOR_NAME,
        GIT_COMMITTER_EMAIL=AUTHOR_EMAIL,
        GIT_TERMINAL_PROMPT="0",
        LC_ALL="C",
        TZ="UTC",
    )
    if date:
        env["GIT_AUTHOR_DATE"] = date
        env["GIT_COMMITTER_DATE"] = date
    return env


def git(cwd, *args, input: str | None = None, date: str | None = None, check: bool = True):
    proc = subprocess.run(
        ["git", *args], cwd=cwd, input=input, capture_output=True,
        text=True, encoding="utf-8", env=git_env(date), check=False,
    )
    if check and proc.returncode != 0:
        raise BuildError(f"git {' '.join(args)} failed in {cwd} (rc={proc.returncode}):\n{proc.stderr}{proc.stdout}")
    return proc


def test_env() -> dict:
    env = dict(os.environ)
    for key in ("PYTHONPATH", "PYTHONHOME", "PYTEST_ADDOPTS", "PYTEST_PLUGINS", "PYTHONSTARTUP"):
        env.pop(key, None)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    env["PYTHONHASHSEED"] = "0"
    # make the bare `python` of the verify command the interpreter running this script
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    return env


def run_verify(cwd: Path, command: str):
    start = time.monotonic()
    proc = subprocess.run(["/bin/sh", "-c", command], cwd=cwd, capture_output=True,
                          text=True, encoding="utf-8", errors="replace", env=test_env(), check=False)
    return proc.returncode, time.monotonic() - start, proc.stdout + proc.stderr


_STATUS_RE = re.compile(r"^(PASSED|FAILED|ERROR|XFAIL|XPASS|SKIPPED) (\S+)")


def run_grade(cwd: Path) -> tuple[dict, str, int]:
    """Run the project's tests with -rA; return ({nodeid: status}, output, rc)."""
    proc = subprocess.run([sys.executable, *GRADE_CMD], cwd=cwd, capture_output=True,
                          text=True, encoding="utf-8", errors="replace", env=test_env(), check=False)
    out = proc.stdout + proc.stderr
    statuses: dict[str, str] = {}
    in_summary = False
    for line in out.splitlines():
        if "short test summary info" in line:
            in_summary = True
            continue
        if not in_summary:
            continue
        match = _STATUS_RE.match(line)
        if match:
            status, nodeid = match.groups()
            if status == "ERROR" or "::" not in nodeid:
                raise BuildError(f"pytest reported an error in {cwd}:\n{out}")
            statuses[nodeid] = status
    if proc.returncode not in (0, 1):
        raise BuildError(f"pytest could not run the tests in {cwd} (rc={proc.returncode}):\n{out}")
    return statuses, out, proc.returncode


# --------------------------------------------------------------------------
# the projects
# --------------------------------------------------------------------------

PROJECTS: list[dict] = []


def project(**spec):
    PROJECTS.append(spec)


# ---------------------------------------------------------------- inikit --

INIKIT_LEXER = D(r'''
    """Line-level tokenizer for INI text."""

    from dataclasses import dataclass

    from .errors import ParseError

    COMMENT_PREFIXES = ("#", ";")
    DELIMITERS = ("=", ":")


    @dataclass(frozen=True)
    class Line:
        kind: str  # "blank", "comment", "section", "pair" or "continuation"
        lineno: int
        key: str = ""
        value: str = ""


    def strip_inline_comment(value):
        """Remove a trailing ``; comment`` or ``# comment`` from *value*.

        A comment marker only starts a comment when it follows whitespace, so
        ``color = #ff0000`` keeps its value.
        """
        for i, ch in enumerate(value):
            if ch in COMMENT_PREFIXES and i > 0 and value[i - 1] in " \t":
                return value[:i].rstrip()
        return value


    def split_pair(text, lineno):
        """Split ``key = value`` (or ``key: value``) into a ``(key, value)`` pair."""
        for delim in DELIMITERS:
            if delim in text:
                key, _, value = text.partition(delim)
                break
        else:
            raise ParseError(f"expected 'key = value', got {text!r}", lineno)
        key = key.strip()
        if not key:
            raise ParseError("empty key", lineno)
        return key, strip_inline_comment(value.strip())


    def tokenize(text):
        """Yield a :class:`Line` for every physical line of *text*."""
        for lineno, raw in enumerate(text.splitlines(), start=1):
            stripped = raw.strip()
            if not stripped:
                yield Line("blank", lineno)
            elif stripped[0] in COMMENT_PREFIXES:
                yield Line("comment", lineno)
            elif raw[0] in " \t":
                yield Line("continuation", lineno, value=stripped)
            elif stripped.startswith("["):
                if not stripped.endswith("]"):
                    raise ParseError("unterminated section header", lineno)
                name = stripped[1:-1].strip()
                if not name:
                    raise ParseError("empty section name", lineno)
                yield Line("section", lineno, key=name)
            else:
                key, value = split_pair(stripped, lineno)
                yield Line("pair", lineno, key=key, value=value)
    ''')

INIKIT_CONFIG = D(r'''
    """The Config object returned by the parser."""

    DEFAULT_SECTION = "DEFAULT"


    class Config:
        """Sections of ``key -> value`` strings.

        Keys are case-insensitive (stored lower-cased); section names are not.
        Values in the ``DEFAULT`` section are visible from every other section.
        """

        def __init__(self):
            self._sections = {DEFAULT_SECTION: {}}

        def add_section(self, name):
            self._sections.setdefault(name, {})

        def set(self, section, key, value):
            self.add_section(section)
            self._sections[section][key.lower()] = value

        def sections(self):
            return [name for name in self._sections if name != DEFAULT_SECTION]

        def has_section(self, name):
            return name in self._sections

        def items(self, section):
            merged = dict(self._sections[DEFAULT_SECTION])
            merged.update(self._sections[section])
            return merged

        def raw_section(self, name):
            """The keys set directly in section *name*, without defaults."""
            return dict(self._sections[name])

        def get(self, section, key, default=None):
            if section not in self._sections:
                return default
            return self.items(section).get(key.lower(), default)

        def __contains__(self, name):
            return name in self._sections

        def __eq__(self, other):
            if not isinstance(other, Config):
                return NotImplemented
            return self._sections == other._sections

        def __repr__(self):
            return f"Config({self._sections!r})"
    ''')

INIKIT_GETTERS = '''
    def getint(self, section, key, default=None):
        value = self.get(section, key)
        return default if value is None else int(value)

    def getfloat(self, section, key, default=None):
        value = self.get(section, key)
        return default if value is None else float(value)

    def getbool(self, section, key, default=None):
        value = self.get(section, key)
        if value is None:
            return default
        lowered = value.strip().lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
        raise ValueError(f"not a boolean: {value!r}")

    def getlist(self, section, key, default=None):
        """Split a value on commas and newlines, dropping empty items."""
        value = self.get(section, key)
        if value is None:
            return default
        parts = value.replace("\\n", ",").split(",")
        return [part.strip() for part in parts if part.strip()]
'''

INIKIT_PARSER = D(r'''
    """Turn INI text into a :class:`~inikit.config.Config`."""

    from .config import DEFAULT_SECTION, Config
    from .errors import ParseError
    from .lexer import tokenize


    def loads(text):
        """Parse INI *text*.

        Keys that appear before the first section header go to ``DEFAULT``.
        Indented lines continue the value of the previous key.
        """
        config = Config()
        section = DEFAULT_SECTION
        last_key = None
        for line in tokenize(text):
            if line.kind in ("blank", "comment"):
                continue
            if line.kind == "section":
                section = line.key
                config.add_section(section)
                last_key = None
            elif line.kind == "pair":
                config.set(section, line.key, line.value)
                last_key = line.key
            else:
                if last_key is None:
                    raise ParseError("continuation line without a key", line.lineno)
                previous = config.raw_section(section)[last_key.lower()]
                joined = previous + "\n" + line.value if previous else line.value
                config.set(section, last_key, joined)
        return config


    def load(fp):
        """Parse INI text from an open text file."""
        return loads(fp.read())
    ''')

INIKIT_WRITER = D(r'''
    """Serialise a :class:`~inikit.config.Config` back to INI text."""

    from .config import DEFAULT_SECTION


    def _format_value(value):
        # multi-line values are written as indented continuation lines
        return "\n    ".join(value.split("\n"))


    def dumps(config):
        """Return *config* as INI text (``key = value`` lines)."""
        names = config.sections()
        if config.raw_section(DEFAULT_SECTION):
            names = [DEFAULT_SECTION] + names
        chunks = []
        for name in names:
            lines = [f"[{name}]"]
            for key, value in config.raw_section(name).items():
                lines.append(f"{key} = {_format_value(value)}")
            chunks.append("\n".join(lines) + "\n")
        return "\n".join(chunks)


    def dump(config, fp):
        """Write *config* to an open text file."""
        fp.write(dumps(config))
    ''')

INIKIT_README = D(r'''
    # inikit

    A small, forgiving INI-style configuration parser (pure standard library).

    ```python
    import inikit

    cfg = inikit.loads(open("app.ini").read())
    cfg.get("server", "host")
    cfg.getint("server", "port", default=8080)
    ```

    Run the tests with `python -m pytest`.
    ''')

INIKIT_TEST_PARSER = D(r'''
    import pytest

    import inikit

    SAMPLE = """\
    # global settings
    name = demo

    [server]
    host = localhost:8080
    timeout: 30
    debug = yes ; enable for development

    [paths]
    roots =
        /srv/app
        /srv/static
    """


    def test_sections_in_order():
        cfg = inikit.loads(SAMPLE)
        assert cfg.sections() == ["server", "paths"]


    def test_equals_delimiter_with_colon_in_value():
        cfg = inikit.loads(SAMPLE)
        assert cfg.get("server", "host") == "localhost:8080"


    def test_colon_delimiter():
        cfg = inikit.loads(SAMPLE)
        assert cfg.get("server", "timeout") == "30"


    def test_inline_comment_stripped():
        cfg = inikit.loads(SAMPLE)
        assert cfg.get("server", "debug") == "yes"


    def test_hash_without_space_is_kept():
        cfg = inikit.loads("[ui]\ncolor = #ff0000\n")
        assert cfg.get("ui", "color") == "#ff0000"


    def test_continuation_lines():
        cfg = inikit.loads(SAMPLE)
        assert cfg.get("paths", "roots") == "/srv/app\n/srv/static"


    def test_defaults_visible_in_sections():
        cfg = inikit.loads(SAMPLE)
        assert cfg.get("server", "name") == "demo"
        assert "name" not in cfg.raw_section("server")


    def test_keys_are_case_insensitive():
        cfg = inikit.loads("[a]\nKey = 1\n")
        assert cfg.get("a", "KEY") == "1"


    def test_load_from_file(tmp_path):
        path = tmp_path / "app.ini"
        path.write_text("[a]\nx = 1\n")
        with open(path) as fp:
            assert inikit.load(fp).get("a", "x") == "1"


    @pytest.mark.parametrize(
        "text",
        ["[a]\n= 1\n", "[a]\njust a line\n", "[a\nk = v\n", "[]\n", "  orphan\n"],
        ids=["empty-key", "no-delimiter", "unterminated-section", "empty-section", "orphan-continuation"],
    )
    def test_parse_errors(text):
        with pytest.raises(inikit.ParseError):
            inikit.loads(text)


    def test_error_mentions_line_number():
        with pytest.raises(inikit.ParseError, match="line 3"):
            inikit.loads("[a]\nk = v\nbroken\n")
    ''')

INIKIT_TEST_LEXER = D(r'''
    import pytest

    from inikit import lexer
    from inikit.errors import ParseError


    @pytest.mark.parametrize(
        "text, expected",
        [
            ("key = value", ("key", "value")),
            ("key=value", ("key", "value")),
            ("key: value", ("key", "value")),
            ("host = localhost:8080", ("host", "localhost:8080")),
            ("empty =", ("empty", "")),
            ("spaced key = a b c", ("spaced key", "a b c")),
            ("level = 3 ; default", ("level", "3")),
        ],
        ids=["equals", "equals-tight", "colon", "colon-in-value", "empty-value", "spaces", "comment"],
    )
    def test_split_pair(text, expected):
        assert lexer.split_pair(text, 1) == expected


    def test_split_pair_requires_delimiter():
        with pytest.raises(ParseError):
            lexer.split_pair("no delimiter here", 7)


    @pytest.mark.parametrize(
        "value, expected",
        [("a ; c", "a"), ("a # c", "a"), ("#fff", "#fff"), ("a;b", "a;b"), ("x\t; y", "x")],
        ids=["semicolon", "hash", "leading-hash", "no-space", "tab"],
    )
    def test_strip_inline_comment(value, expected):
        assert lexer.strip_inline_comment(value) == expected


    def test_tokenize_kinds():
        kinds = [line.kind for line in lexer.tokenize("# c\n\n[s]\nk = v\n  more\n")]
        assert kinds == ["comment", "blank", "section", "pair", "continuation"]
    ''')

INIKIT_TEST_CONFIG = D(r'''
    import pytest

    import inikit


    @pytest.fixture
    def cfg():
        return inikit.loads(
            "[DEFAULT]\nretries = 3\n\n"
            "[worker]\nenabled = on\nratio = 0.25\nqueues = high, low,\n    batch\n"
        )


    def test_getint_uses_defaults(cfg):
        assert cfg.getint("worker", "retries") == 3


    def test_getint_default_for_missing_key(cfg):
        assert cfg.getint("worker", "missing", default=5) == 5


    def test_getfloat(cfg):
        assert cfg.getfloat("worker", "ratio") == 0.25


    @pytest.mark.parametrize("raw, expected", [("on", True), ("Yes", True), ("0", False), ("off", False)])
    def test_getbool(raw, expected):
        assert inikit.loads(f"[a]\nflag = {raw}\n").getbool("a", "flag") is expected


    def test_getbool_rejects_garbage():
        with pytest.raises(ValueError):
            inikit.loads("[a]\nflag = maybe\n").getbool("a", "flag")


    def test_getlist(cfg):
        assert cfg.getlist("worker", "queues") == ["high", "low", "batch"]


    def test_missing_section_returns_default(cfg):
        assert cfg.get("nope", "x", default="d") == "d"
        assert not cfg.has_section("nope")
    ''')

INIKIT_TEST_WRITER = D(r'''
    import io

    import inikit


    def test_dumps_sections():
        cfg = inikit.Config()
        cfg.set("server", "host", "localhost")
        cfg.set("server", "port", "8080")
        assert inikit.dumps(cfg) == "[server]\nhost = localhost\nport = 8080\n"


    def test_dumps_defaults_first():
        cfg = inikit.loads("[b]\nx = 1\n[DEFAULT]\ny = 2\n")
        assert inikit.dumps(cfg) == "[DEFAULT]\ny = 2\n\n[b]\nx = 1\n"


    def test_round_trip():
        text = "name = demo\n[server]\nhost = localhost:8080\n[paths]\nroots =\n  /a\n  /b\n"
        cfg = inikit.loads(text)
        assert inikit.loads(inikit.dumps(cfg)) == cfg


    def test_dump_to_file():
        cfg = inikit.loads("[a]\nk = v\n")
        buf = io.StringIO()
        inikit.dump(cfg, buf)
        assert buf.getvalue() == "[a]\nk = v\n"
    ''')

project(
    name="inikit",
    number=27,
    start="2024-02-05T09:12:00",
    commits=[
        ("Initial INI parser: sections, pairs, comments, continuations", [
            write(".gitignore", GITIGNORE),
            write("pyproject.toml", pyproject("inikit", "0.4.1", "A small, forgiving INI-style configuration parser")),
            write("README.md", INIKIT_README),
            write("inikit/__init__.py", D(r'''
                """inikit: a small, forgiving INI-style configuration parser."""

                from .config import Config
                from .errors import ParseError
                from .parser import load, loads

                __all__ = ["Config", "ParseError", "load", "loads"]
                ''')),
            write("inikit/errors.py", D(r'''
                class ParseError(ValueError):
                    """Raised when the input is not valid INI text."""

                    def __init__(self, message, lineno=None):
                        self.message = message
                        self.lineno = lineno
                        if lineno is not None:
                            message = f"line {lineno}: {message}"
                        super().__init__(message)
                ''')),
            write("inikit/lexer.py", INIKIT_LEXER),
            write("inikit/config.py", INIKIT_CONFIG),
            write("inikit/parser.py", INIKIT_PARSER),
            write("tests/test_lexer.py", INIKIT_TEST_LEXER),
            write("tests/test_parser.py", INIKIT_TEST_PARSER),
        ]),
        ("Add dumps()/dump() to write a Config back out", [
            write("inikit/writer.py", INIKIT_WRITER),
            replace("inikit/__init__.py", 'from .parser import load, loads\n\n__all__ = ["Config", "ParseError", "load", "loads"]\n',
                    'from .parser import load, loads\nfrom .writer import dump, dumps\n\n'
                    '__all__ = ["Config", "ParseError", "dump", "dumps", "load", "loads"]\n'),
            write("tests/test_writer.py", INIKIT_TEST_WRITER),
        ]),
        ("Config: add getint/getfloat/getbool/getlist", [
            replace("inikit/config.py", 'DEFAULT_SECTION = "DEFAULT"\n',
                    'DEFAULT_SECTION = "DEFAULT"\n\n_TRUE = {"1", "yes", "true", "on"}\n_FALSE = {"0", "no", "false", "off"}\n'),
            replace("inikit/config.py", "        return self.items(section).get(key.lower(), default)\n",
                    "        return self.items(section).get(key.lower(), default)\n" + INIKIT_GETTERS),
            write("tests/test_config.py", INIKIT_TEST_CONFIG),
        ]),
        ("README: document delimiters, comments and continuation lines", [
            append("README.md", r'''

                ## Syntax

                * `[section]` headers; keys before the first header go to `DEFAULT`,
                  whose values are visible from every section.
                * `key = value` or `key: value`; keys are case-insensitive.
                * Whole-line comments start with `#` or `;`.  An inline comment needs
                  whitespace before the marker: `debug = yes ; dev only`, while
                  `color = #ff0000` keeps the `#`.
                * Indented lines continue the previous value (joined with `\n`);
                  `Config.getlist()` splits on commas and newlines.
                '''),
        ]),
    ],
    fix=[
        replace("inikit/lexer.py",
                '''    for delim in DELIMITERS:
        if delim in text:
            key, _, value = text.partition(delim)
            break
    else:
        raise ParseError(f"expected 'key = value', got {text!r}", lineno)
''',
                '''    # the key ends at whichever delimiter comes first
    positions = [text.find(delim) for delim in DELIMITERS if delim in text]
    if not positions:
        raise ParseError(f"expected 'key = value', got {text!r}", lineno)
    index = min(positions)
    key, value = text[:index], text[index + 1:]
'''),
    ],
    test_changes=[
        append("tests/test_lexer.py", r'''


            @pytest.mark.parametrize(
                "text, expected",
                [
                    ("url: http://example.com/?a=b", ("url", "http://example.com/?a=b")),
                    ("expr : x = 1", ("expr", "x = 1")),
                    ("a:b=c=d", ("a", "b=c=d")),
                    ("filter: level>=3 ; errors only", ("filter", "level>=3")),
                    ("mapping = a:b=c", ("mapping", "a:b=c")),
                ],
                ids=["url-query", "spaced", "tight", "operator-and-comment", "equals-first"],
            )
            def test_split_pair_uses_first_delimiter(text, expected):
                assert lexer.split_pair(text, 1) == expected
            '''),
        append("tests/test_parser.py", r'''


            def test_colon_delimited_value_containing_equals():
                cfg = inikit.loads(
                    "[api]\nendpoint: https://example.com/v1?token=abc&limit=10\nretries = 3\n"
                )
                assert cfg.raw_section("api") == {
                    "endpoint": "https://example.com/v1?token=abc&limit=10",
                    "retries": "3",
                }


            def test_colon_delimited_continuation_with_equals():
                cfg = inikit.loads("[env]\nvars: X=0\n    A=1\n    B=2\n")
                assert cfg.get("env", "vars") == "X=0\nA=1\nB=2"


            def test_colon_delimited_round_trip():
                cfg = inikit.loads("[db]\ndsn: postgres://u@h/db?sslmode=require\n")
                again = inikit.loads(inikit.dumps(cfg))
                assert again.get("db", "dsn") == "postgres://u@h/db?sslmode=require"
                assert again == cfg
            '''),
    ],
    problem_statement=r'''
        Values containing `=` are mangled when the key uses a `:` delimiter

        The README says both `key = value` and `key: value` are accepted, and that
        works for simple values. But as soon as a colon-delimited line has an `=`
        anywhere in its value, the line is split in the wrong place and the key
        ends up containing part of the value.

        Reproduction (inikit 0.4.1, Python 3.11):

        ```python
        import inikit

        cfg = inikit.loads("""
        [api]
        endpoint: https://example.com/v1?token=abc
        retries = 3
        """)
        print(cfg.raw_section("api"))
        ```

        Actual:

        ```
        {'endpoint: https://example.com/v1?token': 'abc', 'retries': '3'}
        ```

        Expected:

        ```
        {'endpoint': 'https://example.com/v1?token=abc', 'retries': '3'}
        ```

        Other lines that break the same way: `filter: level>=3`, `expr : x = 1`.
        Lines using `=` as the delimiter with a `:` in the value
        (`host = localhost:8080`) are parsed correctly. The value should be
        everything after the first delimiter on the line, whichever of the two it is.
        '''
)


# ------------------------------------------------------------ dateranges --

DATERANGES_RANGE = D(r'''
    """The DateRange value type."""

    from dataclasses import dataclass
    from datetime import date, timedelta

    from .errors import InvalidRange

    ONE_DAY = timedelta(days=1)


    @dataclass(frozen=True)
    class DateRange:
        """An inclusive range of calendar days: ``start <= day <= end``."""

        start: date
        end: date

        def __post_init__(self):
            if self.end < self.start:
                raise InvalidRange(f"end {self.end} is before start {self.start}")

        @classmethod
        def single(cls, day):
            return cls(day, day)

        def __len__(self):
            return (self.end - self.start).days + 1

        def __iter__(self):
            day = self.start
            while day <= self.end:
                yield day
                day += ONE_DAY

        def __contains__(self, day):
            return self.start <= day <= self.end

        def overlaps(self, other):
            return self.start <= other.end and other.start <= self.end

        def intersection(self, other):
            """The days both ranges share, or ``None``."""
            if not self.overlaps(other):
                return None
            return DateRange(max(self.start, other.start), min(self.end, other.end))

        def shift(self, days):
            delta = timedelta(days=days)
            return DateRange(self.start + delta, self.end + delta)

        def __str__(self):
            return f"{self.start.isoformat()}..{self.end.isoformat()}"
    ''')

DATERANGES_SPLIT = '''
    def split_by_month(self):
        """Split into consecutive ranges that each stay within one calendar month."""
        return self._split(month_end)

    def split_by_week(self, first_weekday=0):
        """Split into consecutive ranges that each stay within one week.

        *first_weekday* uses :meth:`date.weekday` numbering (0 = Monday).
        """
        return self._split(lambda day: week_start(day, first_weekday) + timedelta(days=6))

    def _split(self, period_end):
        chunks = []
        current = self.start
        while current <= self.end:
            end = min(period_end(current), self.end)
            chunks.append(DateRange(current, end))
            current = end + ONE_DAY
        return chunks
'''

DATERANGES_CAL_V1 = D(r'''
    """Small calendar helpers built on :mod:`datetime`."""

    import calendar
    from datetime import date, timedelta


    def month_start(d):
        """First day of the month containing *d*."""
        return d.replace(day=1)


    def month_end(d):
        """Last day of the month containing *d*."""
        return d.replace(day=calendar.monthrange(d.year, d.month)[1])


    def next_month_start(d):
        """First day of the month after the one containing *d*."""
        if d.month == 12:
            return date(d.year + 1, 1, 1)
        return date(d.year, d.month + 1, 1)


    def week_start(d, first_weekday=0):
        """The most recent *first_weekday* on or before *d* (0 = Monday)."""
        return d - timedelta(days=(d.weekday() - first_weekday) % 7)
    ''')

DATERANGES_CAL_V2 = D(r'''
    """Small calendar helpers built on :mod:`datetime`."""

    from datetime import date, timedelta


    def month_start(d):
        """First day of the month containing *d*."""
        return d.replace(day=1)


    def next_month_start(d):
        """First day of the month after the one containing *d*."""
        return date(d.year, d.month % 12 + 1, 1)


    def month_end(d):
        """Last day of the month containing *d*."""
        return next_month_start(d) - timedelta(days=1)


    def add_months(d, months):
        """Shift *d* by *months* (may be negative), clamping the day to the month's length.

        ``add_months(date(2024, 1, 31), 1) == date(2024, 2, 29)``
        """
        index = d.year * 12 + (d.month - 1) + months
        year, month0 = divmod(index, 12)
        target = date(year, month0 + 1, 1)
        return target.replace(day=min(d.day, month_end(target).day))


    def week_start(d, first_weekday=0):
        """The most recent *first_weekday* on or before *d* (0 = Monday)."""
        return d - timedelta(days=(d.weekday() - first_weekday) % 7)
    ''')

DATERANGES_PARSE = D(r'''
    """Parse textual date ranges."""

    import re
    from datetime import date

    from .calendar_utils import month_end
    from .errors import InvalidRange
    from .range import DateRange

    _MONTH = re.compile(r"^(\d{4})-(\d{2})$")
    _YEAR = re.compile(r"^(\d{4})$")


    def _parse_day(text):
        try:
            return date.fromisoformat(text)
        except ValueError:
            raise InvalidRange(f"not an ISO date: {text!r}") from None


    def parse_range(text):
        """Parse ``YYYY-MM-DD..YYYY-MM-DD``, ``YYYY-MM-DD``, ``YYYY-MM`` or ``YYYY``.

        A month or a year stands for all of its days.
        """
        text = text.strip()
        if ".." in text:
            start, _, end = text.partition("..")
            return DateRange(_parse_day(start.strip()), _parse_day(end.strip()))
        match = _MONTH.match(text)
        if match:
            year, month = int(match.group(1)), int(match.group(2))
            if not 1 <= month <= 12:
                raise InvalidRange(f"month out of range: {text!r}")
            first = date(year, month, 1)
            return DateRange(first, month_end(first))
        match = _YEAR.match(text)
        if match:
            year = int(match.group(1))
            return DateRange(date(year, 1, 1), date(year, 12, 31))
        return DateRange.single(_parse_day(text))
    ''')

DATERANGES_TEST_RANGE = D(r'''
    from datetime import date

    import pytest

    from dateranges import DateRange, InvalidRange


    def test_len_and_iteration():
        r = DateRange(date(2024, 2, 27), date(2024, 3, 2))
        assert len(r) == 5
        assert list(r)[1:3] == [date(2024, 2, 28), date(2024, 2, 29)]


    def test_single_day():
        r = DateRange.single(date(2024, 5, 1))
        assert len(r) == 1 and list(r) == [date(2024, 5, 1)]


    def test_end_before_start_rejected():
        with pytest.raises(InvalidRange):
            DateRange(date(2024, 5, 2), date(2024, 5, 1))


    def test_contains():
        r = DateRange(date(2024, 1, 10), date(2024, 1, 20))
        assert date(2024, 1, 10) in r
        assert date(2024, 1, 20) in r
        assert date(2024, 1, 21) not in r


    def test_overlaps_and_intersection():
        a = DateRange(date(2024, 1, 1), date(2024, 1, 10))
        b = DateRange(date(2024, 1, 10), date(2024, 1, 15))
        c = DateRange(date(2024, 1, 11), date(2024, 1, 12))
        assert a.overlaps(b) and b.overlaps(a)
        assert not a.overlaps(c)
        assert a.intersection(b) == DateRange.single(date(2024, 1, 10))
        assert a.intersection(c) is None


    def test_shift_and_str():
        r = DateRange(date(2024, 2, 28), date(2024, 3, 1)).shift(2)
        assert str(r) == "2024-03-01..2024-03-03"
    ''')

DATERANGES_TEST_SPLIT = r'''


    def test_split_by_month_within_one_year():
        r = DateRange(date(2024, 1, 15), date(2024, 3, 10))
        assert r.split_by_month() == [
            DateRange(date(2024, 1, 15), date(2024, 1, 31)),
            DateRange(date(2024, 2, 1), date(2024, 2, 29)),
            DateRange(date(2024, 3, 1), date(2024, 3, 10)),
        ]


    def test_split_by_month_single_month():
        r = DateRange(date(2023, 6, 3), date(2023, 6, 9))
        assert r.split_by_month() == [r]


    def test_split_by_week_monday():
        r = DateRange(date(2024, 4, 3), date(2024, 4, 16))  # Wednesday .. Tuesday
        assert [str(chunk) for chunk in r.split_by_week()] == [
            "2024-04-03..2024-04-07",
            "2024-04-08..2024-04-14",
            "2024-04-15..2024-04-16",
        ]


    def test_split_by_week_sunday():
        r = DateRange(date(2024, 4, 3), date(2024, 4, 9))
        assert [len(chunk) for chunk in r.split_by_week(first_weekday=6)] == [4, 3]
    '''

DATERANGES_TEST_CAL = D(r'''
    from datetime import date

    import pytest

    from dateranges import month_end, month_start, next_month_start, week_start


    @pytest.mark.parametrize(
        "day, expected",
        [
            (date(2024, 2, 10), date(2024, 2, 29)),
            (date(2023, 2, 10), date(2023, 2, 28)),
            (date(2024, 4, 30), date(2024, 4, 30)),
            (date(2024, 7, 1), date(2024, 7, 31)),
        ],
        ids=["leap-feb", "feb", "april-last-day", "july"],
    )
    def test_month_end(day, expected):
        assert month_end(day) == expected


    def test_month_start():
        assert month_start(date(2024, 8, 19)) == date(2024, 8, 1)


    def test_next_month_start():
        assert next_month_start(date(2024, 5, 17)) == date(2024, 6, 1)
        assert next_month_start(date(2024, 1, 31)) == date(2024, 2, 1)


    def test_week_start():
        assert week_start(date(2024, 4, 3)) == date(2024, 4, 1)
        assert week_start(date(2024, 4, 1)) == date(2024, 4, 1)
        assert week_start(date(2024, 4, 3), first_weekday=6) == date(2024, 3, 31)
    ''')

DATERANGES_TEST_PARSE = D(r'''
    from datetime import date

    import pytest

    from dateranges import DateRange, InvalidRange, parse_range


    def test_explicit_range():
        assert parse_range("2024-01-05..2024-01-09") == DateRange(date(2024, 1, 5), date(2024, 1, 9))


    def test_explicit_range_with_spaces():
        assert parse_range(" 2024-01-05 .. 2024-01-09 ") == DateRange(date(2024, 1, 5), date(2024, 1, 9))


    def test_single_day():
        assert parse_range("2024-07-04") == DateRange.single(date(2024, 7, 4))


    def test_month():
        assert parse_range("2024-02") == DateRange(date(2024, 2, 1), date(2024, 2, 29))
        assert len(parse_range("2023-09")) == 30


    def test_year():
        r = parse_range("2024")
        assert (r.start, r.end, len(r)) == (date(2024, 1, 1), date(2024, 12, 31), 366)


    @pytest.mark.parametrize(
        "text",
        ["2024-13", "2024-02-30", "yesterday", "2024-03-05..2024-03-01"],
        ids=["bad-month", "bad-day", "word", "reversed"],
    )
    def test_invalid(text):
        with pytest.raises(InvalidRange):
            parse_range(text)
    ''')

project(
    name="dateranges",
    number=41,
    start="2024-03-11T08:40:00",
    commits=[
        ("Add DateRange value type", [
            write(".gitignore", GITIGNORE),
            write("pyproject.toml", pyproject("dateranges", "1.2.0", "Inclusive date ranges and calendar helpers")),
            write("README.md", D(r'''
                # dateranges

                Inclusive date ranges for reports and billing periods.

                ```python
                from datetime import date
                from dateranges import DateRange

                q1 = DateRange(date(2024, 1, 1), date(2024, 3, 31))
                len(q1)                # 91
                date(2024, 2, 29) in q1  # True
                ```

                Run the tests with `python -m pytest`.
                ''')),
            write("dateranges/__init__.py", D(r'''
                """dateranges: inclusive date ranges and calendar helpers."""

                from .errors import InvalidRange
                from .range import DateRange

                __all__ = ["DateRange", "InvalidRange"]
                ''')),
            write("dateranges/errors.py", D(r'''
                class InvalidRange(ValueError):
                    """A range whose end lies before its start, or text that is not a range."""
                ''')),
            write("dateranges/range.py", DATERANGES_RANGE),
            write("tests/test_range.py", DATERANGES_TEST_RANGE),
        ]),
        ("Add calendar helpers and DateRange.split_by_month/split_by_week", [
            write("dateranges/calendar_utils.py", DATERANGES_CAL_V1),
            replace("dateranges/range.py", "from .errors import InvalidRange\n",
                    "from .calendar_utils import month_end, week_start\nfrom .errors import InvalidRange\n"),
            replace("dateranges/range.py", "        return DateRange(self.start + delta, self.end + delta)\n",
                    "        return DateRange(self.start + delta, self.end + delta)\n" + DATERANGES_SPLIT),
            replace("dateranges/__init__.py", 'from .errors import InvalidRange\nfrom .range import DateRange\n\n__all__ = ["DateRange", "InvalidRange"]\n',
                    'from .calendar_utils import month_end, month_start, next_month_start, week_start\n'
                    'from .errors import InvalidRange\nfrom .range import DateRange\n\n'
                    '__all__ = [\n    "DateRange",\n    "InvalidRange",\n    "month_end",\n    "month_start",\n'
                    '    "next_month_start",\n    "week_start",\n]\n'),
            append("tests/test_range.py", DATERANGES_TEST_SPLIT),
            write("tests/test_calendar_utils.py", DATERANGES_TEST_CAL),
        ]),
        ("Add parse_range() for ISO ranges, months and years", [
            write("dateranges/parse.py", DATERANGES_PARSE),
            replace("dateranges/__init__.py", "from .errors import InvalidRange\nfrom .range import DateRange\n",
                    "from .errors import InvalidRange\nfrom .parse import parse_range\nfrom .range import DateRange\n"),
            replace("dateranges/__init__.py", '    "next_month_start",\n', '    "next_month_start",\n    "parse_range",\n'),
            write("tests/test_parse.py", DATERANGES_TEST_PARSE),
            append("README.md", r'''

                `parse_range()` accepts `2024-01-05..2024-01-09`, a single day, a month
                (`2024-02`) or a year (`2024`); `split_by_month()` / `split_by_week()`
                cut a range into calendar periods.
                '''),
        ]),
        ("Simplify month arithmetic in calendar_utils, add add_months()", [
            write("dateranges/calendar_utils.py", DATERANGES_CAL_V2),
            replace("dateranges/__init__.py", "from .calendar_utils import month_end, month_start, next_month_start, week_start\n",
                    "from .calendar_utils import add_months, month_end, month_start, next_month_start, week_start\n"),
            replace("dateranges/__init__.py", '    "DateRange",\n    "InvalidRange",\n', '    "DateRange",\n    "InvalidRange",\n    "add_months",\n'),
            replace("tests/test_calendar_utils.py", "from dateranges import month_end,", "from dateranges import add_months, month_end,"),
            append("tests/test_calendar_utils.py", r'''


                @pytest.mark.parametrize(
                    "day, months, expected",
                    [
                        (date(2024, 1, 31), 1, date(2024, 2, 29)),
                        (date(2024, 3, 31), -1, date(2024, 2, 29)),
                        (date(2024, 11, 30), 1, date(2024, 12, 30)),
                        (date(2024, 5, 15), 14, date(2025, 7, 15)),
                        (date(2024, 5, 15), -17, date(2022, 12, 15)),
                    ],
                    ids=["clamp-leap", "back-clamp", "into-december", "forward-years", "back-years"],
                )
                def test_add_months(day, months, expected):
                    assert add_months(day, months) == expected
                '''),
        ]),
    ],
    fix=[
        replace("dateranges/calendar_utils.py",
                "    return date(d.year, d.month % 12 + 1, 1)\n",
                "    return date(d.year + d.month // 12, d.month % 12 + 1, 1)\n"),
    ],
    test_changes=[
        append("tests/test_calendar_utils.py", r'''


            @pytest.mark.parametrize(
                "day, expected",
                [
                    (date(2024, 12, 5), date(2024, 12, 31)),
                    (date(1999, 12, 31), date(1999, 12, 31)),
                    (date(2023, 12, 1), date(2023, 12, 31)),
                ],
                ids=["2024", "1999-last-day", "2023-first-day"],
            )
            def test_month_end_december(day, expected):
                assert month_end(day) == expected


            def test_next_month_start_wraps_to_next_year():
                assert next_month_start(date(2024, 12, 15)) == date(2025, 1, 1)
                assert next_month_start(date(2025, 11, 30)) == date(2025, 12, 1)


            def test_add_months_lands_in_december_end():
                assert add_months(date(2024, 10, 31), 2) == date(2024, 12, 31)
            '''),
        append("tests/test_range.py", r'''


            def test_split_by_month_across_new_year():
                r = DateRange(date(2024, 11, 20), date(2025, 1, 10))
                assert r.split_by_month() == [
                    DateRange(date(2024, 11, 20), date(2024, 11, 30)),
                    DateRange(date(2024, 12, 1), date(2024, 12, 31)),
                    DateRange(date(2025, 1, 1), date(2025, 1, 10)),
                ]


            def test_split_by_month_inside_december():
                r = DateRange(date(2023, 12, 24), date(2023, 12, 26))
                assert r.split_by_month() == [r]


            def test_split_by_month_multi_year_covers_every_day():
                r = DateRange(date(2022, 6, 15), date(2025, 2, 3))
                chunks = r.split_by_month()
                assert len(chunks) == 33
                assert chunks[0].start == r.start and chunks[-1].end == r.end
                assert sum(len(chunk) for chunk in chunks) == len(r)
                for earlier, later in zip(chunks, chunks[1:]):
                    assert (later.start - earlier.end).days == 1
                for chunk in chunks:
                    assert (chunk.start.year, chunk.start.month) == (chunk.end.year, chunk.end.month)
            '''),
        append("tests/test_parse.py", r'''


            def test_december():
                assert parse_range("2023-12") == DateRange(date(2023, 12, 1), date(2023, 12, 31))
                assert [len(r) for r in parse_range("2024").split_by_month()][-2:] == [30, 31]
            '''),
    ],
    problem_statement=r'''
        `split_by_month()` raises `InvalidRange` for ranges that include December

        After upgrading to dateranges 1.2.0 our monthly billing job crashes on any
        period that touches December. Minimal reproduction:

        ```python
        from datetime import date
        from dateranges import DateRange

        DateRange(date(2024, 11, 20), date(2025, 1, 10)).split_by_month()
        ```

        Actual:

        ```
        dateranges.errors.InvalidRange: end 2023-12-31 is before start 2024-12-01
        ```

        Expected three chunks: 2024-11-20..2024-11-30, 2024-12-01..2024-12-31 and
        2025-01-01..2025-01-10.

        `parse_range("2024-12")` fails the same way, and `month_end(date(2024, 12, 5))`
        returns `2023-12-31` instead of `2024-12-31`. Everything worked for us on
        the previous release; other months look fine.
        '''
)


# --------------------------------------------------------------- slugkit --

SLUGKIT_NORMALIZE = D(r'''
    """Unicode to ASCII folding used by :func:`slugkit.slugify`."""

    import re
    import unicodedata

    # Letters that NFKD does not decompose into an ASCII base letter.
    _SPECIAL = {
        "ß": "ss", "æ": "ae", "Æ": "AE", "ø": "o", "Ø": "O", "œ": "oe", "Œ": "OE",
        "ł": "l", "Ł": "L", "đ": "d", "Đ": "D", "þ": "th", "Þ": "Th",
    }

    _WHITESPACE = re.compile(r"\s+")


    def to_ascii(text):
        """Fold *text* to ASCII, dropping characters that have no ASCII form."""
        text = "".join(_SPECIAL.get(ch, ch) for ch in text)
        decomposed = unicodedata.normalize("NFKD", text)
        return decomposed.encode("ascii", "ignore").decode("ascii")


    def collapse_whitespace(text):
        """Replace runs of whitespace with one space and strip the ends."""
        return _WHITESPACE.sub(" ", text).strip()
    ''')

SLUGKIT_SLUGIFY_V1 = D(r'''
    """URL slugs."""

    import re

    from .normalize import to_ascii

    _WORD = re.compile(r"[A-Za-z0-9]+")

    DEFAULT_SEPARATOR = "-"


    def slugify(text, separator=DEFAULT_SEPARATOR, lowercase=True):
        """Turn *text* into a URL-friendly slug.

        >>> slugify("Hello, World!")
        'hello-world'
        """
        ascii_text = to_ascii(text)
        if lowercase:
            ascii_text = ascii_text.lower()
        return separator.join(_WORD.findall(ascii_text))
    ''')

SLUGKIT_SLUGIFY_V2 = D(r'''
    """URL slugs."""

    import re

    from .normalize import to_ascii

    _WORD = re.compile(r"[A-Za-z0-9]+")

    DEFAULT_SEPARATOR = "-"


    def slugify(text, separator=DEFAULT_SEPARATOR, max_length=None, lowercase=True, stopwords=()):
        """Turn *text* into a URL-friendly slug.

        Words are runs of ASCII letters and digits (after folding accents), joined
        with *separator*.  *stopwords* are dropped (case-insensitively).  With
        *max_length* the slug is cut to at most that many characters; the cut
        may fall inside a word.

        >>> slugify("Hello, World!")
        'hello-world'
        >>> slugify("The Quick Brown Fox", stopwords=["the"], max_length=8)
        'quick-br'
        """
        ascii_text = to_ascii(text)
        if lowercase:
            ascii_text = ascii_text.lower()
        words = _WORD.findall(ascii_text)
        if stopwords:
            stop = {word.lower() for word in stopwords}
            words = [word for word in words if word.lower() not in stop]
        slug = separator.join(words)
        if max_length is not None and len(slug) > max_length:
            slug = slug[:max_length]
        return slug
    ''')

SLUGKIT_UNIQUE = D(r'''
    """Slugs that are unique within a namespace."""

    from .slugify import DEFAULT_SEPARATOR, slugify


    class UniqueSlugger:
        """Hand out slugs, appending ``-2``, ``-3``, ... to avoid duplicates.

        >>> slugger = UniqueSlugger()
        >>> slugger("Release notes"), slugger("Release Notes!")
        ('release-notes', 'release-notes-2')
        """

        def __init__(self, separator=DEFAULT_SEPARATOR, taken=()):
            self.separator = separator
            self._taken = set(taken)

        def __call__(self, text, **options):
            options.setdefault("separator", self.separator)
            base = slugify(text, **options) or "untitled"
            slug, counter = base, 1
            while slug in self._taken:
                counter += 1
                slug = f"{base}{self.separator}{counter}"
            self._taken.add(slug)
            return slug

        def __contains__(self, slug):
            return slug in self._taken

        def __len__(self):
            return len(self._taken)
    ''')

SLUGKIT_TRUNCATE = D(r'''
    """Word-aware truncation for titles and previews."""

    from .normalize import collapse_whitespace


    def truncate(text, width, placeholder="..."):
        """Shorten *text* to at most *width* characters, cutting between words.

        >>> truncate("The quick brown fox", 12)
        'The quick...'
        """
        text = collapse_whitespace(text)
        if len(text) <= width:
            return text
        room = width - len(placeholder)
        if room <= 0:
            return placeholder[:width]
        cut = text[: room + 1]
        space = cut.rfind(" ")
        cut = cut[:space] if space > 0 else cut[:room]
        return cut.rstrip(" ,.;:") + placeholder
    ''')

SLUGKIT_TEST_SLUGIFY_V1 = D(r'''
    import pytest

    from slugkit import slugify


    @pytest.mark.parametrize(
        "text, expected",
        [
            ("Hello World", "hello-world"),
            ("  Hello,   World!!  ", "hello-world"),
            ("Crème brûlée", "creme-brulee"),
            ("Straße in Łódź", "strasse-in-lodz"),
            ("C'est déjà l'été", "c-est-deja-l-ete"),
            ("Version 2.0 released", "version-2-0-released"),
            ("", ""),
            ("!!!", ""),
        ],
        ids=["simple", "punctuation", "accents", "special-letters", "apostrophes", "digits", "empty", "symbols"],
    )
    def test_slugify(text, expected):
        assert slugify(text) == expected


    def test_custom_separator():
        assert slugify("Hello World", separator="_") == "hello_world"


    def test_keep_case():
        assert slugify("Hello World", lowercase=False) == "Hello-World"
    ''')

SLUGKIT_TEST_OPTIONS = r'''


    def test_stopwords_are_dropped():
        assert slugify("The Lord of the Rings", stopwords=["the", "of"]) == "lord-rings"


    def test_stopwords_case_insensitive():
        assert slugify("The End", stopwords=["THE"], lowercase=False) == "End"


    @pytest.mark.parametrize(
        "text, max_length, expected",
        [
            ("hello world", 8, "hello-wo"),
            ("hello world", 5, "hello"),
            ("hello world", 11, "hello-world"),
            ("hello world", 50, "hello-world"),
            ("hello", 0, ""),
        ],
        ids=["mid-word", "word-end", "exact", "longer", "zero"],
    )
    def test_max_length(text, max_length, expected):
        assert slugify(text, max_length=max_length) == expected


    def test_max_length_after_stopwords():
        assert slugify("The Quick Brown Fox", stopwords=["the"], max_length=8) == "quick-br"
    '''

SLUGKIT_TEST_UNIQUE = D(r'''
    from slugkit import UniqueSlugger


    def test_duplicates_get_counters():
        slugger = UniqueSlugger()
        assert [slugger("Release notes") for _ in range(3)] == [
            "release-notes",
            "release-notes-2",
            "release-notes-3",
        ]


    def test_taken_slugs_are_skipped():
        slugger = UniqueSlugger(taken=["about", "about-2"])
        assert slugger("About") == "about-3"
        assert "about-3" in slugger


    def test_custom_separator():
        slugger = UniqueSlugger(separator="_")
        assert slugger("a b") == "a_b"
        assert slugger("A B") == "a_b_2"


    def test_empty_text():
        slugger = UniqueSlugger()
        assert slugger("???") == "untitled"
        assert slugger("") == "untitled-2"
        assert len(slugger) == 2
    ''')

SLUGKIT_TEST_TRUNCATE = D(r'''
    import pytest

    from slugkit import truncate


    @pytest.mark.parametrize(
        "text, width, expected",
        [
            ("The quick brown fox", 12, "The quick..."),
            ("The quick brown fox", 19, "The quick brown fox"),
            ("The  quick\nbrown", 50, "The quick brown"),
            ("Supercalifragilistic", 10, "Superca..."),
            ("Hello, world and more", 11, "Hello..."),
            ("abc def", 2, ".."),
        ],
        ids=["cut", "fits", "whitespace", "long-word", "punctuation", "tiny"],
    )
    def test_truncate(text, width, expected):
        result = truncate(text, width)
        assert result == expected
        assert len(result) <= width


    def test_custom_placeholder():
        assert truncate("one two three", 9, placeholder="…") == "one two…"
    ''')

project(
    name="slugkit",
    number=112,
    start="2024-04-02T14:05:00",
    commits=[
        ("slugkit: slugify() with accent folding", [
            write(".gitignore", GITIGNORE),
            write("pyproject.toml", pyproject("slugkit", "0.9.0", "Slugs, unique slugs and word-aware truncation")),
            write("README.md", D(r'''
                # slugkit

                URL slugs from arbitrary (Unicode) text.

                ```python
                from slugkit import slugify

                slugify("Crème brûlée, 2nd edition")   # 'creme-brulee-2nd-edition'
                ```

                Run the tests with `python -m pytest`.
                ''')),
            write("slugkit/__init__.py", D(r'''
                """slugkit: URL slugs and friends."""

                from .normalize import to_ascii
                from .slugify import slugify

                __all__ = ["slugify", "to_ascii"]
                ''')),
            write("slugkit/normalize.py", SLUGKIT_NORMALIZE),
            write("slugkit/slugify.py", SLUGKIT_SLUGIFY_V1),
            write("tests/test_slugify.py", SLUGKIT_TEST_SLUGIFY_V1),
        ]),
        ("slugify: add max_length and stopwords options", [
            write("slugkit/slugify.py", SLUGKIT_SLUGIFY_V2),
            append("tests/test_slugify.py", SLUGKIT_TEST_OPTIONS),
        ]),
        ("Add UniqueSlugger for per-namespace unique slugs", [
            write("slugkit/unique.py", SLUGKIT_UNIQUE),
            replace("slugkit/__init__.py", 'from .slugify import slugify\n\n__all__ = ["slugify", "to_ascii"]\n',
                    'from .slugify import slugify\nfrom .unique import UniqueSlugger\n\n__all__ = ["UniqueSlugger", "slugify", "to_ascii"]\n'),
            write("tests/test_unique.py", SLUGKIT_TEST_UNIQUE),
        ]),
        ("Add truncate() for titles and previews", [
            write("slugkit/truncate.py", SLUGKIT_TRUNCATE),
            replace("slugkit/__init__.py", 'from .slugify import slugify\nfrom .unique import UniqueSlugger\n\n__all__ = ["UniqueSlugger", "slugify", "to_ascii"]\n',
                    'from .slugify import slugify\nfrom .truncate import truncate\nfrom .unique import UniqueSlugger\n\n'
                    '__all__ = ["UniqueSlugger", "slugify", "to_ascii", "truncate"]\n'),
            write("tests/test_truncate.py", SLUGKIT_TEST_TRUNCATE),
            append("README.md", r'''

                `slugify(text, separator="-", max_length=None, lowercase=True, stopwords=())`,
                `UniqueSlugger()` (appends `-2`, `-3`, ... to repeated slugs) and
                `truncate(text, width)` (cuts between words and adds `...`).
                '''),
        ]),
    ],
    fix=[
        replace("slugkit/slugify.py",
                "        slug = slug[:max_length]\n",
                "        slug = slug[:max_length].rstrip(separator)\n"),
    ],
    test_changes=[
        append("tests/test_slugify.py", r'''


            @pytest.mark.parametrize(
                "text, options, expected",
                [
                    ("Hello World Again", {"max_length": 6}, "hello"),
                    ("Hello World Again", {"max_length": 12}, "hello-world"),
                    ("Hello World", {"max_length": 6, "separator": "_"}, "hello"),
                    ("a b c d e", {"max_length": 4, "separator": "."}, "a.b"),
                    ("Crème brûlée recipe", {"max_length": 13}, "creme-brulee"),
                    ("The Art of War", {"max_length": 4, "stopwords": ["the"]}, "art"),
                ],
                ids=["dash", "two-words", "underscore", "dot", "accents", "stopwords"],
            )
            def test_max_length_does_not_end_with_separator(text, options, expected):
                slug = slugify(text, **options)
                assert slug == expected
                assert len(slug) <= options["max_length"]


            def test_max_length_every_cut_point():
                title = "Ten Tips for Writing Better Release Notes"
                full = slugify(title)
                for n in range(1, len(full) + 1):
                    slug = slugify(title, max_length=n)
                    assert len(slug) <= n
                    assert full.startswith(slug)
                    assert not slug.endswith("-"), (n, slug)
                    assert len(slug) >= n - 1
            '''),
        append("tests/test_unique.py", r'''


            def test_unique_slugs_with_max_length():
                slugger = UniqueSlugger()
                assert slugger("Hello World", max_length=6) == "hello"
                assert slugger("Hello Wonderland", max_length=6) == "hello-2"
            '''),
    ],
    problem_statement=r'''
        `slugify(..., max_length=N)` can return a slug ending in a separator

        When the cut made by `max_length` lands right after a word, the slug keeps
        the separator that followed that word, which gives ugly URLs like
        `/posts/hello-`:

        ```python
        >>> from slugkit import slugify
        >>> slugify("Hello World Again", max_length=6)
        'hello-'
        >>> slugify("Hello World", max_length=6, separator="_")
        'hello_'
        ```

        Expected `'hello'` in both cases. Cutting inside a word is fine and
        documented (`slugify("hello world", max_length=8) == "hello-wo"`); the
        problem is only the dangling separator at the end. The result should still
        never be longer than `max_length`.

        It also leaks into `UniqueSlugger`: with `max_length=6`, "Hello World"
        becomes `hello-` and a second "Hello Wonderland" becomes `hello--2`.
        '''
)


# ----------------------------------------------------------------- calcy --

CALCY_TOKENS_V1 = D(r'''
    """Tokenizer for calculator expressions."""

    import re
    from dataclasses import dataclass

    from .errors import ParseError

    _TOKEN = re.compile(
        r"""
        (?P<ws>\s+)
      | (?P<number>(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?)
      | (?P<name>[A-Za-z_][A-Za-z_0-9]*)
      | (?P<op>[-+*/%^(),])
        """,
        re.VERBOSE,
    )


    @dataclass(frozen=True)
    class Token:
        kind: str  # "number", "name", "op" or "end"
        text: str
        pos: int


    def tokenize(text):
        """Split *text* into tokens, ending with an ``end`` token."""
        tokens = []
        pos = 0
        while pos < len(text):
            match = _TOKEN.match(text, pos)
            if match is None:
                raise ParseError(f"unexpected character {text[pos]!r}", pos)
            if match.lastgroup != "ws":
                tokens.append(Token(match.lastgroup, match.group(), pos))
            pos = match.end()
        tokens.append(Token("end", "", pos))
        return tokens
    ''')

CALCY_NODES = D(r'''
    """Expression tree nodes."""

    from dataclasses import dataclass


    @dataclass(frozen=True)
    class Number:
        value: float


    @dataclass(frozen=True)
    class Name:
        name: str


    @dataclass(frozen=True)
    class Unary:
        op: str
        operand: object


    @dataclass(frozen=True)
    class Binary:
        op: str
        left: object
        right: object


    @dataclass(frozen=True)
    class Call:
        func: str
        args: tuple
    ''')

CALCY_PARSER = D(r'''
    """Recursive-descent parser.

    Grammar, from lowest to highest precedence::

        expr   := term (("+" | "-") term)*
        term   := unary (("*" | "/" | "%") unary)*
        unary  := ("-" | "+") unary | power
        power  := atom ("^" atom)*
        atom   := NUMBER | NAME | NAME "(" [expr ("," expr)*] ")" | "(" expr ")"
    """

    from .errors import ParseError
    from .nodes import Binary, Call, Name, Number, Unary
    from .tokens import tokenize


    def _number(text):
        if any(ch in text for ch in ".eE"):
            return float(text)
        return int(text)


    class Parser:
        def __init__(self, text):
            self.tokens = tokenize(text)
            self.index = 0

        @property
        def current(self):
            return self.tokens[self.index]

        def _accept(self, *ops):
            token = self.current
            if token.kind == "op" and token.text in ops:
                self.index += 1
                return token
            return None

        def _expect(self, op):
            if self._accept(op) is None:
                found = self.current.text or "end of input"
                raise ParseError(f"expected {op!r}, found {found!r}", self.current.pos)

        def _error(self):
            found = self.current.text or "end of input"
            return ParseError(f"unexpected {found!r}", self.current.pos)

        def parse(self):
            node = self._expr()
            if self.current.kind != "end":
                raise self._error()
            return node

        def _expr(self):
            node = self._term()
            while (token := self._accept("+", "-")) is not None:
                node = Binary(token.text, node, self._term())
            return node

        def _term(self):
            node = self._unary()
            while (token := self._accept("*", "/", "%")) is not None:
                node = Binary(token.text, node, self._unary())
            return node

        def _unary(self):
            token = self._accept("-", "+")
            if token is not None:
                return Unary(token.text, self._unary())
            return self._power()

        def _power(self):
            node = self._atom()
            while self._accept("^") is not None:
                node = Binary("^", node, self._atom())
            return node

        def _atom(self):
            token = self.current
            if token.kind == "number":
                self.index += 1
                return Number(_number(token.text))
            if token.kind == "name":
                self.index += 1
                if self._accept("(") is None:
                    return Name(token.text)
                args = []
                if self._accept(")") is None:
                    args.append(self._expr())
                    while self._accept(",") is not None:
                        args.append(self._expr())
                    self._expect(")")
                return Call(token.text, tuple(args))
            if self._accept("(") is not None:
                node = self._expr()
                self._expect(")")
                return node
            raise self._error()


    def parse(text):
        """Parse *text* into an expression tree."""
        return Parser(text).parse()
    ''')

CALCY_EVALUATOR = D(r'''
    """Evaluate expression trees."""

    import math
    import operator

    from .errors import EvalError
    from .nodes import Binary, Call, Name, Number, Unary
    from .parser import parse

    FUNCTIONS = {
        "abs": abs,
        "ceil": math.ceil,
        "floor": math.floor,
        "log": math.log,
        "max": max,
        "min": min,
        "round": round,
        "sqrt": math.sqrt,
    }

    CONSTANTS = {"pi": math.pi, "e": math.e}

    _BINARY = {
        "+": operator.add,
        "-": operator.sub,
        "*": operator.mul,
        "/": operator.truediv,
        "%": operator.mod,
        "^": operator.pow,
    }


    def _eval(node, env):
        if isinstance(node, Number):
            return node.value
        if isinstance(node, Name):
            try:
                return env[node.name]
            except KeyError:
                raise EvalError(f"unknown variable {node.name!r}") from None
        if isinstance(node, Unary):
            value = _eval(node.operand, env)
            return -value if node.op == "-" else +value
        if isinstance(node, Binary):
            left = _eval(node.left, env)
            right = _eval(node.right, env)
            try:
                return _BINARY[node.op](left, right)
            except ZeroDivisionError:
                raise EvalError("division by zero") from None
        if isinstance(node, Call):
            func = FUNCTIONS.get(node.func)
            if func is None:
                raise EvalError(f"unknown function {node.func!r}")
            args = [_eval(arg, env) for arg in node.args]
            try:
                return func(*args)
            except (TypeError, ValueError) as exc:
                raise EvalError(f"{node.func}(): {exc}") from None
        raise EvalError(f"cannot evaluate {node!r}")


    def evaluate(text, variables=None):
        """Evaluate the expression *text*.

        >>> evaluate("2 * (x + 1)", {"x": 4})
        10
        """
        env = dict(CONSTANTS)
        if variables:
            env.update(variables)
        return _eval(parse(text), env)
    ''')

CALCY_TEST_TOKENS = D(r'''
    import pytest

    from calcy.errors import ParseError
    from calcy.tokens import tokenize


    def kinds_and_texts(text):
        return [(t.kind, t.text) for t in tokenize(text)]


    def test_numbers_names_and_ops():
        assert kinds_and_texts("x1 + 2.5*(3e2)") == [
            ("name", "x1"),
            ("op", "+"),
            ("number", "2.5"),
            ("op", "*"),
            ("op", "("),
            ("number", "3e2"),
            ("op", ")"),
            ("end", ""),
        ]


    def test_positions():
        assert [t.pos for t in tokenize(" 1 +  2")] == [1, 3, 6, 7]


    @pytest.mark.parametrize("text", ["1 $ 2", "a = 1", "#"], ids=["dollar", "equals", "hash"])
    def test_bad_character(text):
        with pytest.raises(ParseError):
            tokenize(text)
    ''')

CALCY_TEST_PARSER = D(r'''
    import pytest

    from calcy.errors import ParseError
    from calcy.nodes import Binary, Call, Name, Number, Unary
    from calcy.parser import parse


    def test_precedence():
        assert parse("1 + 2 * 3") == Binary("+", Number(1), Binary("*", Number(2), Number(3)))


    def test_left_associative_subtraction():
        assert parse("8 - 3 - 2") == Binary("-", Binary("-", Number(8), Number(3)), Number(2))


    def test_unary_minus():
        assert parse("-x * 2") == Binary("*", Unary("-", Name("x")), Number(2))


    def test_call_with_arguments():
        assert parse("max(1, y)") == Call("max", (Number(1), Name("y")))


    def test_number_types():
        assert parse("2") == Number(2)
        assert isinstance(parse("2").value, int)
        assert parse("2.5") == Number(2.5)


    @pytest.mark.parametrize(
        "text",
        ["", "1 +", "(1 + 2", "max(1,", "1 2", ")"],
        ids=["empty", "dangling-op", "unclosed", "unclosed-call", "two-numbers", "close-paren"],
    )
    def test_syntax_errors(text):
        with pytest.raises(ParseError):
            parse(text)
    ''')

CALCY_TEST_EVAL = D(r'''
    import math

    import pytest

    from calcy import EvalError, evaluate


    @pytest.mark.parametrize(
        "expr, expected",
        [
            ("1 + 2 * 3", 7),
            ("(1 + 2) * 3", 9),
            ("10 / 4", 2.5),
            ("10 % 4", 2),
            ("2 ^ 10", 1024),
            ("-3 + 5", 2),
            ("-2 ^ 2", -4),
            ("(-2) ^ 2", 4),
            ("2 * -3", -6),
            ("8 - 3 - 2", 3),
            ("100 / 10 / 5", 2),
        ],
        ids=["precedence", "parens", "division", "modulo", "power", "unary", "neg-power",
             "paren-neg-power", "times-neg", "left-sub", "left-div"],
    )
    def test_arithmetic(expr, expected):
        assert evaluate(expr) == pytest.approx(expected)


    def test_variables_and_constants():
        assert evaluate("2 * r * pi", {"r": 0.5}) == pytest.approx(math.pi)


    def test_functions():
        assert evaluate("max(1, sqrt(16), abs(-3))") == 4
        assert evaluate("round(2.567, 1)") == pytest.approx(2.6)


    @pytest.mark.parametrize(
        "expr",
        ["1 / 0", "unknown + 1", "nope(1)", "sqrt(-1)"],
        ids=["div-zero", "unknown-var", "unknown-func", "domain"],
    )
    def test_eval_errors(expr):
        with pytest.raises(EvalError):
            evaluate(expr)
    ''')

project(
    name="calcy",
    number=58,
    start="2024-01-16T11:30:00",
    commits=[
        ("Tokenizer and expression tree nodes", [
            write(".gitignore", GITIGNORE),
            write("pyproject.toml", pyproject("calcy", "0.3.0", "A tiny, safe expression calculator")),
            write("README.md", D(r'''
                # calcy

                A tiny, safe expression calculator (no `eval`).

                ```python
                from calcy import evaluate

                evaluate("2 * (x + 1) ^ 2", {"x": 3})   # 32
                ```

                Operators: `+ - * / %`, `^` (power), unary `-`/`+`, parentheses,
                function calls (`sqrt`, `abs`, `min`, `max`, `round`, `floor`, `ceil`,
                `log`) and the constants `pi` and `e`.

                Run the tests with `python -m pytest`.
                ''')),
            write("calcy/__init__.py", D(r'''
                """calcy: a tiny, safe expression calculator."""

                from .errors import CalcError, EvalError, ParseError
                from .tokens import tokenize

                __all__ = ["CalcError", "EvalError", "ParseError", "tokenize"]
                ''')),
            write("calcy/errors.py", D(r'''
                class CalcError(Exception):
                    """Base class for calculator errors."""


                class ParseError(CalcError):
                    """The expression is not syntactically valid."""

                    def __init__(self, message, position=None):
                        super().__init__(message if position is None else f"{message} at position {position}")
                        self.position = position


                class EvalError(CalcError):
                    """The expression is valid but cannot be evaluated."""
                ''')),
            write("calcy/tokens.py", CALCY_TOKENS_V1),
            write("calcy/nodes.py", CALCY_NODES),
            write("tests/test_tokens.py", CALCY_TEST_TOKENS),
        ]),
        ("Recursive-descent parser", [
            write("calcy/parser.py", CALCY_PARSER),
            replace("calcy/__init__.py", 'from .tokens import tokenize\n\n__all__ = ["CalcError", "EvalError", "ParseError", "tokenize"]\n',
                    'from .parser import parse\nfrom .tokens import tokenize\n\n'
                    '__all__ = ["CalcError", "EvalError", "ParseError", "parse", "tokenize"]\n'),
            write("tests/test_parser.py", CALCY_TEST_PARSER),
        ]),
        ("Evaluator with variables, constants and functions", [
            write("calcy/evaluator.py", CALCY_EVALUATOR),
            replace("calcy/__init__.py", 'from .errors import CalcError, EvalError, ParseError\n',
                    'from .errors import CalcError, EvalError, ParseError\nfrom .evaluator import evaluate\n'),
            replace("calcy/__init__.py", '"ParseError", "parse", "tokenize"]', '"ParseError", "evaluate", "parse", "tokenize"]'),
            write("tests/test_evaluator.py", CALCY_TEST_EVAL),
        ]),
        ("Accept Python-style ** as an alias for ^", [
            replace("calcy/tokens.py", '  | (?P<op>[-+*/%^(),])\n', '  | (?P<op>\\*\\*|[-+*/%^(),])\n'),
            replace("calcy/tokens.py",
                    '        if match.lastgroup != "ws":\n            tokens.append(Token(match.lastgroup, match.group(), pos))\n',
                    '        if match.lastgroup != "ws":\n            value = "^" if match.group() == "**" else match.group()\n'
                    '            tokens.append(Token(match.lastgroup, value, pos))\n'),
            append("tests/test_tokens.py", r'''


                def test_double_star_is_power():
                    assert kinds_and_texts("2**3") == [("number", "2"), ("op", "^"), ("number", "3"), ("end", "")]
                '''),
            replace("README.md", "Operators: `+ - * / %`, `^` (power),", "Operators: `+ - * / %`, `^` or `**` (power),"),
        ]),
    ],
    fix=[
        replace("calcy/parser.py", '    power  := atom ("^" atom)*\n', '    power  := atom ["^" unary]    (right-associative)\n'),
        replace("calcy/parser.py",
                '''    def _power(self):
        node = self._atom()
        while self._accept("^") is not None:
            node = Binary("^", node, self._atom())
        return node
''',
                '''    def _power(self):
        node = self._atom()
        if self._accept("^") is not None:
            # the exponent may itself be a (signed) power: 2^3^2 == 2^(3^2), 2^-1
            return Binary("^", node, self._unary())
        return node
'''),
    ],
    test_changes=[
        append("tests/test_evaluator.py", r'''


            @pytest.mark.parametrize(
                "expr, expected",
                [
                    ("2^3^2", 512),
                    ("2**3**2", 512),
                    ("2 ^ 2 ^ 3", 256),
                    ("(2^3)^2", 64),
                    ("4^0.5^2", 4 ** 0.25),
                    ("1 + 2^3^2 * 2", 1025),
                    ("2^-1", 0.5),
                    ("2^-2^2", 2 ** -4),
                    ("10^-2 * 100", 1.0),
                    ("-2^2", -4),
                    ("3^2^0", 3),
                ],
                ids=["chain", "chain-double-star", "chain-spaces", "parenthesised", "fractional",
                     "inside-sum", "negative-exponent", "negative-chain", "negative-then-times",
                     "unary-base", "zero-top"],
            )
            def test_power_is_right_associative(expr, expected):
                assert evaluate(expr) == pytest.approx(expected)


            def test_power_chain_with_variables():
                assert evaluate("a^b^c", {"a": 3, "b": 2, "c": 3}) == 3 ** 8
            '''),
        append("tests/test_parser.py", r'''


            def test_power_tree_is_right_nested():
                assert parse("a^b^c") == Binary("^", Name("a"), Binary("^", Name("b"), Name("c")))


            def test_negative_exponent_parses():
                assert parse("x^-y") == Binary("^", Name("x"), Unary("-", Name("y")))
            '''),
    ],
    problem_statement=r'''
        Power operator is evaluated left-to-right, and negative exponents are rejected

        `^` (and its alias `**`) is evaluated left-associatively, which is not how
        exponentiation works in maths or in Python:

        ```python
        >>> from calcy import evaluate
        >>> evaluate("2^3^2")
        64
        >>> 2 ** 3 ** 2
        512
        ```

        Expected `512`, i.e. `2^(3^2)`. Explicit parentheses `(2^3)^2` should of
        course still give `64`.

        Related: a signed exponent is a syntax error, although it is unambiguous:

        ```python
        >>> evaluate("2^-1")
        calcy.errors.ParseError: unexpected '-' at position 2
        ```

        Expected `0.5` (same as Python's `2 ** -1`). Unary minus in front of a
        power must keep working as it does today: `-2^2 == -4`.
        '''
)


# ---------------------------------------------------------------- lrukit --

LRUKIT_CACHE = D(r'''
    """A size-bounded least-recently-used mapping."""

    from collections import OrderedDict

    from .stats import CacheStats

    _MISSING = object()


    class LRUCache:
        """Keep at most *maxsize* items, discarding the least recently used first.

        Reads through :meth:`get` / ``cache[key]`` and writes through :meth:`put`
        / ``cache[key] = value`` make the key the most recently used one;
        ``key in cache`` and :meth:`peek` do not.  :meth:`keys` lists keys from
        least to most recently used.  *on_evict(key, value)* is called for every
        entry the cache discards to make room.
        """

        def __init__(self, maxsize=128, on_evict=None):
            if maxsize < 1:
                raise ValueError("maxsize must be at least 1")
            self.maxsize = maxsize
            self.on_evict = on_evict
            self.stats = CacheStats()
            self._data = OrderedDict()

        def get(self, key, default=None):
            value = self._data.get(key, _MISSING)
            if value is _MISSING:
                self.stats.misses += 1
                return default
            self.stats.hits += 1
            self._data.move_to_end(key)
            return value

        def peek(self, key, default=None):
            """Return the value for *key* without touching recency or stats."""
            return self._data.get(key, default)

        def put(self, key, value):
            if len(self._data) >= self.maxsize:
                self._evict()
            self._data[key] = value
            self._data.move_to_end(key)

        def _evict(self):
            key, value = self._data.popitem(last=False)
            self.stats.evictions += 1
            if self.on_evict is not None:
                self.on_evict(key, value)

        def pop(self, key, default=_MISSING):
            if default is _MISSING:
                return self._data.pop(key)
            return self._data.pop(key, default)

        def clear(self):
            self._data.clear()

        def keys(self):
            return list(self._data)

        def items(self):
            return list(self._data.items())

        def __getitem__(self, key):
            value = self.get(key, _MISSING)
            if value is _MISSING:
                raise KeyError(key)
            return value

        def __setitem__(self, key, value):
            self.put(key, value)

        def __delitem__(self, key):
            del self._data[key]

        def __contains__(self, key):
            return key in self._data

        def __len__(self):
            return len(self._data)

        def __iter__(self):
            return iter(list(self._data))

        def __repr__(self):
            return f"LRUCache(maxsize={self.maxsize}, size={len(self._data)})"
    ''')

LRUKIT_STATS = D(r'''
    """Cache statistics."""

    from dataclasses import dataclass


    @dataclass
    class CacheStats:
        hits: int = 0
        misses: int = 0
        evictions: int = 0

        @property
        def lookups(self):
            return self.hits + self.misses

        @property
        def hit_rate(self):
            return self.hits / self.lookups if self.lookups else 0.0

        def reset(self):
            self.hits = self.misses = self.evictions = 0
    ''')

LRUKIT_KEYS = D(r'''
    """Hashable cache keys from call arguments."""


    class _KwargsMark:
        __slots__ = ()

        def __repr__(self):
            return "<kwargs>"


    KWARGS_MARK = _KwargsMark()


    def make_key(args, kwargs, typed=False):
        """Build a hashable key from positional and keyword arguments.

        Keyword order does not matter.  With *typed*, ``f(1)`` and ``f(1.0)``
        get different keys.
        """
        key = tuple(args)
        items = sorted(kwargs.items())
        if items:
            key += (KWARGS_MARK,) + tuple(items)
        if typed:
            key += tuple(type(arg) for arg in args) + tuple(type(value) for _, value in items)
        return key
    ''')

LRUKIT_MEMOIZE = D(r'''
    """A memoizing decorator backed by :class:`LRUCache`."""

    import functools

    from .cache import LRUCache
    from .keys import make_key

    _MISSING = object()


    def memoize(maxsize=128, typed=False):
        """Cache the results of the decorated function in an LRU cache.

        The wrapper exposes ``cache`` (the :class:`LRUCache`) and
        ``cache_clear()``.
        """

        def decorator(func):
            cache = LRUCache(maxsize)

            @functools.wraps(func)
            def wrapper(*args, **kwargs):
                key = make_key(args, kwargs, typed)
                value = cache.get(key, _MISSING)
                if value is _MISSING:
                    value = func(*args, **kwargs)
                    cache.put(key, value)
                return value

            wrapper.cache = cache
            wrapper.cache_clear = cache.clear
            return wrapper

        return decorator
    ''')

LRUKIT_RESIZE = '''
    def resize(self, maxsize):
        """Change the capacity, evicting least recently used entries if needed."""
        if maxsize < 1:
            raise ValueError("maxsize must be at least 1")
        self.maxsize = maxsize
        while len(self._data) > maxsize:
            self._evict()
'''

LRUKIT_TEST_CACHE = D(r'''
    import pytest

    from lrukit import LRUCache


    def test_get_and_put():
        cache = LRUCache(maxsize=2)
        cache.put("a", 1)
        assert cache.get("a") == 1
        assert cache.get("missing") is None
        assert cache.get("missing", 0) == 0


    def test_evicts_least_recently_used():
        cache = LRUCache(maxsize=2)
        cache.put("a", 1)
        cache.put("b", 2)
        cache.put("c", 3)
        assert "a" not in cache
        assert cache.keys() == ["b", "c"]


    def test_get_refreshes_recency():
        cache = LRUCache(maxsize=2)
        cache.put("a", 1)
        cache.put("b", 2)
        cache.get("a")
        cache.put("c", 3)
        assert cache.keys() == ["a", "c"]


    def test_peek_and_contains_do_not_refresh():
        cache = LRUCache(maxsize=2)
        cache.put("a", 1)
        cache.put("b", 2)
        assert cache.peek("a") == 1
        assert "a" in cache
        cache.put("c", 3)
        assert cache.keys() == ["b", "c"]


    def test_put_existing_key_updates_value():
        cache = LRUCache(maxsize=3)
        cache.put("a", 1)
        cache.put("a", 2)
        assert cache.get("a") == 2
        assert len(cache) == 1


    def test_mapping_protocol():
        cache = LRUCache(maxsize=3)
        cache["x"] = 10
        assert cache["x"] == 10
        del cache["x"]
        with pytest.raises(KeyError):
            cache["x"]
        assert list(cache) == []


    def test_stats():
        cache = LRUCache(maxsize=1)
        cache.put("a", 1)
        cache.get("a")
        cache.get("b")
        cache.put("b", 2)
        assert (cache.stats.hits, cache.stats.misses, cache.stats.evictions) == (1, 1, 1)
        assert cache.stats.hit_rate == 0.5
        cache.stats.reset()
        assert cache.stats.lookups == 0


    def test_on_evict_callback():
        evicted = []
        cache = LRUCache(maxsize=2, on_evict=lambda k, v: evicted.append((k, v)))
        for i, key in enumerate("abcd"):
            cache.put(key, i)
        assert evicted == [("a", 0), ("b", 1)]


    def test_pop_and_clear():
        cache = LRUCache()
        cache.put("a", 1)
        assert cache.pop("a") == 1
        assert cache.pop("a", None) is None
        with pytest.raises(KeyError):
            cache.pop("a")
        cache.put("b", 2)
        cache.clear()
        assert len(cache) == 0


    def test_maxsize_validated():
        with pytest.raises(ValueError):
            LRUCache(maxsize=0)
    ''')

LRUKIT_TEST_MEMOIZE = D(r'''
    from lrukit import memoize


    def test_results_are_cached():
        calls = []

        @memoize(maxsize=4)
        def square(x):
            calls.append(x)
            return x * x

        assert [square(3), square(3), square(4)] == [9, 9, 16]
        assert calls == [3, 4]
        assert square.cache.stats.hits == 1


    def test_keyword_order_does_not_matter():
        calls = []

        @memoize()
        def f(a, b=0, c=0):
            calls.append((a, b, c))
            return a + b + c

        assert f(1, b=2, c=3) == f(1, c=3, b=2) == 6
        assert len(calls) == 1


    def test_lru_bound_and_clear():
        calls = []

        @memoize(maxsize=2)
        def ident(x):
            calls.append(x)
            return x

        for x in (1, 2, 3, 1):
            ident(x)
        assert calls == [1, 2, 3, 1]
        ident.cache_clear()
        ident(3)
        assert calls == [1, 2, 3, 1, 3]


    def test_wraps_metadata():
        @memoize()
        def documented():
            """Docstring."""

        assert documented.__name__ == "documented"
        assert documented.__doc__ == "Docstring."
    ''')

LRUKIT_TEST_KEYS = D(r'''
    from lrukit.keys import make_key


    def test_positional_and_keyword_keys_differ():
        assert make_key((1,), {}) != make_key((), {"a": 1})


    def test_keyword_order_ignored():
        assert make_key((), {"a": 1, "b": 2}) == make_key((), {"b": 2, "a": 1})


    def test_typed():
        assert make_key((1,), {}) == make_key((1.0,), {})
        assert make_key((1,), {}, typed=True) != make_key((1.0,), {}, typed=True)


    def test_hashable():
        hash(make_key((1, "x"), {"k": (2, 3)}, typed=True))
    ''')

project(
    name="lrukit",
    number=19,
    start="2024-05-20T16:45:00",
    commits=[
        ("LRUCache with hit/miss/eviction statistics", [
            write(".gitignore", GITIGNORE),
            write("pyproject.toml", pyproject("lrukit", "2.1.0", "A small LRU cache with statistics and a memoize decorator")),
            write("README.md", D(r'''
                # lrukit

                A small least-recently-used cache with statistics.

                Run the tests with `python -m pytest`.
                ''')),
            write("lrukit/__init__.py", D(r'''
                """lrukit: a least-recently-used cache."""

                from .cache import LRUCache
                from .stats import CacheStats

                __all__ = ["CacheStats", "LRUCache"]
                ''')),
            write("lrukit/cache.py", LRUKIT_CACHE),
            write("lrukit/stats.py", LRUKIT_STATS),
            write("tests/test_cache.py", LRUKIT_TEST_CACHE),
        ]),
        ("Add memoize() decorator and make_key()", [
            write("lrukit/keys.py", LRUKIT_KEYS),
            write("lrukit/memoize.py", LRUKIT_MEMOIZE),
            replace("lrukit/__init__.py", 'from .stats import CacheStats\n\n__all__ = ["CacheStats", "LRUCache"]\n',
                    'from .memoize import memoize\nfrom .stats import CacheStats\n\n__all__ = ["CacheStats", "LRUCache", "memoize"]\n'),
            write("tests/test_memoize.py", LRUKIT_TEST_MEMOIZE),
            write("tests/test_keys.py", LRUKIT_TEST_KEYS),
        ]),
        ("LRUCache.resize() to change the capacity at runtime", [
            replace("lrukit/cache.py", "    def clear(self):\n", LRUKIT_RESIZE.lstrip("\n") + "\n    def clear(self):\n"),
            append("tests/test_cache.py", r'''


                def test_resize_shrinks_from_the_lru_end():
                    cache = LRUCache(maxsize=4)
                    for key in "abcd":
                        cache.put(key, key)
                    cache.get("a")
                    cache.resize(2)
                    assert cache.keys() == ["d", "a"]
                    assert cache.stats.evictions == 2


                def test_resize_grow():
                    cache = LRUCache(maxsize=1)
                    cache.resize(3)
                    for key in "abc":
                        cache.put(key, key)
                    assert len(cache) == 3
                '''),
        ]),
        ("README: usage examples", [
            append("README.md", r'''

                ```python
                from lrukit import LRUCache, memoize

                cache = LRUCache(maxsize=2)
                cache["a"] = 1
                cache["b"] = 2
                cache["a"]          # touch "a"
                cache["c"] = 3      # evicts "b", the least recently used key
                cache.keys()        # ['a', 'c']
                cache.stats         # CacheStats(hits=1, misses=0, evictions=1)

                @memoize(maxsize=256)
                def fib(n):
                    return n if n < 2 else fib(n - 1) + fib(n - 2)
                ```
                '''),
        ]),
    ],
    fix=[
        replace("lrukit/cache.py",
                '''    def put(self, key, value):
        if len(self._data) >= self.maxsize:
            self._evict()
        self._data[key] = value
        self._data.move_to_end(key)
''',
                '''    def put(self, key, value):
        if key in self._data:
            # an update never grows the cache, so nothing has to make room
            self._data[key] = value
            self._data.move_to_end(key)
            return
        if len(self._data) >= self.maxsize:
            self._evict()
        self._data[key] = value
'''),
    ],
    test_changes=[
        append("tests/test_cache.py", r'''


            def test_updating_key_in_full_cache_keeps_other_entries():
                cache = LRUCache(maxsize=3)
                for key in "abc":
                    cache.put(key, key.upper())
                cache.put("c", "updated")
                assert cache.items() == [("a", "A"), ("b", "B"), ("c", "updated")]
                assert cache.stats.evictions == 0


            def test_updating_key_makes_it_most_recent():
                cache = LRUCache(maxsize=3)
                for key in "abc":
                    cache[key] = key
                cache["b"] = "B"
                assert cache.keys() == ["a", "c", "b"]
                cache["d"] = "d"
                assert cache.keys() == ["c", "b", "d"]


            def test_updates_never_call_on_evict():
                evicted = []
                cache = LRUCache(maxsize=2, on_evict=lambda k, v: evicted.append(k))
                cache.put("x", 1)
                cache.put("y", 2)
                for i in range(5):
                    cache.put("y", i)
                cache.put("x", 10)
                assert evicted == []
                assert cache.items() == [("y", 4), ("x", 10)]


            def test_update_in_single_slot_cache():
                cache = LRUCache(maxsize=1)
                cache.put("k", 1)
                cache.put("k", 2)
                assert cache.items() == [("k", 2)]
                assert cache.stats.evictions == 0
            '''),
        append("tests/test_memoize.py", r'''


            def test_memoized_cache_updates_do_not_evict():
                @memoize(maxsize=2)
                def ident(x):
                    return x

                ident(1)
                ident(2)
                ident.cache.put(make_key((2,), {}), "two")
                assert ident(1) == 1 and ident(2) == "two"
                assert ident.cache.stats.evictions == 0
            '''),
        replace("tests/test_memoize.py", "from lrukit import memoize\n", "from lrukit import memoize\nfrom lrukit.keys import make_key\n"),
    ],
    problem_statement=r'''
        Re-assigning an existing key evicts an unrelated entry when the cache is full

        Updating the value of a key that is already cached should never push
        anything out of the cache, since the number of entries does not change.
        But once the cache is full, every update throws away the least recently
        used entry:

        ```python
        from lrukit import LRUCache

        cache = LRUCache(maxsize=3)
        cache["a"] = 1
        cache["b"] = 2
        cache["c"] = 3
        cache["c"] = 30           # update, not an insert

        print(cache.items())
        print(cache.stats.evictions)
        ```

        Actual:

        ```
        [('b', 2), ('c', 30)]
        1
        ```

        Expected:

        ```
        [('a', 1), ('b', 2), ('c', 30)]
        0
        ```

        The `on_evict` callback also fires for these phantom evictions, which in our
        case closes connections that are still in use. An updated key should
        become the most recently used one, as documented.
        '''
)


# ------------------------------------------------------------- semverkit --

SEMVER_VERSION = D(r'''
    """Semantic version values (https://semver.org)."""

    import re
    from dataclasses import dataclass
    from functools import total_ordering

    from .compare import compare
    from .errors import InvalidVersion

    _SEMVER = re.compile(
        r"^(?P<major>0|[1-9]\d*)\.(?P<minor>0|[1-9]\d*)\.(?P<patch>0|[1-9]\d*)"
        r"(?:-(?P<pre>[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?"
        r"(?:\+(?P<build>[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?$"
    )


    @total_ordering
    @dataclass(frozen=True, eq=False)
    class Version:
        """A semantic version.  Ordering follows SemVer precedence; build
        metadata is kept but ignored when comparing."""

        major: int
        minor: int = 0
        patch: int = 0
        prerelease: tuple = ()
        build: tuple = ()

        @classmethod
        def parse(cls, text):
            match = _SEMVER.match(text.strip())
            if match is None:
                raise InvalidVersion(f"not a semantic version: {text!r}")
            pre, build = match.group("pre"), match.group("build")
            return cls(
                int(match.group("major")),
                int(match.group("minor")),
                int(match.group("patch")),
                tuple(pre.split(".")) if pre else (),
                tuple(build.split(".")) if build else (),
            )

        @property
        def is_prerelease(self):
            return bool(self.prerelease)

        def bump_major(self):
            return Version(self.major + 1, 0, 0)

        def bump_minor(self):
            return Version(self.major, self.minor + 1, 0)

        def bump_patch(self):
            if self.prerelease:
                return Version(self.major, self.minor, self.patch)
            return Version(self.major, self.minor, self.patch + 1)

        def __str__(self):
            text = f"{self.major}.{self.minor}.{self.patch}"
            if self.prerelease:
                text += "-" + ".".join(self.prerelease)
            if self.build:
                text += "+" + ".".join(self.build)
            return text

        def __eq__(self, other):
            if not isinstance(other, Version):
                return NotImplemented
            return compare(self, other) == 0

        def __lt__(self, other):
            if not isinstance(other, Version):
                return NotImplemented
            return compare(self, other) < 0

        def __hash__(self):
            return hash((self.major, self.minor, self.patch, self.prerelease))
    ''')

SEMVER_COMPARE = D(r'''
    """Precedence rules from section 11 of the SemVer 2.0.0 specification."""


    def _cmp(a, b):
        return (a > b) - (a < b)


    def compare_prerelease(a, b):
        """Compare two pre-release tuples; ``()`` (a normal release) ranks highest."""
        if not a or not b:
            # 1.0.0-alpha < 1.0.0
            return _cmp(not a, not b)
        return _cmp(a, b)


    def compare(a, b):
        """Return -1, 0 or 1 as version *a* ranks below, equal to or above *b*.

        Build metadata does not take part in the comparison.
        """
        core = _cmp((a.major, a.minor, a.patch), (b.major, b.minor, b.patch))
        if core:
            return core
        return compare_prerelease(a.prerelease, b.prerelease)
    ''')

SEMVER_RANGES = D(r'''
    """Requirement specs such as ``>=1.2.0,<2.0.0``, ``^1.4.2``, ``~1.4.2``, ``==1.0.0``."""

    import operator
    import re

    from .errors import InvalidSpec, InvalidVersion
    from .version import Version

    _CLAUSE = re.compile(r"^\s*(\^|~|>=|<=|>|<|==|!=|=)?\s*(\S+)\s*$")

    _OPS = {
        ">=": operator.ge,
        "<=": operator.le,
        ">": operator.gt,
        "<": operator.lt,
        "==": operator.eq,
        "!=": operator.ne,
    }


    def _caret_upper(v):
        if v.major:
            return Version(v.major + 1, 0, 0)
        if v.minor:
            return Version(0, v.minor + 1, 0)
        return Version(0, 0, v.patch + 1)


    def parse_spec(spec):
        """Return the spec as a list of ``(operator, Version)`` clauses."""
        clauses = []
        for part in spec.split(","):
            match = _CLAUSE.match(part)
            if match is None:
                raise InvalidSpec(f"bad clause {part!r} in {spec!r}")
            op, text = match.group(1) or "==", match.group(2)
            try:
                version = Version.parse(text)
            except InvalidVersion as exc:
                raise InvalidSpec(str(exc)) from None
            if op == "^":
                clauses += [(">=", version), ("<", _caret_upper(version))]
            elif op == "~":
                clauses += [(">=", version), ("<", Version(version.major, version.minor + 1, 0))]
            else:
                clauses.append(("==" if op == "=" else op, version))
        return clauses


    def satisfies(version, spec, include_prerelease=False):
        """Does *version* meet every clause of *spec*?

        Like npm, a pre-release only matches when *include_prerelease* is set
        or a clause names a pre-release of the same ``major.minor.patch``.
        """
        if isinstance(version, str):
            version = Version.parse(version)
        clauses = parse_spec(spec)
        if version.is_prerelease and not include_prerelease:
            core = (version.major, version.minor, version.patch)
            if not any(v.prerelease and (v.major, v.minor, v.patch) == core for _, v in clauses):
                return False
        return all(_OPS[op](version, bound) for op, bound in clauses)


    def max_satisfying(versions, spec, include_prerelease=False):
        """The highest of *versions* that satisfies *spec*, or ``None``."""
        candidates = [Version.parse(v) if isinstance(v, str) else v for v in versions]
        matching = [v for v in candidates if satisfies(v, spec, include_prerelease)]
        return max(matching) if matching else None
    ''')

SEMVER_UTILS = D(r'''
    """Helpers for lists of version strings."""

    from .version import Version


    def sort_versions(versions, reverse=False):
        """Sort version strings by SemVer precedence, returning strings."""
        return sorted(versions, key=Version.parse, reverse=reverse)


    def latest(versions, include_prerelease=False):
        """The highest version string, skipping pre-releases unless asked."""
        parsed = [(Version.parse(v), v) for v in versions]
        if not include_prerelease:
            parsed = [(v, text) for v, text in parsed if not v.is_prerelease]
        if not parsed:
            return None
        return max(parsed, key=lambda pair: pair[0])[1]
    ''')

SEMVER_TEST_VERSION = D(r'''
    import pytest

    from semverkit import InvalidVersion, Version


    def test_parse_full():
        v = Version.parse("1.2.3-rc.1+build.7")
        assert (v.major, v.minor, v.patch) == (1, 2, 3)
        assert v.prerelease == ("rc", "1")
        assert v.build == ("build", "7")
        assert str(v) == "1.2.3-rc.1+build.7"


    @pytest.mark.parametrize(
        "text",
        ["1.2", "1.2.3.4", "01.2.3", "1.2.3-", "1.2.3+", "a.b.c", "1.2.3-be ta"],
        ids=["two-parts", "four-parts", "leading-zero", "empty-pre", "empty-build", "letters", "space"],
    )
    def test_invalid(text):
        with pytest.raises(InvalidVersion):
            Version.parse(text)


    def test_core_ordering():
        assert Version.parse("1.2.3") < Version.parse("1.2.4") < Version.parse("1.3.0") < Version.parse("2.0.0")
        assert Version.parse("1.10.0") > Version.parse("1.9.0")


    def test_prerelease_ranks_below_release():
        assert Version.parse("1.0.0-alpha") < Version.parse("1.0.0")
        assert Version.parse("1.0.0") > Version.parse("1.0.0-rc.1")
        assert Version.parse("1.0.0-rc.1") > Version.parse("0.9.9")


    def test_prerelease_identifiers():
        assert Version.parse("1.0.0-alpha") < Version.parse("1.0.0-beta")
        assert Version.parse("1.0.0-alpha") < Version.parse("1.0.0-alpha.1")
        assert Version.parse("1.0.0-alpha.1") < Version.parse("1.0.0-alpha.2")


    def test_build_metadata_ignored():
        assert Version.parse("1.0.0+a") == Version.parse("1.0.0+b")
        assert hash(Version.parse("1.0.0+a")) == hash(Version.parse("1.0.0"))


    def test_bumps():
        v = Version.parse("1.4.2")
        assert str(v.bump_patch()) == "1.4.3"
        assert str(v.bump_minor()) == "1.5.0"
        assert str(v.bump_major()) == "2.0.0"
        assert str(Version.parse("2.0.0-rc.1").bump_patch()) == "2.0.0"
    ''')

SEMVER_TEST_RANGES = D(r'''
    import pytest

    from semverkit import InvalidSpec, max_satisfying, satisfies


    @pytest.mark.parametrize(
        "version, spec, expected",
        [
            ("1.4.0", ">=1.2.0,<2.0.0", True),
            ("2.0.0", ">=1.2.0,<2.0.0", False),
            ("1.9.9", "^1.2.3", True),
            ("2.0.0", "^1.2.3", False),
            ("0.2.5", "^0.2.3", True),
            ("0.3.0", "^0.2.3", False),
            ("1.2.9", "~1.2.3", True),
            ("1.3.0", "~1.2.3", False),
            ("1.0.0", "1.0.0", True),
            ("1.0.1", "!=1.0.0", True),
        ],
        ids=["range-in", "range-out", "caret-in", "caret-out", "caret-zero-in", "caret-zero-out",
             "tilde-in", "tilde-out", "bare", "not-equal"],
    )
    def test_satisfies(version, spec, expected):
        assert satisfies(version, spec) is expected


    def test_prereleases_excluded_by_default():
        assert not satisfies("2.0.0-rc.1", ">=1.0.0")
        assert satisfies("2.0.0-rc.1", ">=1.0.0", include_prerelease=True)
        assert satisfies("2.0.0-rc.2", ">=2.0.0-rc.1")


    def test_max_satisfying():
        versions = ["1.2.0", "1.4.1", "1.10.0", "2.0.0"]
        assert str(max_satisfying(versions, "^1.2.0")) == "1.10.0"
        assert max_satisfying(versions, ">=3.0.0") is None


    @pytest.mark.parametrize("spec", ["", ">=", ">=1.0", "=>1.0.0"], ids=["empty", "no-version", "short", "bad-op"])
    def test_invalid_spec(spec):
        with pytest.raises(InvalidSpec):
            satisfies("1.0.0", spec)
    ''')

SEMVER_TEST_UTILS = D(r'''
    from semverkit import latest, sort_versions


    def test_sort_versions():
        assert sort_versions(["1.10.0", "1.2.0", "1.9.1", "0.9.0"]) == ["0.9.0", "1.2.0", "1.9.1", "1.10.0"]


    def test_sort_versions_reverse():
        assert sort_versions(["1.0.0-beta", "1.0.0", "1.0.0-alpha"], reverse=True) == [
            "1.0.0",
            "1.0.0-beta",
            "1.0.0-alpha",
        ]


    def test_latest():
        versions = ["1.0.0", "1.1.0-rc.1", "1.0.5"]
        assert latest(versions) == "1.0.5"
        assert latest(versions, include_prerelease=True) == "1.1.0-rc.1"
        assert latest([]) is None
    ''')

project(
    name="semverkit",
    number=203,
    start="2024-06-03T10:00:00",
    commits=[
        ("Version parsing, formatting and SemVer precedence", [
            write(".gitignore", GITIGNORE),
            write("pyproject.toml", pyproject("semverkit", "0.6.0", "Semantic version parsing, ordering and ranges")),
            write("README.md", D(r'''
                # semverkit

                Parse, order and match [semantic versions](https://semver.org).

                ```python
                from semverkit import Version

                Version.parse("1.0.0-rc.1") < Version.parse("1.0.0")   # True
                ```

                Run the tests with `python -m pytest`.
                ''')),
            write("semverkit/__init__.py", D(r'''
                """semverkit: semantic versions."""

                from .compare import compare
                from .errors import InvalidSpec, InvalidVersion
                from .version import Version

                __all__ = ["InvalidSpec", "InvalidVersion", "Version", "compare"]
                ''')),
            write("semverkit/errors.py", D(r'''
                class InvalidVersion(ValueError):
                    """Text that is not a semantic version."""


                class InvalidSpec(ValueError):
                    """A requirement spec that cannot be parsed."""
                ''')),
            write("semverkit/compare.py", SEMVER_COMPARE),
            write("semverkit/version.py", SEMVER_VERSION),
            write("tests/test_version.py", SEMVER_TEST_VERSION),
        ]),
        ("Requirement specs: satisfies() and max_satisfying()", [
            write("semverkit/ranges.py", SEMVER_RANGES),
            replace("semverkit/__init__.py", 'from .version import Version\n\n__all__ = ["InvalidSpec", "InvalidVersion", "Version", "compare"]\n',
                    'from .ranges import max_satisfying, satisfies\nfrom .version import Version\n\n'
                    '__all__ = ["InvalidSpec", "InvalidVersion", "Version", "compare", "max_satisfying", "satisfies"]\n'),
            write("tests/test_ranges.py", SEMVER_TEST_RANGES),
        ]),
        ("Add sort_versions() and latest()", [
            write("semverkit/utils.py", SEMVER_UTILS),
            replace("semverkit/__init__.py", 'from .version import Version\n\n',
                    'from .utils import latest, sort_versions\nfrom .version import Version\n\n'),
            replace("semverkit/__init__.py", '__all__ = ["InvalidSpec", "InvalidVersion", "Version", "compare", "max_satisfying", "satisfies"]\n',
                    '__all__ = [\n    "InvalidSpec",\n    "InvalidVersion",\n    "Version",\n    "compare",\n    "latest",\n'
                    '    "max_satisfying",\n    "satisfies",\n    "sort_versions",\n]\n'),
            write("tests/test_utils.py", SEMVER_TEST_UTILS),
        ]),
        ("Accept a leading 'v' (v1.2.3) as written in git tags", [
            replace("semverkit/version.py", '    r"^(?P<major>', '    r"^v?(?P<major>'),
            append("tests/test_version.py", r'''


                def test_leading_v():
                    assert Version.parse("v1.2.3") == Version.parse("1.2.3")
                    assert str(Version.parse("v1.2.3")) == "1.2.3"
                '''),
        ]),
    ],
    fix=[
        replace("semverkit/compare.py",
                '''def compare_prerelease(a, b):
    """Compare two pre-release tuples; ``()`` (a normal release) ranks highest."""
    if not a or not b:
        # 1.0.0-alpha < 1.0.0
        return _cmp(not a, not b)
    return _cmp(a, b)
''',
                '''def _identifier_key(identifier):
    # Numeric identifiers compare numerically and rank below alphanumeric
    # ones, which compare in ASCII order (SemVer 11.4.1 - 11.4.3).
    if identifier.isdigit():
        return (0, int(identifier), "")
    return (1, 0, identifier)


def compare_prerelease(a, b):
    """Compare two pre-release tuples; ``()`` (a normal release) ranks highest."""
    if not a or not b:
        # 1.0.0-alpha < 1.0.0
        return _cmp(not a, not b)
    # a shorter tuple ranks lower when all of its identifiers are equal (11.4.4)
    return _cmp([_identifier_key(i) for i in a], [_identifier_key(i) for i in b])
'''),
    ],
    test_changes=[
        append("tests/test_version.py", r'''


            SPEC_ORDER = [
                "1.0.0-alpha",
                "1.0.0-alpha.1",
                "1.0.0-alpha.beta",
                "1.0.0-beta",
                "1.0.0-beta.2",
                "1.0.0-beta.11",
                "1.0.0-rc.1",
                "1.0.0",
            ]


            def test_spec_precedence_example():
                versions = [Version.parse(v) for v in SPEC_ORDER]
                for lower, higher in zip(versions, versions[1:]):
                    assert lower < higher, (lower, higher)
                    assert higher > lower, (lower, higher)


            @pytest.mark.parametrize(
                "lower, higher",
                [
                    ("1.0.0-rc.2", "1.0.0-rc.10"),
                    ("1.0.0-9", "1.0.0-10"),
                    ("1.0.0-beta.99", "1.0.0-beta.100"),
                    ("1.0.0-alpha.9.beta", "1.0.0-alpha.10.alpha"),
                    ("1.0.0-x.7.z.92", "1.0.0-x.7.z.100"),
                    ("2.0.0-1.2", "2.0.0-1.10"),
                    ("1.0.0-999", "1.0.0-alpha"),
                    ("1.0.0-alpha10", "1.0.0-alpha9"),
                    ("1.0.0-rc.1", "1.0.0-rc.1.1"),
                ],
                ids=["rc", "bare-numbers", "three-digits", "middle", "spec-example", "second-field",
                     "numeric-below-alpha", "alphanumeric-stays-ascii", "longer-wins"],
            )
            def test_prerelease_precedence(lower, higher):
                assert Version.parse(lower) < Version.parse(higher)
                assert not Version.parse(higher) < Version.parse(lower)


            def test_numeric_identifiers_equal():
                assert Version.parse("1.0.0-rc.10") == Version.parse("1.0.0-rc.10+build.5")
                assert not Version.parse("1.0.0-rc.10") < Version.parse("1.0.0-rc.10")
            '''),
        append("tests/test_utils.py", r'''


            def test_sort_spec_example_shuffled():
                order = [
                    "1.0.0-alpha",
                    "1.0.0-alpha.1",
                    "1.0.0-alpha.beta",
                    "1.0.0-beta",
                    "1.0.0-beta.2",
                    "1.0.0-beta.11",
                    "1.0.0-rc.1",
                    "1.0.0",
                ]
                shuffled = [order[i] for i in (5, 0, 7, 3, 1, 6, 4, 2)]
                assert sort_versions(shuffled) == order


            def test_latest_prerelease_numbering():
                assert latest(["3.1.0-rc.9", "3.1.0-rc.10", "3.1.0-rc.2"], include_prerelease=True) == "3.1.0-rc.10"
            '''),
        append("tests/test_ranges.py", r'''


            def test_max_satisfying_picks_highest_numbered_prerelease():
                versions = ["2.0.0-rc.9", "2.0.0-rc.10", "2.0.0-rc.2", "1.9.0"]
                assert str(max_satisfying(versions, ">=2.0.0-rc.1")) == "2.0.0-rc.10"
                assert satisfies("2.0.0-rc.10", ">2.0.0-rc.9")
                assert not satisfies("2.0.0-rc.10", "<2.0.0-rc.9")
            '''),
    ],
    problem_statement=r'''
        Pre-releases numbered 10 and above sort before lower numbers (rc.10 < rc.2)

        Our release tooling picked `3.1.0-rc.9` as the newest candidate although
        `3.1.0-rc.10` had been published. It looks like numeric pre-release
        identifiers are compared as text:

        ```python
        >>> from semverkit import Version, sort_versions, max_satisfying
        >>> Version.parse("1.0.0-rc.10") > Version.parse("1.0.0-rc.2")
        False
        >>> sort_versions(["1.0.0-beta.11", "1.0.0-beta.2"])
        ['1.0.0-beta.11', '1.0.0-beta.2']
        >>> str(max_satisfying(["2.0.0-rc.9", "2.0.0-rc.10"], ">=2.0.0-rc.1"))
        '2.0.0-rc.9'
        ```

        Expected `True`, `['1.0.0-beta.2', '1.0.0-beta.11']` and `'2.0.0-rc.10'`.

        SemVer 2.0.0, section 11.4, says identifiers consisting of only digits are
        compared numerically, identifiers with letters or hyphens are compared
        lexically in ASCII sort order, numeric identifiers always have lower
        precedence than non-numeric ones, and a larger set of pre-release fields
        has higher precedence when all preceding identifiers are equal. The spec's
        example ordering is:

        `1.0.0-alpha < 1.0.0-alpha.1 < 1.0.0-alpha.beta < 1.0.0-beta < 1.0.0-beta.2 < 1.0.0-beta.11 < 1.0.0-rc.1 < 1.0.0`
        '''
)


# -------------------------------------------------------------- unitconv --

UNITCONV_UNITS = D(r'''
    """The unit registry.

    Every unit belongs to a dimension and is defined by its size in the
    dimension's base unit (metre, kilogram, second, litre).
    """

    from dataclasses import dataclass

    from .errors import UnknownUnitError


    @dataclass(frozen=True)
    class Unit:
        symbol: str
        name: str
        plural: str
        dimension: str
        factor: float  # size of one of this unit, in base units


    _REGISTRY = {}
    _ALIASES = {}


    def define(symbol, name, dimension, factor, plural=None, aliases=()):
        """Register a unit.  Symbols are case-sensitive; names and aliases are not."""
        unit = Unit(symbol, name, plural or name + "s", dimension, factor)
        _REGISTRY[symbol] = unit
        for alias in (unit.name, unit.plural, *aliases):
            _ALIASES[alias.lower()] = unit
        return unit


    def lookup(unit):
        """Find a unit by symbol (``"km"``) or by name/alias (``"Kilometres"``)."""
        if isinstance(unit, Unit):
            return unit
        found = _REGISTRY.get(unit) or _ALIASES.get(unit.strip().lower())
        if found is None:
            raise UnknownUnitError(f"unknown unit: {unit!r}")
        return found


    def dimensions():
        return sorted({unit.dimension for unit in _REGISTRY.values()})


    def units_for(dimension):
        """The units of *dimension*, smallest first."""
        return sorted((u for u in _REGISTRY.values() if u.dimension == dimension), key=lambda u: u.factor)


    # length (base: metre)
    define("m", "metre", "length", 1.0, aliases=("meter", "meters"))
    define("km", "kilometre", "length", 1000.0, aliases=("kilometer", "kilometers"))
    define("cm", "centimetre", "length", 0.01, aliases=("centimeter", "centimeters"))
    define("mm", "millimetre", "length", 0.001, aliases=("millimeter", "millimeters"))
    define("in", "inch", "length", 0.0254, plural="inches")
    define("ft", "foot", "length", 0.3048, plural="feet")
    define("yd", "yard", "length", 0.9144)
    define("mi", "mile", "length", 1609.344)

    # mass (base: kilogram)
    define("kg", "kilogram", "mass", 1.0)
    define("g", "gram", "mass", 0.001)
    define("lb", "pound", "mass", 0.45359237, aliases=("lbs",))
    define("oz", "ounce", "mass", 0.028349523125)
    ''')

UNITCONV_MORE_UNITS = '''
# time (base: second)
define("s", "second", "time", 1.0, aliases=("sec", "secs"))
define("min", "minute", "time", 60.0, aliases=("mins",))
define("h", "hour", "time", 3600.0, aliases=("hr", "hrs"))
define("d", "day", "time", 86400.0)

# volume (base: litre)
define("l", "litre", "volume", 1.0, aliases=("liter", "liters", "L"))
define("ml", "millilitre", "volume", 0.001, aliases=("milliliter", "milliliters", "mL"))
define("gal", "gallon", "volume", 3.785411784)
'''

UNITCONV_CONVERTER = D(r'''
    """Numeric conversion between units of the same dimension."""

    from .errors import IncompatibleUnitsError
    from .units import lookup


    def convert(value, from_unit, to_unit):
        """Convert *value* from *from_unit* to *to_unit*.

        >>> convert(1.5, "km", "m")
        1500.0
        """
        source = lookup(from_unit)
        target = lookup(to_unit)
        if source.dimension != target.dimension:
            raise IncompatibleUnitsError(
                f"cannot convert {source.dimension} ({source.symbol}) to {target.dimension} ({target.symbol})"
            )
        return value * source.factor / target.factor


    def conversion_factor(from_unit, to_unit):
        """The number to multiply by to go from *from_unit* to *to_unit*.

        >>> conversion_factor("ft", "in")
        12.0
        """
        return convert(1.0, from_unit, to_unit)
    ''')

UNITCONV_QUANTITY = D(r'''
    """Values with units attached."""

    import re
    from dataclasses import dataclass

    from .converter import convert
    from .errors import UnitError
    from .units import lookup

    _QUANTITY = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(\S.*?)\s*$")


    @dataclass(frozen=True)
    class Quantity:
        """A number and a unit; the unit is normalised to its symbol."""

        value: float
        unit: str

        def __post_init__(self):
            object.__setattr__(self, "unit", lookup(self.unit).symbol)

        def to(self, unit):
            target = lookup(unit)
            return Quantity(convert(self.value, self.unit, target), target.symbol)

        def __add__(self, other):
            if not isinstance(other, Quantity):
                return NotImplemented
            return Quantity(self.value + convert(other.value, other.unit, self.unit), self.unit)

        def __sub__(self, other):
            if not isinstance(other, Quantity):
                return NotImplemented
            return Quantity(self.value - convert(other.value, other.unit, self.unit), self.unit)

        def __str__(self):
            return f"{self.value:g} {self.unit}"


    def parse_quantity(text):
        """Parse ``"12.5 km"``, ``"3ft"`` or ``"-2 hours"`` into a :class:`Quantity`."""
        match = _QUANTITY.match(text)
        if match is None:
            raise UnitError(f"cannot parse quantity: {text!r}")
        return Quantity(float(match.group(1)), match.group(2))
    ''')

UNITCONV_FORMATTING = D(r'''
    """Human-readable quantities."""

    from .units import lookup


    def format_quantity(value, unit, precision=2, long=False):
        """Format *value* with its unit symbol, or with the unit's name if *long*.

        >>> format_quantity(1.5, "km", long=True)
        '1.50 kilometres'
        """
        found = lookup(unit)
        number = f"{value:.{precision}f}"
        if not long:
            return f"{number} {found.symbol}"
        name = found.name if abs(value) == 1 else found.plural
        return f"{number} {name}"
    ''')

UNITCONV_TEST_CONVERT = D(r'''
    import pytest

    from unitconv import IncompatibleUnitsError, UnknownUnitError, conversion_factor, convert


    @pytest.mark.parametrize(
        "value, src, dst, expected",
        [
            (1.5, "km", "m", 1500),
            (12, "in", "cm", 30.48),
            (26.2, "mi", "km", 42.1648),
            (3, "ft", "in", 36),
            (10, "lb", "kg", 4.5359237),
            (250, "g", "oz", 8.8184904874),
            (0, "m", "mi", 0),
            (-2, "km", "m", -2000),
        ],
        ids=["km-m", "in-cm", "marathon", "ft-in", "lb-kg", "g-oz", "zero", "negative"],
    )
    def test_convert(value, src, dst, expected):
        assert convert(value, src, dst) == pytest.approx(expected)


    @pytest.mark.parametrize(
        "name",
        ["kilometres", "Kilometers", "KILOMETRE", " kilometre "],
        ids=["plural", "american", "upper", "padded"],
    )
    def test_names_are_case_insensitive(name):
        assert convert(2, name, "m") == pytest.approx(2000)


    def test_symbols_are_case_sensitive():
        with pytest.raises(UnknownUnitError):
            convert(1, "KM", "m")


    def test_unknown_unit():
        with pytest.raises(UnknownUnitError, match="parsec"):
            convert(1, "parsec", "m")


    def test_incompatible_dimensions():
        with pytest.raises(IncompatibleUnitsError):
            convert(1, "m", "kg")


    def test_conversion_factor():
        assert conversion_factor("ft", "in") == pytest.approx(12)
        assert conversion_factor("m", "km") == pytest.approx(0.001)
    ''')

UNITCONV_TEST_CONVERT_MORE = r'''


    @pytest.mark.parametrize(
        "value, src, dst, expected",
        [
            (90, "min", "h", 1.5),
            (2, "d", "s", 172800),
            (1, "gal", "l", 3.785411784),
            (500, "mL", "L", 0.5),
        ],
        ids=["min-h", "d-s", "gal-l", "ml-l"],
    )
    def test_time_and_volume(value, src, dst, expected):
        assert convert(value, src, dst) == pytest.approx(expected)


    def test_registry_helpers():
        assert dimensions() == ["length", "mass", "time", "volume"]
        assert [u.symbol for u in units_for("time")] == ["s", "min", "h", "d"]
'''

UNITCONV_TEST_QUANTITY = D(r'''
    import pytest

    from unitconv import Quantity, UnitError, parse_quantity


    def test_unit_normalised_to_symbol():
        assert Quantity(3, "feet").unit == "ft"


    def test_to():
        q = Quantity(1500, "m").to("kilometres")
        assert q.unit == "km" and q.value == pytest.approx(1.5)


    def test_arithmetic_uses_left_unit():
        total = Quantity(1, "km") + Quantity(500, "m")
        assert total.unit == "km" and total.value == pytest.approx(1.5)
        assert (Quantity(1, "h") - Quantity(15, "min")).value == pytest.approx(0.75)


    def test_str():
        assert str(Quantity(2.50, "kg")) == "2.5 kg"


    @pytest.mark.parametrize(
        "text, value, unit",
        [("12.5 km", 12.5, "km"), ("3ft", 3, "ft"), ("-2 hours", -2, "h"), (" .5 l ", 0.5, "l"), ("1e3 g", 1000, "g")],
        ids=["spaced", "tight", "negative-name", "leading-dot", "exponent"],
    )
    def test_parse_quantity(text, value, unit):
        q = parse_quantity(text)
        assert (q.value, q.unit) == (pytest.approx(value), unit)


    @pytest.mark.parametrize("text", ["km", "12", "twelve km"], ids=["no-number", "no-unit", "words"])
    def test_parse_quantity_errors(text):
        with pytest.raises(UnitError):
            parse_quantity(text)
    ''')

UNITCONV_TEST_FORMATTING = D(r'''
    from unitconv import format_quantity


    def test_short():
        assert format_quantity(1.5, "kilometre") == "1.50 km"


    def test_long_plural_and_singular():
        assert format_quantity(1.5, "km", long=True) == "1.50 kilometres"
        assert format_quantity(1, "ft", precision=0, long=True) == "1 foot"
        assert format_quantity(3, "in", precision=1, long=True) == "3.0 inches"
    ''')

project(
    name="unitconv",
    number=64,
    start="2024-07-08T13:20:00",
    commits=[
        ("Unit registry and convert() for length and mass", [
            write(".gitignore", GITIGNORE),
            write("pyproject.toml", pyproject("unitconv", "0.5.0", "Unit conversion with a small unit registry")),
            write("README.md", D(r'''
                # unitconv

                Convert between units of the same dimension.

                ```python
                from unitconv import convert

                convert(26.2, "mi", "km")   # 42.16...
                ```

                Units are looked up by symbol (case-sensitive: `km`, `mL`) or by
                name/alias (case-insensitive: `kilometres`, `Feet`). Converting between
                dimensions raises `IncompatibleUnitsError`; unknown units raise
                `UnknownUnitError`. Both derive from `UnitError`.

                Run the tests with `python -m pytest`.
                ''')),
            write("unitconv/__init__.py", D(r'''
                """unitconv: unit conversion."""

                from .converter import conversion_factor, convert
                from .errors import IncompatibleUnitsError, UnitError, UnknownUnitError
                from .units import Unit, dimensions, lookup, units_for

                __all__ = [
                    "IncompatibleUnitsError",
                    "Unit",
                    "UnitError",
                    "UnknownUnitError",
                    "conversion_factor",
                    "convert",
                    "dimensions",
                    "lookup",
                    "units_for",
                ]
                ''')),
            write("unitconv/errors.py", D(r'''
                class UnitError(ValueError):
                    """Base class for unitconv errors."""


                class UnknownUnitError(UnitError):
                    """No unit with that symbol or name."""


                class IncompatibleUnitsError(UnitError):
                    """The units measure different dimensions."""
                ''')),
            write("unitconv/units.py", UNITCONV_UNITS),
            write("unitconv/converter.py", UNITCONV_CONVERTER),
            write("tests/test_convert.py", UNITCONV_TEST_CONVERT),
        ]),
        ("Add time and volume units", [
            append("unitconv/units.py", UNITCONV_MORE_UNITS),
            replace("tests/test_convert.py", "from unitconv import IncompatibleUnitsError, UnknownUnitError, conversion_factor, convert\n",
                    "from unitconv import (\n    IncompatibleUnitsError,\n    UnknownUnitError,\n    conversion_factor,\n"
                    "    convert,\n    dimensions,\n    units_for,\n)\n"),
            append("tests/test_convert.py", UNITCONV_TEST_CONVERT_MORE),
        ]),
        ("Quantity value type and parse_quantity()", [
            write("unitconv/quantity.py", UNITCONV_QUANTITY),
            replace("unitconv/__init__.py", "from .errors import IncompatibleUnitsError, UnitError, UnknownUnitError\n",
                    "from .errors import IncompatibleUnitsError, UnitError, UnknownUnitError\nfrom .quantity import Quantity, parse_quantity\n"),
            replace("unitconv/__init__.py", '    "IncompatibleUnitsError",\n', '    "IncompatibleUnitsError",\n    "Quantity",\n'),
            replace("unitconv/__init__.py", '    "lookup",\n', '    "lookup",\n    "parse_quantity",\n'),
            write("tests/test_quantity.py", UNITCONV_TEST_QUANTITY),
        ]),
        ("Add format_quantity() with long unit names", [
            write("unitconv/formatting.py", UNITCONV_FORMATTING),
            replace("unitconv/__init__.py", "from .errors import IncompatibleUnitsError, UnitError, UnknownUnitError\n",
                    "from .errors import IncompatibleUnitsError, UnitError, UnknownUnitError\nfrom .formatting import format_quantity\n"),
            replace("unitconv/__init__.py", '    "dimensions",\n', '    "dimensions",\n    "format_quantity",\n'),
            write("tests/test_formatting.py", UNITCONV_TEST_FORMATTING),
        ]),
    ],
    fix=[
        replace("unitconv/units.py",
                '''Every unit belongs to a dimension and is defined by its size in the
dimension's base unit (metre, kilogram, second, litre).
''',
                '''Every unit belongs to a dimension and is defined by its size in the
dimension's base unit (metre, kilogram, second, litre, kelvin) and, for
temperature scales, by the offset of its zero point:
``base = value * factor + offset``.
'''),
        replace("unitconv/units.py",
                '''    factor: float  # size of one of this unit, in base units
''',
                '''    factor: float  # size of one of this unit, in base units
    offset: float = 0.0  # base-unit value of this unit's zero point

    def to_base(self, value):
        return value * self.factor + self.offset

    def from_base(self, value):
        return (value - self.offset) / self.factor
'''),
        replace("unitconv/units.py",
                '''def define(symbol, name, dimension, factor, plural=None, aliases=()):
    """Register a unit.  Symbols are case-sensitive; names and aliases are not."""
    unit = Unit(symbol, name, plural or name + "s", dimension, factor)
''',
                '''def define(symbol, name, dimension, factor, plural=None, aliases=(), offset=0.0):
    """Register a unit.  Symbols are case-sensitive; names and aliases are not."""
    unit = Unit(symbol, name, plural or name + "s", dimension, factor, offset)
'''),
        append("unitconv/units.py", r'''

            # temperature (base: kelvin); absolute temperatures, not differences
            define("K", "kelvin", "temperature", 1.0)
            define("C", "degree Celsius", "temperature", 1.0, plural="degrees Celsius",
                   aliases=("celsius", "degC", "°C"), offset=273.15)
            define("F", "degree Fahrenheit", "temperature", 5 / 9, plural="degrees Fahrenheit",
                   aliases=("fahrenheit", "degF", "°F"), offset=273.15 - 32 * 5 / 9)
            '''),
        replace("unitconv/converter.py",
                "from .errors import IncompatibleUnitsError\n",
                "from .errors import IncompatibleUnitsError, UnitError\n"),
        replace("unitconv/converter.py",
                "    return value * source.factor / target.factor\n",
                "    if source == target:\n        return value\n    return target.from_base(source.to_base(value))\n"),
        replace("unitconv/converter.py",
                '''    >>> conversion_factor("ft", "in")
    12.0
    """
    return convert(1.0, from_unit, to_unit)
''',
                '''    >>> conversion_factor("ft", "in")
    12.0

    Scales with different zero points (Celsius, Fahrenheit) are not
    proportional, so there is no single factor between them.
    """
    source, target = lookup(from_unit), lookup(to_unit)
    if source.offset or target.offset:
        raise UnitError(f"no conversion factor from {source.symbol} to {target.symbol}: "
                        "the scales have different zero points")
    return convert(1.0, source, target)
'''),
    ],
    test_changes=[
        replace("tests/test_convert.py",
                '    assert dimensions() == ["length", "mass", "time", "volume"]\n',
                '    assert dimensions() == ["length", "mass", "temperature", "time", "volume"]\n'),
        write("tests/test_temperature.py", D(r'''
            import pytest

            from unitconv import (
                IncompatibleUnitsError,
                Quantity,
                UnitError,
                UnknownUnitError,
                conversion_factor,
                convert,
                dimensions,
                parse_quantity,
            )


            @pytest.mark.parametrize(
                "value, src, dst, expected",
                [
                    (100, "C", "F", 212),
                    (32, "F", "C", 0),
                    (-40, "F", "C", -40),
                    (-40, "C", "F", -40),
                    (0, "C", "K", 273.15),
                    (0, "K", "C", -273.15),
                    (300, "K", "F", 80.33),
                    (451, "F", "K", 505.92778),
                    (37, "C", "C", 37),
                    (20, "K", "K", 20),
                ],
                ids=["boiling", "freezing", "minus-forty-f", "minus-forty-c", "c-to-k", "k-to-c",
                     "k-to-f", "f-to-k", "identity-c", "identity-k"],
            )
            def test_temperature_conversions(value, src, dst, expected):
                assert convert(value, src, dst) == pytest.approx(expected, abs=1e-3)


            @pytest.mark.parametrize(
                "name, symbol",
                [("celsius", "C"), ("Celsius", "C"), ("fahrenheit", "F"), ("Fahrenheit", "F"),
                 ("kelvin", "K"), ("KELVIN", "K")],
                ids=["celsius", "Celsius", "fahrenheit", "Fahrenheit", "kelvin", "KELVIN"],
            )
            def test_temperature_names(name, symbol):
                assert Quantity(10, name).unit == symbol


            def test_names_convert_like_symbols():
                assert convert(212, "fahrenheit", "celsius") == pytest.approx(100)


            def test_round_trip():
                for value in (-459.67, -10.5, 0, 98.6, 1000):
                    assert convert(convert(value, "F", "K"), "K", "F") == pytest.approx(value)
                    assert convert(convert(value, "C", "F"), "F", "C") == pytest.approx(value)


            def test_quantities():
                q = Quantity(25, "C").to("F")
                assert q.unit == "F" and q.value == pytest.approx(77)
                assert str(parse_quantity("98.6 F").to("C")) == "37 C"
                assert parse_quantity("-40 fahrenheit").to("C").value == pytest.approx(-40)


            def test_temperature_dimension():
                assert "temperature" in dimensions()


            @pytest.mark.parametrize("other", ["m", "kg", "s", "l"])
            def test_temperature_does_not_mix_with_other_dimensions(other):
                with pytest.raises(IncompatibleUnitsError):
                    convert(1, "C", other)
                with pytest.raises(IncompatibleUnitsError):
                    convert(1, other, "K")


            @pytest.mark.parametrize("src, dst", [("C", "F"), ("F", "C"), ("C", "K")], ids=["c-f", "f-c", "c-k"])
            def test_no_conversion_factor_between_offset_scales(src, dst):
                with pytest.raises(UnitError) as excinfo:
                    conversion_factor(src, dst)
                assert not isinstance(excinfo.value, UnknownUnitError)


            def test_lowercase_symbols_are_not_temperatures():
                with pytest.raises(UnknownUnitError):
                    convert(1, "c", "K")
            ''')),
    ],
    problem_statement=r'''
        Feature request: temperature units (Celsius, Fahrenheit, Kelvin)

        unitconv handles length, mass, time and volume, but not temperature, which
        is the conversion our users ask for most:

        ```python
        >>> from unitconv import convert
        >>> convert(100, "C", "F")
        unitconv.errors.UnknownUnitError: unknown unit: 'C'
        ```

        Please add a `temperature` dimension (it should show up in `dimensions()`)
        with:

        * symbols `C`, `F` and `K` (case-sensitive, like the other symbols), and
        * the names `celsius`, `fahrenheit` and `kelvin`, matched
          case-insensitively like the existing names (`Kilometres` etc.).

        These are absolute temperatures, so for example:

        ```python
        convert(100, "C", "F")    # 212
        convert(-40, "F", "C")    # -40
        convert(0, "C", "K")      # 273.15
        convert(300, "K", "F")    # 80.33
        ```

        (results may of course be floating-point approximations). Everything else
        should work as for other units: `Quantity(25, "celsius").to("F")` gives
        77 F, `parse_quantity("98.6 F")` works, and converting between a
        temperature and any other dimension raises `IncompatibleUnitsError`.

        `conversion_factor()` cannot give a meaningful answer between Celsius and
        Fahrenheit (or Celsius and Kelvin) because the scales have different zero
        points; for those it should raise a `UnitError` explaining that, rather
        than returning a misleading number (and it should not claim the unit is
        unknown).
        '''
)


# --------------------------------------------------------------- mdtable --

MDTABLE_CELLS = D(r'''
    """Turning Python values into Markdown table cell text."""


    def to_text(value):
        """Plain text for *value*: ``None`` is empty, floats use ``%g``, bools are yes/no."""
        if value is None:
            return ""
        if isinstance(value, bool):
            return "yes" if value else "no"
        if isinstance(value, float):
            return f"{value:g}"
        return str(value)


    def escape(text):
        """Make *text* safe inside a table cell."""
        return text.replace("|", "\\|")


    def cell_text(value):
        return escape(to_text(value))


    def pad(text, width):
        """Pad *text* with spaces on the right to *width* characters."""
        return text + " " * (width - len(text))
    ''')

MDTABLE_RENDER = D(r'''
    """Render rows as a GitHub-flavoured Markdown table."""

    from .cells import cell_text, pad

    MIN_WIDTH = 3


    def _normalise(rows, headers):
        headers = [cell_text(h) for h in headers]
        ncols = len(headers)
        table = []
        for number, row in enumerate(rows, start=1):
            cells = [cell_text(value) for value in row]
            if len(cells) > ncols:
                raise ValueError(f"row {number} has {len(cells)} cells but there are only {ncols} columns")
            table.append(cells + [""] * (ncols - len(cells)))
        return headers, table


    def column_widths(headers, rows):
        """Width of every column: its longest cell, but at least 3 (for ``---``)."""
        widths = [max(MIN_WIDTH, len(h)) for h in headers]
        for row in rows:
            for i, text in enumerate(row):
                widths[i] = max(widths[i], len(text))
        return widths


    def _line(cells):
        return "| " + " | ".join(cells) + " |"


    def render(rows, headers):
        """Return *rows* (sequences of values) as a Markdown table under *headers*.

        Short rows are filled with empty cells; long rows are an error.

        >>> print(render([["apple", 3]], headers=["fruit", "qty"]), end="")
        | fruit | qty |
        | ----- | --- |
        | apple | 3   |
        """
        if not headers:
            raise ValueError("a Markdown table needs at least one column")
        headers, rows = _normalise(rows, headers)
        widths = column_widths(headers, rows)
        lines = [_line([pad(h, w) for h, w in zip(headers, widths)])]
        lines.append(_line(["-" * w for w in widths]))
        for row in rows:
            lines.append(_line([pad(text, w) for text, w in zip(row, widths)]))
        return "\n".join(lines) + "\n"
    ''')

MDTABLE_RECORDS = D(r'''
    """Tables from lists of dicts."""

    from .render import render


    def collect_columns(records):
        """Every key used by *records*, in order of first appearance."""
        columns = []
        for record in records:
            for key in record:
                if key not in columns:
                    columns.append(key)
        return columns


    def render_dicts(records, columns=None):
        """Render dicts as a table; *columns* defaults to every key, in first-seen order.

        Missing keys give empty cells.
        """
        records = list(records)
        if columns is None:
            columns = collect_columns(records)
        rows = [[record.get(column) for column in columns] for record in records]
        return render(rows, headers=columns)
    ''')

MDTABLE_CSV = D(r'''
    """Tables from CSV text."""

    import csv
    import io

    from .render import render


    def render_csv(text, delimiter=","):
        """Render CSV *text* (first row = headers) as a Markdown table."""
        reader = csv.reader(io.StringIO(text), delimiter=delimiter)
        rows = [row for row in reader if row]
        if not rows:
            raise ValueError("empty CSV input")
        return render(rows[1:], headers=rows[0])
    ''')

MDTABLE_TEST_RENDER = D(r'''
    import pytest

    from mdtable import render


    def test_basic_table():
        assert render([["apple", 3], ["kiwi", 12]], headers=["fruit", "qty"]) == (
            "| fruit | qty |\n"
            "| ----- | --- |\n"
            "| apple | 3   |\n"
            "| kiwi  | 12  |\n"
        )


    def test_minimum_width_three():
        assert render([["x"]], headers=["a"]) == "| a   |\n| --- |\n| x   |\n"


    def test_wide_cell_sets_width():
        table = render([["a much longer value"]], headers=["h"])
        assert table.splitlines()[1] == "| ------------------- |"


    def test_value_formatting():
        table = render([[None, True, 0.5, 1e-7]], headers=["none", "bool", "float", "tiny"])
        assert table.splitlines()[2] == "|      | yes  | 0.5   | 1e-07 |"


    def test_short_rows_are_filled():
        assert render([["a"]], headers=["x", "y"]).splitlines()[2] == "| a   |     |"


    def test_long_rows_rejected():
        with pytest.raises(ValueError, match="row 2"):
            render([["a"], ["a", "b"]], headers=["x"])


    def test_no_headers_rejected():
        with pytest.raises(ValueError):
            render([], headers=[])


    def test_no_rows():
        assert render([], headers=["only"]) == "| only |\n| ---- |\n"
    ''')

MDTABLE_TEST_CELLS = D(r'''
    from mdtable.cells import cell_text, escape, pad, to_text


    def test_to_text():
        assert [to_text(v) for v in (None, False, 2.50, 7, "s")] == ["", "no", "2.5", "7", "s"]


    def test_escape_pipe():
        assert escape("a|b") == "a\\|b"


    def test_cell_text_escapes():
        assert cell_text("x | y") == "x \\| y"


    def test_pad():
        assert pad("ab", 5) == "ab   "
        assert pad("abcde", 5) == "abcde"


    def test_escaped_pipe_counts_towards_width():
        from mdtable import render

        assert render([["a|b"]], headers=["h"]).splitlines()[2] == "| a\\|b |"
    ''')

MDTABLE_TEST_RECORDS = D(r'''
    from mdtable import render_dicts


    def test_columns_in_first_seen_order():
        records = [{"name": "ada", "lang": "en"}, {"name": "linus", "country": "fi"}]
        assert render_dicts(records) == (
            "| name  | lang | country |\n"
            "| ----- | ---- | ------- |\n"
            "| ada   | en   |         |\n"
            "| linus |      | fi      |\n"
        )


    def test_explicit_columns():
        records = [{"a": 1, "b": 2, "c": 3}]
        assert render_dicts(records, columns=["c", "a"]).splitlines()[2] == "| 3   | 1   |"


    def test_generator_input():
        table = render_dicts({"n": i} for i in range(3))
        assert len(table.splitlines()) == 5
    ''')

MDTABLE_TEST_CSV = D(r'''
    import pytest

    from mdtable import render_csv


    def test_render_csv():
        text = 'city,population\nOslo,"709,037"\n\nBergen,291940\n'
        assert render_csv(text) == (
            "| city   | population |\n"
            "| ------ | ---------- |\n"
            "| Oslo   | 709,037    |\n"
            "| Bergen | 291940     |\n"
        )


    def test_render_csv_delimiter():
        assert render_csv("a;b\n1;2\n", delimiter=";").splitlines()[2] == "| 1   | 2   |"


    def test_empty_csv():
        with pytest.raises(ValueError):
            render_csv("\n\n")
    ''')

project(
    name="mdtable",
    number=35,
    start="2024-08-12T09:00:00",
    commits=[
        ("render(): Markdown tables from rows", [
            write(".gitignore", GITIGNORE),
            write("pyproject.toml", pyproject("mdtable", "0.7.0", "Render GitHub-flavoured Markdown tables")),
            write("README.md", D(r'''
                # mdtable

                Render GitHub-flavoured Markdown tables from Python data.

                ```python
                >>> import mdtable
                >>> print(mdtable.render([["apple", 3], ["kiwi", 12]], headers=["fruit", "qty"]))
                | fruit | qty |
                | ----- | --- |
                | apple | 3   |
                | kiwi  | 12  |
                ```

                Columns are padded to their widest cell (at least 3 characters). `None`
                renders as an empty cell, booleans as `yes`/`no`, floats with `%g`, and
                `|` inside a cell is escaped.

                Run the tests with `python -m pytest`.
                ''')),
            write("mdtable/__init__.py", D(r'''
                """mdtable: render Markdown tables."""

                from .render import column_widths, render

                __all__ = ["column_widths", "render"]
                ''')),
            write("mdtable/cells.py", MDTABLE_CELLS),
            write("mdtable/render.py", MDTABLE_RENDER),
            write("tests/test_render.py", MDTABLE_TEST_RENDER),
            write("tests/test_cells.py", MDTABLE_TEST_CELLS),
        ]),
        ("render_dicts(): tables from lists of records", [
            write("mdtable/records.py", MDTABLE_RECORDS),
            replace("mdtable/__init__.py", 'from .render import column_widths, render\n\n__all__ = ["column_widths", "render"]\n',
                    'from .records import render_dicts\nfrom .render import column_widths, render\n\n'
                    '__all__ = ["column_widths", "render", "render_dicts"]\n'),
            write("tests/test_records.py", MDTABLE_TEST_RECORDS),
        ]),
        ("render_csv(): tables from CSV text", [
            write("mdtable/csvsource.py", MDTABLE_CSV),
            replace("mdtable/__init__.py", 'from .records import render_dicts\n',
                    'from .csvsource import render_csv\nfrom .records import render_dicts\n'),
            replace("mdtable/__init__.py", '__all__ = ["column_widths", "render", "render_dicts"]\n',
                    '__all__ = ["column_widths", "render", "render_csv", "render_dicts"]\n'),
            write("tests/test_csvsource.py", MDTABLE_TEST_CSV),
        ]),
        ("Escape line breaks in cells as <br>", [
            replace("mdtable/cells.py", '    return text.replace("|", "\\\\|")\n',
                    '    text = text.replace("|", "\\\\|")\n    return text.replace("\\r\\n", "<br>").replace("\\n", "<br>")\n'),
            append("tests/test_cells.py", r'''


                def test_escape_newlines():
                    assert escape("one\ntwo\r\nthree") == "one<br>two<br>three"
                '''),
            replace("README.md", "`|` inside a cell is escaped.", "`|` and line breaks inside a cell are escaped."),
        ]),
    ],
    fix=[
        replace("mdtable/cells.py",
                '''"""Turning Python values into Markdown table cell text."""
''',
                '''"""Turning Python values into Markdown table cell text."""

ALIGNMENTS = ("left", "right", "center")
'''),
        replace("mdtable/cells.py",
                '''def pad(text, width):
    """Pad *text* with spaces on the right to *width* characters."""
    return text + " " * (width - len(text))
''',
                '''def pad(text, width, align=None):
    """Pad *text* with spaces to *width* characters.

    ``"right"`` pads on the left, ``"center"`` on both sides (the odd space
    goes on the right); anything else pads on the right.
    """
    space = width - len(text)
    if align == "right":
        return " " * space + text
    if align == "center":
        left = space // 2
        return " " * left + text + " " * (space - left)
    return text + " " * space
'''),
        replace("mdtable/render.py", "from .cells import cell_text, pad\n", "from .cells import ALIGNMENTS, cell_text, pad\n"),
        replace("mdtable/render.py",
                '''def _line(cells):
    return "| " + " | ".join(cells) + " |"


def render(rows, headers):
    """Return *rows* (sequences of values) as a Markdown table under *headers*.

    Short rows are filled with empty cells; long rows are an error.
''',
                '''def _line(cells):
    return "| " + " | ".join(cells) + " |"


def check_alignments(align, ncols):
    """Validate *align* (``None`` or one entry per column) and return a list."""
    if align is None:
        return [None] * ncols
    align = list(align)
    if len(align) != ncols:
        raise ValueError(f"align has {len(align)} entries but there are {ncols} columns")
    for entry in align:
        if entry is not None and entry not in ALIGNMENTS:
            raise ValueError(f"unknown alignment {entry!r}; use one of {', '.join(ALIGNMENTS)} or None")
    return align


def _rule(width, align):
    if align == "left":
        return ":" + "-" * (width - 1)
    if align == "right":
        return "-" * (width - 1) + ":"
    if align == "center":
        return ":" + "-" * (width - 2) + ":"
    return "-" * width


def render(rows, headers, align=None):
    """Return *rows* (sequences of values) as a Markdown table under *headers*.

    Short rows are filled with empty cells; long rows are an error.  *align*
    gives one of ``"left"``, ``"right"``, ``"center"`` or ``None`` (no
    marker, text on the left) per column.
'''),
        replace("mdtable/render.py",
                '''    headers, rows = _normalise(rows, headers)
    widths = column_widths(headers, rows)
    lines = [_line([pad(h, w) for h, w in zip(headers, widths)])]
    lines.append(_line(["-" * w for w in widths]))
    for row in rows:
        lines.append(_line([pad(text, w) for text, w in zip(row, widths)]))
''',
                '''    headers, rows = _normalise(rows, headers)
    align = check_alignments(align, len(headers))
    widths = column_widths(headers, rows)
    lines = [_line([pad(h, w, a) for h, w, a in zip(headers, widths, align)])]
    lines.append(_line([_rule(w, a) for w, a in zip(widths, align)]))
    for row in rows:
        lines.append(_line([pad(text, w, a) for text, w, a in zip(row, widths, align)]))
'''),
        replace("mdtable/records.py",
                '''def render_dicts(records, columns=None):
    """Render dicts as a table; *columns* defaults to every key, in first-seen order.

    Missing keys give empty cells.
    """
    records = list(records)
    if columns is None:
        columns = collect_columns(records)
    rows = [[record.get(column) for column in columns] for record in records]
    return render(rows, headers=columns)
''',
                '''def render_dicts(records, columns=None, align=None):
    """Render dicts as a table; *columns* defaults to every key, in first-seen order.

    Missing keys give empty cells.  *align* is either one entry per column (as
    for :func:`render`) or a dict ``{column: alignment}``; columns not in the
    dict get the default alignment.
    """
    records = list(records)
    if columns is None:
        columns = collect_columns(records)
    if isinstance(align, dict):
        unknown = [key for key in align if key not in columns]
        if unknown:
            raise ValueError(f"align names unknown columns: {unknown}")
        align = [align.get(column) for column in columns]
    rows = [[record.get(column) for column in columns] for record in records]
    return render(rows, headers=columns, align=align)
'''),
        replace("mdtable/csvsource.py",
                '''def render_csv(text, delimiter=","):
    """Render CSV *text* (first row = headers) as a Markdown table."""
''',
                '''def render_csv(text, delimiter=",", align=None):
    """Render CSV *text* (first row = headers) as a Markdown table."""
'''),
        replace("mdtable/csvsource.py", "    return render(rows[1:], headers=rows[0])\n",
                "    return render(rows[1:], headers=rows[0], align=align)\n"),
    ],
    test_changes=[
        write("tests/test_align.py", D(r'''
            import pytest

            from mdtable import render, render_csv, render_dicts


            def test_alignment_example():
                table = render(
                    [["apple", 3, 0.5], ["kiwi", 12, 0.25]],
                    headers=["fruit", "qty", "price"],
                    align=["left", "right", "center"],
                )
                assert table == (
                    "| fruit | qty | price |\n"
                    "| :---- | --: | :---: |\n"
                    "| apple |   3 |  0.5  |\n"
                    "| kiwi  |  12 | 0.25  |\n"
                )


            def test_none_keeps_default_column():
                table = render([["a", "b"]], headers=["left", "plain"], align=[None, "right"])
                assert table == (
                    "| left | plain |\n"
                    "| ---- | ----: |\n"
                    "| a    |     b |\n"
                )


            def test_all_none_same_as_no_align():
                rows = [["x", 1], ["yy", 22]]
                assert render(rows, headers=["a", "b"], align=[None, None]) == render(rows, headers=["a", "b"])


            def test_center_odd_space_goes_right():
                table = render([["1"], ["22"], ["4444"]], headers=["n"], align=("center",))
                assert table == (
                    "|  n   |\n"
                    "| :--: |\n"
                    "|  1   |\n"
                    "|  22  |\n"
                    "| 4444 |\n"
                )


            def test_minimum_width_markers():
                table = render([["x", "y", "z"]], headers=["a", "b", "c"], align=["left", "right", "center"])
                assert table.splitlines()[1] == "| :-- | --: | :-: |"
                assert table.splitlines()[2] == "| x   |   y |  z  |"


            def test_right_aligned_header_and_empty_cells():
                table = render([[None], [12345]], headers=["total"], align=["right"])
                assert table.splitlines() == ["| total |", "| ----: |", "|       |", "| 12345 |"]


            def test_alignment_with_escaped_pipe():
                table = render([["a|b"]], headers=["col"], align=["right"])
                assert table.splitlines()[2] == "| a\\|b |"
                assert table.splitlines()[1] == "| ---: |"


            @pytest.mark.parametrize(
                "align",
                [["left"], ["left", "right", "center"], ["left", "middle"], ["LEFT", None]],
                ids=["too-few", "too-many", "unknown", "wrong-case"],
            )
            def test_invalid_align(align):
                with pytest.raises(ValueError):
                    render([["a", "b"]], headers=["x", "y"], align=align)


            def test_render_dicts_with_sequence():
                records = [{"name": "ada", "score": 9.5}, {"name": "grace", "score": 10}]
                assert render_dicts(records, align=["left", "right"]) == (
                    "| name  | score |\n"
                    "| :---- | ----: |\n"
                    "| ada   |   9.5 |\n"
                    "| grace |    10 |\n"
                )


            def test_render_dicts_with_mapping():
                records = [{"name": "ada", "score": 9.5, "team": "x"}]
                table = render_dicts(records, align={"score": "center"})
                assert table.splitlines()[1] == "| ---- | :---: | ---- |"
                assert table.splitlines()[2] == "| ada  |  9.5  | x    |"


            def test_render_dicts_mapping_with_unknown_column():
                with pytest.raises(ValueError):
                    render_dicts([{"a": 1}], align={"b": "left"})


            def test_render_csv_align():
                table = render_csv("item,cost\ntea,3\ncake,12\n", align=["left", "right"])
                assert table.splitlines()[1:] == ["| :--- | ---: |", "| tea  |    3 |", "| cake |   12 |"]
            ''')),
    ],
    problem_statement=r'''
        Feature request: per-column alignment (`align=`) for tables

        Numeric columns are much easier to read right-aligned, and GitHub renders
        alignment markers in the separator row (`:---`, `---:`, `:---:`). Right now
        every column is left-padded with a plain `---` separator and there is no
        way to change that.

        Proposal: `render()` gets an optional `align` argument with one entry per
        column: `"left"`, `"right"`, `"center"` or `None` (`None` = exactly what we
        output today). The separator row gets the markers and the cells (header
        included) are padded to match, so the raw Markdown also lines up:

        ```python
        >>> import mdtable
        >>> print(mdtable.render(
        ...     [["apple", 3, 0.5], ["kiwi", 12, 0.25]],
        ...     headers=["fruit", "qty", "price"],
        ...     align=["left", "right", "center"],
        ... ), end="")
        | fruit | qty | price |
        | :---- | --: | :---: |
        | apple |   3 |  0.5  |
        | kiwi  |  12 | 0.25  |
        ```

        Details:

        * Column widths do not change (widest cell, minimum 3); the markers replace
          the first and/or last dash of the separator: left `:--`, right `--:`,
          center `:-:` at width 3.
        * For `"center"`, when the padding cannot be split evenly the extra space
          goes on the right (`" 0.5 "`, `"0.25 "` above).
        * A wrong number of entries, or any value other than the three strings
          (exact, lower-case) and `None`, raises `ValueError`.
        * `render_dicts()` and `render_csv()` accept the same `align` argument. For
          `render_dicts()` it may also be a dict mapping column names to
          alignments, e.g. `align={"score": "right"}`; columns not mentioned keep
          the default, and naming a column that is not in the table raises
          `ValueError`.
        '''
)


# -------------------------------------------------------------- retrykit --

RETRYKIT_BACKOFF_V1 = D(r'''
    """Delay strategies: callables mapping the number of the failed attempt
    (1-based) to the number of seconds to wait before the next one."""


    def constant(delay):
        """Always wait *delay* seconds."""

        def strategy(attempt):
            return delay

        return strategy


    def exponential(base=1.0, factor=2.0, max_delay=None):
        """Wait ``base``, ``base * factor``, ``base * factor**2``, ... seconds."""

        def strategy(attempt):
            delay = base * factor ** (attempt - 1)
            return delay if max_delay is None else min(delay, max_delay)

        return strategy
    ''')

RETRYKIT_BACKOFF_MORE = r'''


    def linear(start=1.0, step=1.0, max_delay=None):
        """Wait ``start``, ``start + step``, ``start + 2 * step``, ... seconds."""

        def strategy(attempt):
            delay = start + step * (attempt - 1)
            return delay if max_delay is None else min(delay, max_delay)

        return strategy


    def with_jitter(strategy, fraction=0.1, rng=None):
        """Randomise *strategy*'s delays by up to +/- *fraction* of each delay."""
        rng = rng or random.Random()

        def jittered(attempt):
            delay = strategy(attempt)
            return max(0.0, delay + rng.uniform(-fraction, fraction) * delay)

        return jittered
'''

RETRYKIT_CORE_V1 = D(r'''
    """Synchronous retrying."""

    import functools
    import time

    from .backoff import exponential
    from .errors import RetryError


    class Retrying:
        """Call a function until it succeeds or *attempts* calls have failed.

        Only exceptions matching *retry_on* are retried; anything else
        propagates at once.  Between two attempts it sleeps for
        ``backoff(attempt)`` seconds, where *attempt* is the number of the
        attempt that just failed.  When every attempt fails, :class:`RetryError`
        is raised from the last exception.
        """

        def __init__(self, attempts=3, backoff=None, retry_on=(Exception,), sleep=time.sleep):
            if attempts < 1:
                raise ValueError("attempts must be at least 1")
            self.attempts = attempts
            self.backoff = backoff or exponential()
            self.retry_on = retry_on
            self.sleep = sleep

        def call(self, fn, *args, **kwargs):
            last_exc = None
            for attempt in range(1, self.attempts + 1):
                if attempt > 1:
                    self.sleep(self.backoff(attempt - 1))
                try:
                    return fn(*args, **kwargs)
                except self.retry_on as exc:
                    last_exc = exc
            raise RetryError(self.attempts, last_exc) from last_exc

        def __call__(self, fn):
            @functools.wraps(fn)
            def wrapper(*args, **kwargs):
                return self.call(fn, *args, **kwargs)

            wrapper.retrying = self
            return wrapper


    def retry(attempts=3, backoff=None, retry_on=(Exception,), sleep=time.sleep):
        """Decorator form of :class:`Retrying`::

            @retry(attempts=5, retry_on=(ConnectionError,))
            def fetch(): ...
        """
        return Retrying(attempts, backoff, retry_on, sleep)
    ''')

RETRYKIT_CORE_V2 = D(r'''
    """Synchronous retrying."""

    import functools
    import time

    from .backoff import exponential
    from .errors import RetryError


    class Retrying:
        """Call a function until it succeeds or *attempts* calls have failed.

        Only exceptions matching *retry_on* are retried; anything else
        propagates at once.  Between two attempts the optional
        ``on_retry(attempt, exception, delay)`` hook is called and then
        ``sleep(delay)``, where ``delay = backoff(attempt)`` and *attempt* is
        the number of the attempt that just failed.  When every attempt fails,
        :class:`RetryError` is raised from the last exception.
        """

        def __init__(self, attempts=3, backoff=None, retry_on=(Exception,), on_retry=None, sleep=time.sleep):
            if attempts < 1:
                raise ValueError("attempts must be at least 1")
            self.attempts = attempts
            self.backoff = backoff or exponential()
            self.retry_on = retry_on
            self.on_retry = on_retry
            self.sleep = sleep

        def call(self, fn, *args, **kwargs):
            last_exc = None
            for attempt in range(1, self.attempts + 1):
                try:
                    return fn(*args, **kwargs)
                except self.retry_on as exc:
                    last_exc = exc
                    delay = self.backoff(attempt)
                    if self.on_retry is not None:
                        self.on_retry(attempt, exc, delay)
                    self.sleep(delay)
            raise RetryError(self.attempts, last_exc) from last_exc

        def __call__(self, fn):
            @functools.wraps(fn)
            def wrapper(*args, **kwargs):
                return self.call(fn, *args, **kwargs)

            wrapper.retrying = self
            return wrapper


    def retry(attempts=3, backoff=None, retry_on=(Exception,), on_retry=None, sleep=time.sleep):
        """Decorator form of :class:`Retrying`::

            @retry(attempts=5, retry_on=(ConnectionError,))
            def fetch(): ...
        """
        return Retrying(attempts, backoff, retry_on, on_retry, sleep)
    ''')

RETRYKIT_AIO = D(r'''
    """asyncio support: the same policy, awaiting the function and the sleep."""

    import asyncio
    import functools

    from .core import Retrying
    from .errors import RetryError


    class AsyncRetrying(Retrying):
        """:class:`~retrykit.core.Retrying` for coroutine functions."""

        def __init__(self, attempts=3, backoff=None, retry_on=(Exception,), on_retry=None, sleep=asyncio.sleep):
            super().__init__(attempts, backoff, retry_on, on_retry, sleep)

        async def call(self, fn, *args, **kwargs):
            last_exc = None
            for attempt in range(1, self.attempts + 1):
                try:
                    return await fn(*args, **kwargs)
                except self.retry_on as exc:
                    last_exc = exc
                    delay = self.backoff(attempt)
                    if self.on_retry is not None:
                        self.on_retry(attempt, exc, delay)
                    await self.sleep(delay)
            raise RetryError(self.attempts, last_exc) from last_exc

        def __call__(self, fn):
            @functools.wraps(fn)
            async def wrapper(*args, **kwargs):
                return await self.call(fn, *args, **kwargs)

            wrapper.retrying = self
            return wrapper


    def aretry(attempts=3, backoff=None, retry_on=(Exception,), on_retry=None, sleep=asyncio.sleep):
        """Decorator form of :class:`AsyncRetrying`."""
        return AsyncRetrying(attempts, backoff, retry_on, on_retry, sleep)
    ''')

RETRYKIT_TEST_CORE = D(r'''
    import pytest

    from retrykit import RetryError, Retrying, constant, exponential, retry


    class Flaky:
        """Fails *failures* times with *exc_type*, then returns "ok"."""

        def __init__(self, failures, exc_type=ConnectionError):
            self.failures = failures
            self.exc_type = exc_type
            self.calls = 0

        def __call__(self):
            self.calls += 1
            if self.calls <= self.failures:
                raise self.exc_type(f"failure {self.calls}")
            return "ok"


    def test_success_first_try_does_not_sleep():
        sleeps = []
        fn = Flaky(0)
        assert Retrying(sleep=sleeps.append).call(fn) == "ok"
        assert fn.calls == 1 and sleeps == []


    def test_success_after_failures():
        sleeps = []
        fn = Flaky(2)
        assert Retrying(attempts=3, backoff=exponential(base=1), sleep=sleeps.append).call(fn) == "ok"
        assert fn.calls == 3
        assert sleeps == [1, 2]


    def test_gives_up_after_attempts():
        fn = Flaky(10)
        with pytest.raises(RetryError) as excinfo:
            Retrying(attempts=4, sleep=lambda d: None).call(fn)
        assert fn.calls == 4
        assert excinfo.value.attempts == 4
        assert str(excinfo.value.last_exception) == "failure 4"
        assert excinfo.value.__cause__ is excinfo.value.last_exception


    def test_non_matching_exception_propagates():
        fn = Flaky(1, exc_type=KeyError)
        with pytest.raises(KeyError):
            Retrying(retry_on=(ConnectionError,), sleep=lambda d: None).call(fn)
        assert fn.calls == 1


    def test_decorator():
        sleeps = []
        fn = Flaky(1)

        @retry(attempts=2, backoff=constant(0.1), sleep=sleeps.append)
        def wrapped():
            """Docstring."""
            return fn()

        assert wrapped() == "ok"
        assert sleeps == [0.1]
        assert wrapped.__doc__ == "Docstring."
        assert wrapped.retrying.attempts == 2


    def test_attempts_validated():
        with pytest.raises(ValueError):
            Retrying(attempts=0)
    ''')

RETRYKIT_TEST_BACKOFF = D(r'''
    import random

    from retrykit import constant, exponential


    def test_constant():
        assert [constant(0.5)(n) for n in (1, 2, 3)] == [0.5, 0.5, 0.5]


    def test_exponential():
        strategy = exponential(base=0.5, factor=3)
        assert [strategy(n) for n in (1, 2, 3)] == [0.5, 1.5, 4.5]


    def test_exponential_cap():
        strategy = exponential(base=1, max_delay=5)
        assert [strategy(n) for n in range(1, 6)] == [1, 2, 4, 5, 5]
    ''')

RETRYKIT_TEST_BACKOFF_MORE = r'''


    def test_linear():
        assert [linear(start=1, step=2, max_delay=4)(n) for n in (1, 2, 3)] == [1, 3, 4]


    def test_jitter_stays_within_fraction():
        strategy = with_jitter(constant(10), fraction=0.2, rng=random.Random(7))
        delays = [strategy(n) for n in range(1, 50)]
        assert all(8 <= d <= 12 for d in delays)
        assert len(set(delays)) > 1
'''

RETRYKIT_TEST_HOOK = r'''


    def test_on_retry_hook_between_attempts():
        seen = []
        fn = Flaky(2)
        retrying = Retrying(
            attempts=3,
            backoff=constant(0.25),
            on_retry=lambda attempt, exc, delay: seen.append((attempt, str(exc), delay)),
            sleep=lambda d: None,
        )
        assert retrying.call(fn) == "ok"
        assert seen == [(1, "failure 1", 0.25), (2, "failure 2", 0.25)]
'''

RETRYKIT_TEST_AIO = D(r'''
    import asyncio

    import pytest

    from retrykit import AsyncRetrying, RetryError, aretry, exponential


    class AsyncFlaky:
        def __init__(self, failures):
            self.failures = failures
            self.calls = 0

        async def __call__(self):
            self.calls += 1
            if self.calls <= self.failures:
                raise TimeoutError(f"failure {self.calls}")
            return "ok"


    def recorder():
        sleeps = []

        async def sleep(delay):
            sleeps.append(delay)

        return sleeps, sleep


    def test_async_success_after_failures():
        sleeps, sleep = recorder()
        fn = AsyncFlaky(2)
        retrying = AsyncRetrying(attempts=3, backoff=exponential(base=1), sleep=sleep)
        assert asyncio.run(retrying.call(fn)) == "ok"
        assert sleeps == [1, 2]


    def test_async_decorator_gives_up():
        sleeps, sleep = recorder()
        fn = AsyncFlaky(5)

        @aretry(attempts=2, sleep=sleep)
        async def wrapped():
            return await fn()

        with pytest.raises(RetryError) as excinfo:
            asyncio.run(wrapped())
        assert fn.calls == 2
        assert isinstance(excinfo.value.last_exception, TimeoutError)


    def test_async_uses_asyncio_sleep_by_default():
        assert AsyncRetrying().sleep is asyncio.sleep
    ''')

project(
    name="retrykit",
    number=88,
    start="2024-09-02T15:10:00",
    commits=[
        ("Retrying/retry() with constant and exponential backoff", [
            write(".gitignore", GITIGNORE),
            write("pyproject.toml", pyproject("retrykit", "1.3.0", "Retry with backoff for sync and asyncio code")),
            write("README.md", D(r'''
                # retrykit

                Retry flaky calls with backoff.

                ```python
                from retrykit import retry, exponential

                @retry(attempts=5, backoff=exponential(base=0.5, max_delay=10), retry_on=(ConnectionError,))
                def fetch(url):
                    ...
                ```

                If every attempt fails, `RetryError` is raised (with `.attempts` and
                `.last_exception`). Pass `sleep=` to inject a fake clock in tests.

                Run the tests with `python -m pytest`.
                ''')),
            write("retrykit/__init__.py", D(r'''
                """retrykit: retry with backoff."""

                from .backoff import constant, exponential
                from .core import Retrying, retry
                from .errors import RetryError

                __all__ = ["RetryError", "Retrying", "constant", "exponential", "retry"]
                ''')),
            write("retrykit/errors.py", D(r'''
                class RetryError(Exception):
                    """Every attempt failed."""

                    def __init__(self, attempts, last_exception):
                        plural = "" if attempts == 1 else "s"
                        super().__init__(f"gave up after {attempts} attempt{plural}: {last_exception!r}")
                        self.attempts = attempts
                        self.last_exception = last_exception
                ''')),
            write("retrykit/backoff.py", RETRYKIT_BACKOFF_V1),
            write("retrykit/core.py", RETRYKIT_CORE_V1),
            write("tests/test_core.py", RETRYKIT_TEST_CORE),
            write("tests/test_backoff.py", RETRYKIT_TEST_BACKOFF),
        ]),
        ("Add linear backoff and with_jitter()", [
            replace("retrykit/backoff.py", '(1-based) to the number of seconds to wait before the next one."""\n',
                    '(1-based) to the number of seconds to wait before the next one."""\n\nimport random\n'),
            append("retrykit/backoff.py", RETRYKIT_BACKOFF_MORE),
            replace("retrykit/__init__.py", 'from .backoff import constant, exponential\n',
                    'from .backoff import constant, exponential, linear, with_jitter\n'),
            replace("retrykit/__init__.py", '__all__ = ["RetryError", "Retrying", "constant", "exponential", "retry"]\n',
                    '__all__ = ["RetryError", "Retrying", "constant", "exponential", "linear", "retry", "with_jitter"]\n'),
            replace("tests/test_backoff.py", "from retrykit import constant, exponential\n",
                    "from retrykit import constant, exponential, linear, with_jitter\n"),
            append("tests/test_backoff.py", RETRYKIT_TEST_BACKOFF_MORE),
        ]),
        ("Add on_retry hook (for logging/metrics) to Retrying and retry()", [
            write("retrykit/core.py", RETRYKIT_CORE_V2),
            append("tests/test_core.py", RETRYKIT_TEST_HOOK),
            append("README.md", r'''

                `on_retry(attempt, exception, delay)` is called before each wait, e.g. to
                log "attempt 2 failed, retrying in 4.0s".
                '''),
        ]),
        ("Add asyncio support: AsyncRetrying and aretry()", [
            write("retrykit/aio.py", RETRYKIT_AIO),
            replace("retrykit/__init__.py", 'from .backoff import constant, exponential, linear, with_jitter\n',
                    'from .aio import AsyncRetrying, aretry\nfrom .backoff import constant, exponential, linear, with_jitter\n'),
            replace("retrykit/__init__.py",
                    '__all__ = ["RetryError", "Retrying", "constant", "exponential", "linear", "retry", "with_jitter"]\n',
                    '__all__ = [\n    "AsyncRetrying",\n    "RetryError",\n    "Retrying",\n    "aretry",\n    "constant",\n'
                    '    "exponential",\n    "linear",\n    "retry",\n    "with_jitter",\n]\n'),
            write("tests/test_aio.py", RETRYKIT_TEST_AIO),
            append("README.md", r'''

                For coroutines use `@aretry(...)` / `AsyncRetrying`, which await
                `asyncio.sleep` between attempts.
                '''),
        ]),
    ],
    fix=[
        replace("retrykit/core.py",
                '''            except self.retry_on as exc:
                last_exc = exc
                delay = self.backoff(attempt)
''',
                '''            except self.retry_on as exc:
                last_exc = exc
                if attempt == self.attempts:
                    break
                delay = self.backoff(attempt)
'''),
        replace("retrykit/aio.py",
                '''            except self.retry_on as exc:
                last_exc = exc
                delay = self.backoff(attempt)
''',
                '''            except self.retry_on as exc:
                last_exc = exc
                if attempt == self.attempts:
                    break
                delay = self.backoff(attempt)
'''),
    ],
    test_changes=[
        append("tests/test_core.py", r'''


            @pytest.mark.parametrize("attempts", [1, 2, 3, 5])
            def test_no_sleep_after_final_attempt(attempts):
                sleeps = []
                fn = Flaky(100)

                @retry(attempts=attempts, backoff=exponential(base=1), sleep=sleeps.append)
                def always_fails():
                    return fn()

                with pytest.raises(RetryError) as excinfo:
                    always_fails()
                assert fn.calls == attempts
                assert sleeps == [2 ** i for i in range(attempts - 1)]
                assert excinfo.value.attempts == attempts


            def test_on_retry_not_called_after_final_attempt():
                seen = []
                sleeps = []
                retrying = Retrying(
                    attempts=3,
                    backoff=constant(0.5),
                    on_retry=lambda attempt, exc, delay: seen.append((attempt, str(exc), delay)),
                    sleep=sleeps.append,
                )
                with pytest.raises(RetryError):
                    retrying.call(Flaky(3))
                assert seen == [(1, "failure 1", 0.5), (2, "failure 2", 0.5)]
                assert sleeps == [0.5, 0.5]
            '''),
        append("tests/test_aio.py", r'''


            @pytest.mark.parametrize("attempts", [1, 3, 4])
            def test_async_no_sleep_after_final_attempt(attempts):
                sleeps, sleep = recorder()
                seen = []
                fn = AsyncFlaky(100)
                retrying = AsyncRetrying(
                    attempts=attempts,
                    backoff=exponential(base=1),
                    on_retry=lambda attempt, exc, delay: seen.append(attempt),
                    sleep=sleep,
                )
                with pytest.raises(RetryError):
                    asyncio.run(retrying.call(fn))
                assert fn.calls == attempts
                assert sleeps == [2 ** i for i in range(attempts - 1)]
                assert seen == list(range(1, attempts))
            '''),
    ],
    problem_statement=r'''
        retry() sleeps (and calls on_retry) once more after the final attempt

        Since upgrading to 1.3.0, a call that fails every attempt takes much longer
        to raise `RetryError` than it should: after the last attempt has failed,
        retrykit still waits a full backoff period (the longest one) before giving
        up. With `attempts=5` and the default exponential backoff that is an extra
        16 seconds of doing nothing.

        ```python
        from retrykit import retry, exponential

        sleeps = []

        @retry(attempts=3, backoff=exponential(base=1), sleep=sleeps.append,
               on_retry=lambda attempt, exc, delay: print(f"attempt {attempt} failed, retrying in {delay}s"))
        def always_fails():
            raise ConnectionError("down")

        try:
            always_fails()
        except Exception as exc:
            print(type(exc).__name__, sleeps)
        ```

        Actual output:

        ```
        attempt 1 failed, retrying in 1.0s
        attempt 2 failed, retrying in 2.0s
        attempt 3 failed, retrying in 4.0s
        RetryError [1.0, 2.0, 4.0]
        ```

        Expected: no wait and no `on_retry` call after the last attempt, i.e. two
        "retrying" lines and `RetryError [1.0, 2.0]`. There is no retry to wait
        for, and our "retrying in 4.0s" log line is misleading.

        The asyncio variant (`aretry` / `AsyncRetrying`) behaves the same way.
        '''
)


# ------------------------------------------------------------- globmatch --

GLOB_TRANSLATE_V1 = D(r'''
    """Translate glob patterns into regular expressions.

    Supported syntax:

    * ``*`` matches any run of characters except ``/``
    * ``?`` matches exactly one character except ``/``
    * ``[abc]``, ``[a-z]`` and ``[!abc]`` character classes (never match ``/``)
    """

    import re

    from .errors import PatternError


    def _char_class(pattern, start):
        """Translate the class opening at ``pattern[start] == "["``.

        Returns ``(regex, index after the closing bracket)``.
        """
        i = start + 1
        negate = i < len(pattern) and pattern[i] in "!^"
        if negate:
            i += 1
        end = pattern.find("]", i + 1 if i < len(pattern) and pattern[i] == "]" else i)
        if end == -1:
            raise PatternError(f"unterminated character class at position {start} in {pattern!r}")
        body = "".join("\\" + ch if ch in "\\^[]" else ch for ch in pattern[i:end])
        if negate:
            return f"[^/{body}]", end + 1
        return f"(?!/)[{body}]", end + 1


    def translate(pattern):
        """Return a regular expression (string) that matches whole paths."""
        parts = []
        i, n = 0, len(pattern)
        while i < n:
            ch = pattern[i]
            if ch == "*":
                while i < n and pattern[i] == "*":
                    i += 1
                parts.append("[^/]*")
                continue
            if ch == "?":
                parts.append("[^/]")
            elif ch == "[":
                regex, i = _char_class(pattern, i)
                parts.append(regex)
                continue
            else:
                parts.append(re.escape(ch))
            i += 1
        return "(?s:" + "".join(parts) + r")\Z"
    ''')

GLOB_DOUBLESTAR_DOC = '''* ``**`` as a whole path segment matches any number of directories:
  ``src/**/*.py``, ``**/build``, ``docs/**``
'''

GLOB_DOUBLESTAR_CODE_OLD = '''        if ch == "*":
            while i < n and pattern[i] == "*":
                i += 1
            parts.append("[^/]*")
            continue
'''

GLOB_DOUBLESTAR_CODE_NEW = '''        if ch == "*":
            segment_start = i == 0 or pattern[i - 1] == "/"
            if segment_start and pattern.startswith("**", i):
                after = i + 2
                if after == n:
                    # trailing "**": everything below this point
                    parts.append(".*")
                    i = after
                    continue
                if pattern[after] == "/":
                    # "**/": any number of directories
                    parts.append(".*/")
                    i = after + 1
                    continue
            # "*" (or "**" inside a segment, which means the same)
            while i < n and pattern[i] == "*":
                i += 1
            parts.append("[^/]*")
            continue
'''

GLOB_PATHUTIL = D(r'''
    """Path normalisation shared by the matcher."""


    def normalize(path):
        """Use forward slashes, collapse repeated slashes and drop leading ``./``."""
        path = path.replace("\\", "/")
        while "//" in path:
            path = path.replace("//", "/")
        while path.startswith("./"):
            path = path[2:]
        return path


    def basename(path):
        return normalize(path).rstrip("/").rsplit("/", 1)[-1]
    ''')

GLOB_MATCHER = D(r'''
    """Matching paths against glob patterns."""

    import functools
    import re

    from .pathutil import normalize
    from .translate import translate


    @functools.lru_cache(maxsize=256)
    def compile_pattern(pattern, case_sensitive=True):
        flags = 0 if case_sensitive else re.IGNORECASE
        return re.compile(translate(normalize(pattern)), flags)


    def match(pattern, path, case_sensitive=True):
        """Does the whole of *path* match the glob *pattern*?

        >>> match("src/*.py", "src/app.py")
        True
        >>> match("src/*.py", "src/pkg/app.py")
        False
        """
        return compile_pattern(pattern, case_sensitive).match(normalize(path)) is not None


    def filter_paths(paths, pattern, case_sensitive=True):
        """The *paths* that match *pattern*, in their original order."""
        regex = compile_pattern(pattern, case_sensitive)
        return [path for path in paths if regex.match(normalize(path))]


    def match_any(patterns, path, case_sensitive=True):
        return any(match(pattern, path, case_sensitive) for pattern in patterns)
    ''')

GLOB_IGNORE = D(r'''
    """.gitignore-style rule lists."""

    from .matcher import match
    from .pathutil import basename, normalize


    class IgnoreRules:
        """Decide whether paths are ignored by a list of glob rules.

        * blank lines and lines starting with ``#`` are skipped;
        * a rule without ``/`` matches the file name at any depth (``*.pyc``);
        * a rule with ``/`` matches the whole path (a leading ``/`` is dropped);
        * ``!rule`` re-includes paths matched by earlier rules; the last
          matching rule wins.
        """

        def __init__(self, lines=()):
            self.rules = []
            for line in lines:
                self.add(line)

        @classmethod
        def from_text(cls, text):
            return cls(text.splitlines())

        def add(self, line):
            line = line.strip()
            if not line or line.startswith("#"):
                return
            negate = line.startswith("!")
            if negate:
                line = line[1:]
            self.rules.append((negate, line.lstrip("/"), "/" in line))

        def ignored(self, path):
            path = normalize(path)
            result = False
            for negate, pattern, anchored in self.rules:
                target = path if anchored else basename(path)
                if match(pattern, target):
                    result = not negate
            return result

        def filter(self, paths):
            """The *paths* that are not ignored."""
            return [path for path in paths if not self.ignored(path)]
    ''')

GLOB_TEST_MATCH = D(r'''
    import pytest

    from globmatch import PatternError, filter_paths, match, translate


    @pytest.mark.parametrize(
        "pattern, path, expected",
        [
            ("*.py", "setup.py", True),
            ("*.py", "pkg/setup.py", False),
            ("src/*.py", "src/app.py", True),
            ("src/*.py", "src/pkg/app.py", False),
            ("?.txt", "a.txt", True),
            ("?.txt", "ab.txt", False),
            ("data/file?.csv", "data/file/.csv", False),
            ("*", "", True),
            ("a.b", "axb", False),
            ("(x)+", "(x)+", True),
        ],
        ids=["star", "star-no-slash", "dir-star", "dir-star-deeper", "question", "question-one",
             "question-no-slash", "empty", "dot-literal", "regex-chars"],
    )
    def test_match(pattern, path, expected):
        assert match(pattern, path) is expected


    @pytest.mark.parametrize(
        "pattern, path, expected",
        [
            ("[abc].txt", "b.txt", True),
            ("[abc].txt", "d.txt", False),
            ("[a-c]x", "cx", True),
            ("[!a-c]x", "dx", True),
            ("[!a-c]x", "ax", False),
            ("a[!x]b", "a/b", False),
            ("[]]", "]", True),
            ("[^x]", "y", True),
        ],
        ids=["class", "class-miss", "range", "negated", "negated-miss", "negated-no-slash",
             "bracket", "caret-negation"],
    )
    def test_character_classes(pattern, path, expected):
        assert match(pattern, path) is expected


    def test_unterminated_class():
        with pytest.raises(PatternError):
            translate("[abc")


    def test_case_insensitive():
        assert match("*.PY", "setup.py", case_sensitive=False)
        assert not match("*.PY", "setup.py")


    def test_paths_are_normalised():
        assert match("src/*.py", "./src//app.py")
        assert match("src/*.py", "src\\app.py")


    def test_filter_paths():
        assert filter_paths(["a.py", "b.txt", "c.py", "d/e.py"], "*.py") == ["a.py", "c.py"]
    ''')

GLOB_TEST_DOUBLESTAR = r'''


    @pytest.mark.parametrize(
        "pattern, path, expected",
        [
            ("src/**/*.py", "src/pkg/mod.py", True),
            ("src/**/*.py", "src/a/b/c/mod.py", True),
            ("src/**/*.py", "lib/pkg/mod.py", False),
            ("**/build", "x/y/build", True),
            ("docs/**", "docs/a/b.md", True),
            ("docs/**", "docsx/a.md", False),
            ("a**b", "axxb", True),
            ("a**b", "a/b", False),
        ],
        ids=["one-dir", "many-dirs", "other-root", "leading", "trailing", "trailing-prefix",
             "inside-segment", "inside-segment-no-slash"],
    )
    def test_double_star(pattern, path, expected):
        assert match(pattern, path) is expected
'''

GLOB_TEST_IGNORE = D(r'''
    from globmatch import IgnoreRules

    RULES = """
    # compiled files
    *.pyc
    build/*
    /dist/*.whl
    !build/keep.txt
    """


    def test_basename_rules_match_at_any_depth():
        rules = IgnoreRules.from_text(RULES)
        assert rules.ignored("mod.pyc")
        assert rules.ignored("pkg/sub/mod.pyc")
        assert not rules.ignored("mod.py")


    def test_anchored_rules():
        rules = IgnoreRules.from_text(RULES)
        assert rules.ignored("build/out.o")
        assert not rules.ignored("src/build/out.o")
        assert rules.ignored("dist/pkg-1.0-py3-none-any.whl")


    def test_negation_last_rule_wins():
        rules = IgnoreRules.from_text(RULES)
        assert not rules.ignored("build/keep.txt")


    def test_filter():
        rules = IgnoreRules(["*.log"])
        assert rules.filter(["a.log", "b.txt", "c/d.log"]) == ["b.txt"]
    ''')

project(
    name="globmatch",
    number=150,
    start="2024-10-07T12:00:00",
    commits=[
        ("Glob to regex translation: *, ? and character classes", [
            write(".gitignore", GITIGNORE),
            write("pyproject.toml", pyproject("globmatch", "0.8.2", "Path glob matching with ** support")),
            write("README.md", D(r'''
                # globmatch

                Match slash-separated paths against glob patterns.

                ```python
                from globmatch import match

                match("src/*.py", "src/app.py")        # True
                match("src/*.py", "src/pkg/app.py")    # False: * does not cross /
                ```

                Run the tests with `python -m pytest`.
                ''')),
            write("globmatch/__init__.py", D(r'''
                """globmatch: path glob matching."""

                from .errors import PatternError
                from .matcher import compile_pattern, filter_paths, match, match_any
                from .translate import translate

                __all__ = ["PatternError", "compile_pattern", "filter_paths", "match", "match_any", "translate"]
                ''')),
            write("globmatch/errors.py", D(r'''
                class PatternError(ValueError):
                    """The glob pattern is malformed."""
                ''')),
            write("globmatch/translate.py", GLOB_TRANSLATE_V1),
            write("globmatch/pathutil.py", GLOB_PATHUTIL),
            write("globmatch/matcher.py", GLOB_MATCHER),
            write("tests/test_match.py", GLOB_TEST_MATCH),
        ]),
        ("Support ** for matching across directories", [
            replace("globmatch/translate.py",
                    "* ``[abc]``, ``[a-z]`` and ``[!abc]`` character classes (never match ``/``)\n",
                    "* ``[abc]``, ``[a-z]`` and ``[!abc]`` character classes (never match ``/``)\n" + GLOB_DOUBLESTAR_DOC),
            replace("globmatch/translate.py", GLOB_DOUBLESTAR_CODE_OLD, GLOB_DOUBLESTAR_CODE_NEW),
            append("tests/test_match.py", GLOB_TEST_DOUBLESTAR),
            append("README.md", r'''

                `**` as a whole path segment matches across directories:
                `match("src/**/*.py", "src/a/b/mod.py")` is `True`.
                '''),
        ]),
        ("Add IgnoreRules for .gitignore-style rule lists", [
            write("globmatch/ignore.py", GLOB_IGNORE),
            replace("globmatch/__init__.py", "from .errors import PatternError\n",
                    "from .errors import PatternError\nfrom .ignore import IgnoreRules\n"),
            replace("globmatch/__init__.py",
                    '__all__ = ["PatternError", "compile_pattern", "filter_paths", "match", "match_any", "translate"]\n',
                    '__all__ = [\n    "IgnoreRules",\n    "PatternError",\n    "compile_pattern",\n    "filter_paths",\n'
                    '    "match",\n    "match_any",\n    "translate",\n]\n'),
            write("tests/test_ignore.py", GLOB_TEST_IGNORE),
        ]),
    ],
    fix=[
        replace("globmatch/translate.py",
                '''                    # "**/": any number of directories
                    parts.append(".*/")
''',
                '''                    # "**/": zero or more directories
                    parts.append("(?:.*/)?")
'''),
    ],
    test_changes=[
        append("tests/test_match.py", r'''


            @pytest.mark.parametrize(
                "pattern, path",
                [
                    ("**/*.py", "setup.py"),
                    ("**/*.py", "pkg/mod.py"),
                    ("**/*.py", "a/b/c/mod.py"),
                    ("src/**/*.c", "src/main.c"),
                    ("src/**/*.c", "src/lib/util.c"),
                    ("a/**/b", "a/b"),
                    ("a/**/b", "a/x/y/b"),
                    ("**/node_modules/**", "node_modules/left-pad/index.js"),
                    ("docs/**/index.md", "./docs/index.md"),
                    ("a/**/**/b", "a/b"),
                ],
                ids=["top-level", "one-dir", "deep", "zero-dirs-middle", "one-dir-middle", "bare-zero",
                     "bare-many", "leading-zero-with-trailing", "normalised-path", "repeated"],
            )
            def test_double_star_matches_zero_or_more_directories(pattern, path):
                assert match(pattern, path)


            @pytest.mark.parametrize(
                "pattern, path",
                [
                    ("**/*.py", "setup.pyc"),
                    ("**/*.py", "a/b.txt"),
                    ("a/**/b", "a/xb"),
                    ("a/**/b", "ab"),
                    ("a/**/b", "xa/b"),
                    ("src/**/*.c", "lib/src/main.c"),
                    ("src/**/*.c", "srcmain.c"),
                    ("**/test_*.py", "pkg/mytest_x.py"),
                ],
                ids=["suffix", "extension", "no-slash", "joined", "prefix", "wrong-root", "no-separator",
                     "name-prefix"],
            )
            def test_double_star_does_not_overmatch(pattern, path):
                assert not match(pattern, path)


            def test_filter_paths_with_double_star():
                paths = ["setup.py", "README.md", "pkg/__init__.py", "pkg/sub/mod.py", "tests/test_x.py", "pkg/data.json"]
                assert filter_paths(paths, "**/*.py") == ["setup.py", "pkg/__init__.py", "pkg/sub/mod.py", "tests/test_x.py"]
                assert filter_paths(paths, "pkg/**/*.py") == ["pkg/__init__.py", "pkg/sub/mod.py"]
            '''),
        append("tests/test_ignore.py", r'''


            def test_anchored_double_star_rule_matches_top_level():
                rules = IgnoreRules(["**/generated/*.py"])
                assert rules.ignored("generated/api.py")
                assert rules.ignored("src/generated/api.py")
                assert not rules.ignored("src/generated.py")
            '''),
    ],
    problem_statement=r'''
        `**/` does not match zero directories

        A `**` path segment is documented to match "any number of directories",
        but a pattern with `**/` never matches when there are no directories in
        that position:

        ```python
        >>> from globmatch import match
        >>> match("**/*.py", "pkg/mod.py")
        True
        >>> match("**/*.py", "setup.py")
        False
        >>> match("src/**/*.c", "src/main.c")
        False
        >>> match("a/**/b", "a/b")
        False
        ```

        Expected `True` for all of these, as in git, zsh and most other glob
        implementations: `src/**/*.c` should match `src/main.c` as well as
        `src/lib/util.c`. `filter_paths()` and `IgnoreRules` (e.g. a rule like
        `**/generated/*.py` should also catch `generated/api.py`) are affected the
        same way.

        Of course `**` must still only match whole directories: `a/**/b` should
        not match `a/xb` or `ab`, and `*` still must not cross `/`.
        '''
)


# --------------------------------------------------------------------------
# build
# --------------------------------------------------------------------------

def commit_date(spec: dict, index: int) -> str:
    start = _dt.datetime.fromisoformat(spec["start"])
    when = start + _dt.timedelta(days=2 * index, hours=3 * index, minutes=17 * index)
    return when.strftime("%Y-%m-%dT%H:%M:%S+0000")


def diff_paths(diff: str) -> list[str]:
    return re.findall(r"^diff --git a/(\S+) b/", diff, flags=re.M)


def is_test_path(path: str) -> bool:
    parts = path.split("/")
    name = parts[-1]
    return ("tests" in parts[:-1] or "test" in parts[:-1] or name == "conftest.py"
            or (name.startswith("test_") and name.endswith(".py")) or name.endswith("_test.py"))


def ops_diff(repo: Path, base: str, ops) -> str:
    apply_ops(repo, ops)
    git(repo, "add", "-A")
    diff = git(repo, "diff", "--cached", "--no-color", "--no-ext-diff", base).stdout
    git(repo, "reset", "-q", "--hard", base)
    git(repo, "clean", "-q", "-fdx")
    return diff


def build_project(spec: dict, work: Path, out: Path) -> dict:
    name = spec["name"]
    repo = work / name
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    if len(spec["commits"]) < 3:
        raise BuildError(f"{name}: needs at least 3 commits")
    for index, (message, ops) in enumerate(spec["commits"]):
        apply_ops(repo, ops)
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "--no-verify", "-m", D(message).strip() + "\n", date=commit_date(spec, index))
        if (repo / "tests").is_dir():
            rc, _, output = run_verify(repo, VERIFY)
            if rc != 0:
                raise BuildError(f"{name}: test suite fails at commit {index + 1} ({message.strip().splitlines()[0]!r}):\n{output}")
        git(repo, "clean", "-q", "-fdx")
    base = git(repo, "rev-parse", "HEAD").stdout.strip()

    test_patch = ops_diff(repo, base, spec["test_changes"])
    patch = ops_diff(repo, base, spec["fix"])
    for label, diff, want_tests in (("patch", patch, False), ("test_patch", test_patch, True)):
        paths = diff_paths(diff)
        if not paths:
            raise BuildError(f"{name}: {label} is empty")
        wrong = [p for p in paths if is_test_path(p) != want_tests or (want_tests and not p.startswith("tests/"))]
        if wrong:
            raise BuildError(f"{name}: {label} touches files it must not: {wrong}")

    bundle = out / REPOS_DIR / f"{name}.bundle"
    bundle.parent.mkdir(parents=True, exist_ok=True)
    git(repo, "-c", "pack.threads=1", "bundle", "create", "-q", str(bundle), "--all")

    # grade in a clone of the bundle
    clone = work / f"{name}-grade"
    git(work, "clone", "-q", str(bundle), str(clone))
    git(clone, "checkout", "-q", "--detach", base)
    git(clone, "apply", "-", input=test_patch)
    before, out_before, _ = run_grade(clone)
    git(clone, "apply", "-", input=patch)
    after, out_after, rc_after = run_grade(clone)
    if rc_after != 0 or any(status != "PASSED" for status in after.values()):
        raise BuildError(f"{name}: not every test passes with the gold patch:\n{out_after}")
    fail_to_pass = sorted(t for t in after if before.get(t) != "PASSED")
    pass_to_pass = sorted(t for t in after if before.get(t) == "PASSED")
    vanished = sorted(set(before) - set(after))
    if vanished:
        raise BuildError(f"{name}: tests disappear with the gold patch: {vanished}")
    for nodeid in after:
        if any(ch.isspace() for ch in nodeid):
            raise BuildError(f"{name}: node id with whitespace: {nodeid!r}")
    if not fail_to_pass:
        raise BuildError(f"{name}: FAIL_TO_PASS is empty:\n{out_before}")

    last_date = _dt.datetime.strptime(commit_date(spec, len(spec["commits"]) - 1), "%Y-%m-%dT%H:%M:%S%z")
    created = (last_date + _dt.timedelta(days=3, hours=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "instance_id": f"arena__{name}-{spec['number']}",
        "repo": f"arena/{name}",
        "base_commit": base,
        "source": {"bundle": f"{REPOS_DIR}/{name}.bundle"},
        "version": "1.0",
        "created_at": created,
        "problem_statement": D(spec["problem_statement"]).strip() + "\n",
        "hints_text": "",
        "patch": patch,
        "test_patch": test_patch,
        "FAIL_TO_PASS": fail_to_pass,
        "PASS_TO_PASS": pass_to_pass,
        "verify": VERIFY,
    }


# --------------------------------------------------------------------------
# self-check (also usable on its own with --check)
# --------------------------------------------------------------------------

REQUIRED = {
    "instance_id": str, "repo": str, "base_commit": str, "source": dict, "problem_statement": str,
    "patch": str, "test_patch": str, "verify": str, "FAIL_TO_PASS": list, "PASS_TO_PASS": list,
    "version": str, "created_at": str, "hints_text": str,
}


def check_suite(suite_dir: Path, verbose: bool = True) -> list[str]:
    """Check suite.jsonl and its bundles from fresh clones; return a list of problems."""
    problems: list[str] = []
    suite = suite_dir / SUITE_FILE
    if not suite.is_file():
        return [f"{suite} does not exist"]
    rows = []
    for lineno, line in enumerate(suite.read_text(encoding="utf-8").splitlines(), start=1):
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as exc:
            problems.append(f"{suite}:{lineno}: invalid JSON: {exc}")
    ids = [row.get("instance_id") for row in rows]
    if ids != sorted(ids) or len(set(ids)) != len(ids):
        problems.append("instance ids are not unique and sorted")
    for row in rows:
        iid = row.get("instance_id", "?")
        row_problems = [f"field {field!r} missing or not {kind.__name__}"
                        for field, kind in REQUIRED.items() if not isinstance(row.get(field), kind)]
        if not row_problems:
            if not INSTANCE_ID_RE.match(iid):
                row_problems.append("bad instance_id")
            if not re.fullmatch(r"[0-9a-f]{40}", row["base_commit"]):
                row_problems.append("base_commit is not a full sha")
            if not row["FAIL_TO_PASS"]:
                row_problems.append("FAIL_TO_PASS is empty")
            if not isinstance(row["source"].get("bundle"), str):
                row_problems.append("source.bundle missing")
            else:
                try:
                    row_problems.extend(check_row(suite_dir, row, verbose))
                except BuildError as exc:
                    row_problems.append(str(exc))
        problems.extend(f"{iid}: {p}" for p in row_problems)
    return problems


def check_row(suite_dir: Path, row: dict, verbose: bool) -> list[str]:
    problems = []
    bundle = (suite_dir / row["source"]["bundle"]).resolve()
    if not bundle.is_file():
        return [f"bundle {bundle} missing"]
    with tempfile.TemporaryDirectory(prefix="arena-check-") as tmp:
        tmp = Path(tmp)
        heads = git(tmp, "bundle", "list-heads", str(bundle)).stdout.split()
        refs = sorted(set(heads[1::2]))
        if refs not in (["refs/heads/main"], ["HEAD", "refs/heads/main"]):
            problems.append(f"bundle refs are {refs}, expected only main")
        repo = tmp / "repo"
        git(tmp, "clone", "-q", "--no-checkout", str(bundle), str(repo))
        tip = git(repo, "rev-parse", "refs/remotes/origin/main").stdout.strip()
        if tip != row["base_commit"]:
            return problems + [f"base_commit {row['base_commit']} is not the tip of main ({tip})"]
        git(repo, "checkout", "-q", "--detach", row["base_commit"])
        for label in ("patch", "test_patch"):
            proc = git(repo, "apply", "--check", "-", input=row[label], check=False)
            if proc.returncode != 0:
                problems.append(f"git apply --check {label} failed: {proc.stderr.strip()}")
        if any(is_test_path(p) for p in diff_paths(row["patch"])):
            problems.append("patch touches test files")
        if not all(p.startswith("tests/") for p in diff_paths(row["test_patch"])):
            problems.append("test_patch touches files outside tests/")
        if problems:
            return problems

        # (a) base + test_patch: verify must fail, FAIL_TO_PASS fail, PASS_TO_PASS pass
        git(repo, "apply", "-", input=row["test_patch"])
        rc, seconds_a, output = run_verify(repo, row["verify"])
        if rc == 0:
            problems.append("verify passes at base + test_patch (it must fail)")
        before, _, _ = run_grade(repo)
        still_ok = [t for t in row["FAIL_TO_PASS"] if before.get(t) == "PASSED"]
        if still_ok:
            problems.append(f"FAIL_TO_PASS tests already pass at base: {still_ok}")
        broken = [t for t in row["PASS_TO_PASS"] if before.get(t) != "PASSED"]
        if broken:
            problems.append(f"PASS_TO_PASS tests do not pass at base: {broken}")

        # (b) base + patch + test_patch: verify passes, every listed test passes
        git(repo, "reset", "-q", "--hard", row["base_commit"])
        git(repo, "clean", "-q", "-fdx")
        git(repo, "apply", "-", input=row["patch"])
        git(repo, "apply", "-", input=row["test_patch"])
        rc, seconds_b, output = run_verify(repo, row["verify"])
        if rc != 0:
            problems.append(f"verify fails with the gold patch:\n{output}")
        after, _, _ = run_grade(repo)
        missing = [t for t in row["FAIL_TO_PASS"] + row["PASS_TO_PASS"] if after.get(t) != "PASSED"]
        if missing:
            problems.append(f"listed tests do not pass with the gold patch: {missing}")
        unlisted = sorted(set(after) - set(row["FAIL_TO_PASS"]) - set(row["PASS_TO_PASS"]))
        if unlisted:
            problems.append(f"tests not listed in FAIL_TO_PASS/PASS_TO_PASS: {unlisted}")
        slowest = max(seconds_a, seconds_b)
        if slowest > VERIFY_MAX_SECONDS:
            problems.append(f"verify takes {slowest:.2f}s")
        if verbose:
            warn = "  (slow!)" if slowest > VERIFY_WARN_SECONDS else ""
            print(f"  ok {row['instance_id']:<28} F2P={len(row['FAIL_TO_PASS']):<3} "
                  f"P2P={len(row['PASS_TO_PASS']):<3} verify {seconds_a:.2f}s/{seconds_b:.2f}s{warn}")
    return problems


# --------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------

def build(target: Path) -> None:
    names = [spec["name"] for spec in PROJECTS]
    if len(set(names)) != len(names):
        raise BuildError("duplicate project names")
    with tempfile.TemporaryDirectory(prefix="arena-build-") as tmp:
        tmp = Path(tmp)
        work, out = tmp / "work", tmp / "out"
        work.mkdir()
        out.mkdir()
        rows = []
        for spec in PROJECTS:
            print(f"building {spec['name']} ...", flush=True)
            rows.append(build_project(spec, work, out))
        rows.sort(key=lambda row: row["instance_id"])
        with open(out / SUITE_FILE, "w", encoding="utf-8", newline="\n") as fh:
            for row in rows:
                fh.write(json.dumps(row, ensure_ascii=True) + "\n")
        print("checking the built suite from fresh clones ...", flush=True)
        problems = check_suite(out)
        if problems:
            raise BuildError("self-check failed:\n  - " + "\n  - ".join(problems))
        # install: replace suite.jsonl and our bundles, drop bundles of removed projects
        (target / REPOS_DIR).mkdir(parents=True, exist_ok=True)
        for old in (target / REPOS_DIR).glob("*.bundle"):
            if old.stem not in names:
                old.unlink()
        for name in names:
            shutil.copyfile(out / REPOS_DIR / f"{name}.bundle", target / REPOS_DIR / f"{name}.bundle")
        shutil.copyfile(out / SUITE_FILE, target / SUITE_FILE)
    print(f"wrote {len(rows)} instances to {target / SUITE_FILE}")
    for row in rows:
        print(f"  {row['instance_id']:<28} {row['base_commit']}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check the existing suite.jsonl and bundles")
    parser.add_argument("--out", type=Path, default=HERE, help="directory to write into (default: next to this script)")
    args = parser.parse_args(argv)
    try:
        if args.check:
            problems = check_suite(args.out)
            if problems:
                raise BuildError("check failed:\n  - " + "\n  - ".join(problems))
            print("suite OK")
        else:
            build(args.out)
    except BuildError as exc:
        print(f"build_suite: ERROR: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
