"""Reading instance files: JSON Lines or a JSON array, each row validated against the instance schema.

Every problem is an ``InstanceFileError`` naming the file, the line and the field
(see ``model``). An instance file is the user's input: a line that is not JSON is
an error here, never skipped.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
from collections.abc import Callable, Iterator, Mapping, Set
from dataclasses import replace
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from ..files import decode_json_lines
from .formats import convert, is_task_file, read_task_dir, task_digest, task_origins
from .model import Instance, InstanceFileError, Source
from .selection import selection_marks


@lru_cache(maxsize=1)
def _validator() -> Any:
    """The instance schema's validator, compiled once per process (``_validator.cache_clear()`` forgets it)."""
    import jsonschema

    schema = json.loads(
        resources.files("pytest_swe_arena").joinpath("schemas/instance.schema.json").read_text()
    )
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@lru_cache(maxsize=1)
def _schema_key() -> str:
    """The schema's content key: a file checked under one schema is not known to pass another."""
    schema = resources.files("pytest_swe_arena").joinpath("schemas/instance.schema.json").read_bytes()
    return hashlib.sha256(schema).hexdigest()[:16]


class SchemaMemo:
    """Instance files known to pass the schema, by content: one empty marker per file sha256 under the cache.

    Validating is most of collecting a large instance file (jsonschema, about a millisecond a row), and a
    sweep's files rarely change between runs (a resume, ``-k``, ``--collect-only``): a file whose bytes
    passed once is not validated again, by any process on this cache, until its bytes or the schema change.
    The checks beyond the schema (duplicates, test ids, sources) run every time. Before it starts its
    workers, the controller checks the sweep's files (``check``), so the workers on its host, which share
    its cache, find them known; a worker on another host checks them once in its own.
    """

    def __init__(self, cache: Path):
        self.folder = cache / "schema-checked" / _schema_key()

    def known(self, digest: str) -> bool:
        return (self.folder / digest).exists()

    def remember(self, digest: str) -> None:
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            (self.folder / digest).touch()
        except OSError:
            pass  # a read-only cache only costs the next collection its validation

    def check(self, path: Path) -> None:
        """Validate ``path``'s rows against the schema unless its bytes are known, and remember them if all pass.

        A file that cannot be read or parsed, or has a row that fails, is left unknown: whoever collects it
        reports its error.
        """
        try:
            digest, rows = read_instance_file(path)
            if not self.known(digest) and all(isinstance(row, dict) and _schema_error(path, line, convert(
                    path, line, row).row) is None for line, row in rows):  # parsed only when not known
                self.remember(digest)
        except InstanceFileError:
            return


def instance_schema() -> dict[str, Any]:
    """The instance JSON Schema (``schemas/instance.schema.json``)."""
    schema: dict[str, Any] = _validator().schema
    return schema


def read_instance_file(path: Path) -> tuple[str, Iterator[tuple[int, Any]]]:
    """The sha256 of a JSONL or JSON array file's bytes, and its ``(line, object)`` rows parsed from those
    bytes as they are iterated (a row that is not JSON raises ``InstanceFileError`` then).

    A SWE-bench 5 task's ``task.yaml`` stands for its directory: the digest of the files read, and its one row.
    """
    if is_task_file(path):
        try:
            return task_digest(path), read_task_dir(path)
        except OSError as error:
            raise InstanceFileError(path, None, f"cannot read: {error}") from None
    try:
        data = path.read_bytes()
    except OSError as error:
        raise InstanceFileError(path, None, f"cannot read: {error}") from None
    return hashlib.sha256(data).hexdigest(), _rows_of(path, data)


def read_rows(path: Path) -> list[tuple[int, Any]]:
    """``(line, object)`` for each row of a JSONL file or a JSON array file."""
    return list(read_instance_file(path)[1])


def _rows_of(path: Path, data: bytes) -> Iterator[tuple[int, Any]]:
    if path.suffix == ".jsonl":
        yield from decode_json_lines(path, io.BytesIO(data), on_bad_line=_not_a_row)  # a line at a time
        return
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InstanceFileError(path, None, f"cannot read: {error}") from None
    yield from _read_json_array(path, text)


def _not_a_row(path: Path, number: int, error: ValueError) -> None:
    if isinstance(error, json.JSONDecodeError):
        raise InstanceFileError(path, number, f"not valid JSON ({error.msg} at column {error.colno}); "
                                "each line must be one JSON object")
    raise InstanceFileError(path, number, f"cannot read: {error}")


def _read_json_array(path: Path, text: str) -> Iterator[tuple[int, Any]]:
    decoder = json.JSONDecoder()

    def line_of(offset: int) -> int:
        return text.count("\n", 0, offset) + 1

    def fail(error: json.JSONDecodeError) -> InstanceFileError:
        return InstanceFileError(path, error.lineno, f"not valid JSON ({error.msg} at column {error.colno})")

    position = _skip_space(text, 0)
    if position < len(text) and text[position] == "{":
        try:
            value, _ = decoder.raw_decode(text, position)
        except json.JSONDecodeError as error:
            raise fail(error) from None
        yield line_of(position), value
        return
    if position >= len(text) or text[position] != "[":
        raise InstanceFileError(path, line_of(position), "expected a JSON array of instance objects")
    position = _skip_space(text, position + 1)
    if position < len(text) and text[position] == "]":
        return
    while True:
        try:
            value, end = decoder.raw_decode(text, position)
        except json.JSONDecodeError as error:
            raise fail(error) from None
        yield line_of(position), value
        position = _skip_space(text, end)
        if position < len(text) and text[position] == ",":
            position = _skip_space(text, position + 1)
            continue
        if position < len(text) and text[position] == "]":
            if text[position + 1 :].strip():
                raise InstanceFileError(path, line_of(position + 1), "unexpected text after the JSON array")
            return
        raise InstanceFileError(path, line_of(position), "expected ',' or ']' in the JSON array")


def _skip_space(text: str, position: int) -> int:
    while position < len(text) and text[position] in " \t\r\n":
        position += 1
    return position


def _test_list(path: Path, line: int, row: Mapping[str, Any], key: str) -> tuple[str, ...]:
    value = row.get(key)
    if value is None:
        return ()
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else []
        except json.JSONDecodeError:
            raise InstanceFileError(
                path, line, "a string here must be a JSON-encoded list of test ids", key
            ) from None
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise InstanceFileError(path, line, "the JSON-encoded value must be a list of strings", key)
    return tuple(value)


#: Whether a row has a runner of its repository's own (``grading.runners.has_repo_runner``, handed in by
#: collection: instances never import grading); raises a ``ValueError`` with a ``field`` for a bad choice.
RunnerCheck = Callable[[Mapping[str, Any]], bool]


def _has_repo_runner(path: Path, line: int, row: Mapping[str, Any], check: RunnerCheck | None) -> bool:
    """Whether the row has a runner of its own (SWE-bench's for its repo, its ``eval_script`` / ``log_parser``)."""
    if check is None:
        return False
    try:
        return check(row)
    except ValueError as error:
        raise InstanceFileError(path, line, str(error), getattr(error, "field", None)) from None


def _check_per_test_ids(path: Path, line: int, fail_to_pass: tuple[str, ...], pass_to_pass: tuple[str, ...],
                        test_cmd: str | None, repo_runner: bool = False) -> None:
    """Reject per-test rows that could never be graded: no FAIL_TO_PASS, or ids the default runner never reports.

    A row with SWE-bench's runner (Django's ``test_x (module.Class)``, sympy's ``test_x``) is read by that
    runner's parser, so its ids need not be pytest node ids.
    """
    if not fail_to_pass:
        raise InstanceFileError(
            path, line, "is empty and the row has no 'verify': any patch would resolve; give at least one "
            "test id, or a 'verify' command", "FAIL_TO_PASS")
    if test_cmd is not None or repo_runner:
        return
    for key, ids in (("FAIL_TO_PASS", fail_to_pass), ("PASS_TO_PASS", pass_to_pass)):
        bare = next((test_id for test_id in ids if "::" not in test_id), None)
        if bare is not None:
            raise InstanceFileError(
                path, line, f"{bare!r} is not a pytest node id ('path/to/test_file.py::name'), the only form the "
                "default pytest runner reports, so it could never match (even the gold patch would be "
                "unresolved); give a 'verify' command, or a 'test_cmd' whose report names tests this way", key)


def _schema_error(path: Path, line: int, row: Any) -> InstanceFileError | None:
    import jsonschema

    errors = list(_validator().iter_errors(row))
    if not errors:
        return None
    error = jsonschema.exceptions.best_match(errors)
    if error.validator == "anyOf" and not error.absolute_path:
        return InstanceFileError(path, line, "needs a 'verify' command or a 'FAIL_TO_PASS' list", "verify")
    if error.validator == "required":
        missing = error.message.split("'")[1]
        return InstanceFileError(path, line, "is required but missing", missing)
    field_path = ".".join(str(part) for part in error.absolute_path) or None
    top = str(error.absolute_path[0]) if error.absolute_path else None
    described = instance_schema()["properties"].get(top, {}).get("description") if top else None
    accepted = f"; expected {described}" if described else ""
    if error.validator == "not":
        message = f"{error.instance!r} is not allowed"
    else:
        message = error.message
    return InstanceFileError(path, line, f"{message}{accepted}", field_path)


#: The kind of ``Source`` of a row whose repository is not under --arena-repos; its location says so.
MISSING = "missing"


def resolve_source(path: Path, line: int, row: Mapping[str, Any], repos_dir: Path | None,
                   resolved: dict[tuple[str, str], Source] | None = None) -> Source:
    """Turn the row's ``source`` (or its ``repo`` under ``repos_dir``) into an absolute location.

    :param resolved: the sources already resolved for this file's rows, by (kind, location) or
        ("repo", repo): rows of one file mostly share a source, and resolving a path is a walk of it.
    """
    source = row.get("source")
    kind, location = next(iter(source.items())) if source else ("repo", str(row["repo"]))
    if resolved is not None and (kind, location) in resolved:
        return resolved[(kind, location)]
    found = _resolve_source(path, line, row, repos_dir)
    if resolved is not None:
        resolved[(kind, location)] = found
    return found


def _resolve_source(path: Path, line: int, row: Mapping[str, Any], repos_dir: Path | None) -> Source:
    source = row.get("source")
    if source:
        kind, location = next(iter(source.items()))
        if kind == "bundle":
            bundle = (path.parent / location).resolve()
            if not bundle.is_file():
                raise InstanceFileError(path, line, f"bundle {location!r} not found at {bundle}", "source.bundle")
            return Source("bundle", str(bundle))
        if kind == "git":
            if "://" in location or re.match(r"^[\w.-]+@[\w.-]+:", location):
                return Source("git", location)
            repo_path = (path.parent / location).resolve()
            if not repo_path.exists():
                raise InstanceFileError(path, line, f"repository {location!r} not found at {repo_path}", "source.git")
            return Source("git", str(repo_path))
        return Source(kind, location)
    repo = str(row["repo"])
    image = row.get("image") if isinstance(row.get("image"), str) and row["image"] else None
    if repos_dir is None and image:
        return Source("image", image)
    if repos_dir is None:
        raise InstanceFileError(
            path, line, "has no 'source', so the repository is looked up by 'repo' under "
            "--arena-repos DIR; give --arena-repos or a 'source'", "repo",
        )
    owner, name = repo.split("/", 1)
    candidates = [repos_dir / f"{owner}__{name}", repos_dir / owner / name]
    candidates += [c.with_name(c.name + ".git") for c in list(candidates)]
    for candidate in candidates:
        if candidate.exists():
            return Source("git", str(candidate.resolve()))
    if image:
        return Source("image", image)  # a SWE-bench 5 row's image holds the checkout in /testbed
    # Not an error yet: a row that -k or -m deselects needs no mirror. A selected one is a usage error
    # after selection (``worker.collection.check_sources``), which names this.
    looked = ", ".join(str(c) for c in candidates[:2])
    return Source(MISSING, f"repository {repo!r} is not under --arena-repos (looked for {looked}); make its "
                           f"mirror with `swe-arena mirror --arena-repos {repos_dir} https://github.com/{repo}` "
                           "(or a local clone's path instead of the URL)")


def missing_repositories_error(missing: Mapping[str, str]) -> str:
    """The usage error for selected rows whose repositories are missing: ``missing`` maps each
    ``MISSING`` source's text to the first ``file:line`` whose row needs it."""
    lines = [f"{where}: {message}" for message, where in missing.items()]
    return "\n".join([f"{len(lines)} selected repository(ies) missing (deselect their rows with -k or -m, "
                      "or make their mirrors):", *lines])


def missing_repositories(path: Path, instance_ids: Set[str], repos_dir: Path | None) -> dict[str, str]:
    """The repositories the rows of ``path`` named in ``instance_ids`` need and --arena-repos lacks (as
    ``missing_repositories_error`` takes them): the controller's check under xdist, whose workers collect."""
    missing: dict[str, str] = {}
    if repos_dir is None:
        return missing
    try:
        for line, row in read_instance_file(path)[1]:
            if isinstance(row, dict) and row.get("instance_id") in instance_ids and not row.get("source") \
                    and isinstance(row.get("repo"), str) and "/" in row["repo"]:
                source = _resolve_source(path, line, row, repos_dir)
                if source.kind == MISSING:
                    missing.setdefault(source.location, f"{path}:{line}")
    except InstanceFileError:
        pass  # the workers' collection reports it
    return missing


def build_instance(path: Path, line: int, row: Any, repos_dir: Path | None,
                   runner_check: RunnerCheck | None = None, *, schema_checked: bool = False,
                   resolved: dict[tuple[str, str], Source] | None = None) -> Instance:
    """Validate one row and build its ``Instance``; raise ``InstanceFileError`` if it is bad.

    :param runner_check: says whether the row has a runner of its repository's own, whose ids need not be
        pytest node ids (without it, only the harness's pytest runner is known).
    :param schema_checked: the row is known to pass the schema (its file's bytes are known to
        ``SchemaMemo``): only the checks beyond the schema run.
    """
    if not isinstance(row, dict):
        raise InstanceFileError(path, line, f"expected a JSON object, got {type(row).__name__}")
    converted = convert(path, line, row)
    if is_task_file(path):
        converted = replace(converted, origins={**task_origins(path), **converted.origins})
    try:
        return _build_instance(path, line, converted.row, repos_dir, runner_check, schema_checked, resolved)
    except InstanceFileError as error:
        raise converted.located(error) from None


def _build_instance(path: Path, line: int, row: dict[str, Any], repos_dir: Path | None,
                    runner_check: RunnerCheck | None, schema_checked: bool,
                    resolved: dict[tuple[str, str], Source] | None) -> Instance:
    error = None if schema_checked else _schema_error(path, line, row)
    if error:
        raise error
    env = row.get("env")
    fail_to_pass = _test_list(path, line, row, "FAIL_TO_PASS")
    pass_to_pass = _test_list(path, line, row, "PASS_TO_PASS")
    if not row.get("verify"):
        _check_per_test_ids(path, line, fail_to_pass, pass_to_pass, row.get("test_cmd"),
                            _has_repo_runner(path, line, row, runner_check))
    return Instance(
        instance_id=row["instance_id"],
        repo=row["repo"],
        base_commit=row["base_commit"],
        problem_statement=row["problem_statement"],
        source=resolve_source(path, line, row, repos_dir, resolved),
        patch=row.get("patch") or None,
        test_patch=row.get("test_patch") or None,
        verify=row.get("verify"),
        test_cmd=row.get("test_cmd"),
        fail_to_pass=fail_to_pass,
        pass_to_pass=pass_to_pass,
        env=dict(env) if env else None,
        marks=tuple(dict.fromkeys([*(row.get("marks") or ()), *selection_marks(row)])),
        row=row,
        path=path,
        line=line,
    )


def load_instances(path: Path, rows: list[tuple[int, Any]], repos_dir: Path | None,
                   runner_check: RunnerCheck | None = None, *, schema_checked: bool = False) -> list[Instance]:
    """Validate rows from one file, reject duplicates, and return them sorted by id."""
    seen: dict[str, int] = {}
    resolved: dict[tuple[str, str], Source] = {}
    instances = []
    for line, row in rows:
        instance = build_instance(path, line, row, repos_dir, runner_check, schema_checked=schema_checked,
                                  resolved=resolved)
        first = seen.setdefault(instance.instance_id, line)
        if first != line:
            raise InstanceFileError(
                path, line, f"duplicate {instance.instance_id!r} (first defined on line {first})", "instance_id"
            )
        instances.append(instance)
    return sorted(instances, key=lambda i: i.instance_id)
