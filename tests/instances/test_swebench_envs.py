"""SWE-bench's shipped environment specs, the date they are resolved as of, and requirements from repo files."""

from __future__ import annotations

import hashlib
import io
import json
import os
import platform
import re
import subprocess
import sys
import threading
import tomllib
import zipfile
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from pytest_swe_arena.cell.venvs import find_interpreter, find_uv
from pytest_swe_arena.instances.swebench_specs import (
    SETUPTOOLS_EDITABLE_FLOOR,
    CondaNames,
    ShippedSpecsError,
    build_constraints,
    conda_requirement,
    git_commit_date,
    load_shipped_specs,
    override_requirements,
    requirements_from_environment_file,
    requirements_from_files,
    resolution_date,
    row_date,
    uv_config_text,
    uv_environment,
)

ROOT = Path(__file__).resolve().parents[2]
LITE_VERSIONS = Path(__file__).resolve().parents[1] / "data" / "swebench_lite_versions.json"


def utc(day: str) -> datetime:
    return datetime.fromisoformat(day).replace(tzinfo=UTC)


# --- the shipped specs ----------------------------------------------------------------------------------------


def test_shipped_specs_cover_every_repo_and_version_swe_bench_lite_uses():
    shipped = load_shipped_specs()
    pairs = [tuple(pair) for pair in json.loads(LITE_VERSIONS.read_text())["pairs"]]
    assert len(pairs) == 64
    missing = [pair for pair in pairs if shipped.get(*pair) is None]
    assert missing == []


def test_shipped_specs_keep_root_steps_out_and_say_why_a_spec_needs_conda():
    shipped = load_shipped_specs()
    assert len(shipped.specs) > 250
    for spec in shipped.specs.values():
        where = f"{spec.repo} {spec.version}"
        assert not any("apt-get" in step or "wget" in step for step in spec.env.get("pre_install", [])), where
        assert spec.conda_only is None or len(spec.conda_only) > 20, where
        assert spec.date_floor is not None, where
        install = spec.env.get("install", "")
        if spec.python and tuple(map(int, spec.python.split("."))) >= (3, 7) and "pip install" in install:
            assert "uv pip install" in install and "--no-use-pep517" not in install, where
        # Every editable uv install is path-based, as pip's `setup.py develop` made SWE-bench's (pylint's
        # checkers register their messages from their files' directory; a PEP 660 import hook hides them).
        for command in re.split(r"\|\||&&|;", install):
            if "uv pip install" in command and re.search(r"\s(-e|--editable)\s", command + " "):
                assert "-C editable_mode=compat" in command, where
    assert shipped.get("django/django", "3.0").eval_env["LANG"] == "en_US.UTF-8"
    assert any("locale-gen" in step for step in shipped.get("django/django", "3.0").system_steps)
    assert shipped.get("pallets/flask", "2.0").requirements_files == ("requirements/dev.txt",)
    assert shipped.get("pydata/xarray", "0.12").environment_files[0] == "ci/requirements/environment.yml"
    assert "Python 3.5" in (shipped.get("django/django", "2.2").conda_only or "")
    assert "scipy==1.5.2" in (shipped.get("scikit-learn/scikit-learn", "1.3").conda_only or "")
    assert shipped.conda.pypi_names["matplotlib-base"] == "matplotlib"
    assert shipped.get("pylint-dev/pylint", "2.15").env["install"] == (  # type: ignore[union-attr]
        "uv pip install -C editable_mode=compat -e . || "
        "uv pip install --no-build-isolation -C editable_mode=compat -e .")


def test_a_malformed_specs_file_names_the_table_and_what_is_accepted(tmp_path):
    bad = tmp_path / "specs.toml"
    bad.write_text('[specs."acme/shapes"."1.0"]\npython = "3.9"\ncolour = "red"\n')
    with pytest.raises(ShippedSpecsError, match=r'specs.toml: \[specs."acme/shapes"."1.0"\]: unknown key\(s\) colour; '
                                                r"expected some of conda_only, .*requirements_files"):
        load_shipped_specs(bad)
    bad.write_text('[specs."acme/shapes"."1.0"]\nrequirements = "numpy"\n')
    with pytest.raises(ShippedSpecsError, match=r"\[specs.\"acme/shapes\".\"1.0\"\]: field 'requirements'"):
        load_shipped_specs(bad)
    bad.write_text('[specs."acme/shapes"."1.0"]\ndate_floor = "last spring"\n')
    with pytest.raises(ShippedSpecsError, match=r"'last spring' is not a date; expected e.g. 2023-06-01T00:00:00Z"):
        load_shipped_specs(bad)
    bad.write_text('[specs.shapes]\npython = "3.9"\n')
    with pytest.raises(ShippedSpecsError, match=r'\[specs."shapes"\] must be a repo "owner/name"'):
        load_shipped_specs(bad)
    bad.write_text("[specs\n")
    with pytest.raises(ShippedSpecsError, match="cannot read TOML"):
        load_shipped_specs(bad)


# --- the date -------------------------------------------------------------------------------------------------


@pytest.fixture
def dated_repo(tmp_path) -> tuple[Path, str]:
    """A repository with one commit committed on 2021-05-03 (authored a year earlier)."""
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "setup.py").write_text("")
    env = {**os.environ, "GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@example.com", "GIT_COMMITTER_NAME": "c",
           "GIT_COMMITTER_EMAIL": "c@example.com", "GIT_AUTHOR_DATE": "2020-05-03T10:00:00+00:00",
           "GIT_COMMITTER_DATE": "2021-05-03T20:38:52-07:00"}
    subprocess.run(["git", "add", "."], cwd=repo, check=True)
    subprocess.run(["git", "commit", "-qm", "setup"], cwd=repo, env=env, check=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True,
                          check=True).stdout.strip()
    return repo / ".git", head


def test_a_row_is_dated_by_its_environment_setup_commit_else_created_at(dated_repo):
    git_dir, commit = dated_repo
    read = lambda sha: git_commit_date(git_dir, sha)  # noqa: E731
    row = {"environment_setup_commit": commit, "created_at": "2019-10-01T21:15:54Z"}
    assert row_date(row, read) == datetime(2021, 5, 4, 3, 38, 52, tzinfo=UTC)  # the committer's date, not the author's
    missing = {"environment_setup_commit": "0" * 40, "created_at": "2019-10-01T21:15:54Z"}
    assert row_date(missing, read) == datetime(2019, 10, 1, 21, 15, 54, tzinfo=UTC)
    assert row_date({"created_at": "2019-10-01 21:15:54"}, read) == datetime(2019, 10, 1, 21, 15, 54, tzinfo=UTC)
    assert row_date({"instance_id": "mine-1"}, read) is None


def test_the_resolution_date_is_raised_to_the_spec_floor_and_the_pythons_first_packages():
    old_row = utc("2014-03-15")
    assert resolution_date(old_row, "3.9") == utc("2021-01-01")  # setuptools of 2014 does not import on 3.9
    assert resolution_date(old_row, "3.9", utc("2023-07-01")) == utc("2023-07-01")  # pins of 2023
    assert resolution_date(utc("2024-02-02"), "3.9", utc("2023-07-01")) == utc("2024-02-02")
    assert resolution_date(utc("2024-02-02"), "2.7") == utc("2024-02-02")
    assert resolution_date(None, "3.9", utc("2023-07-01")) is None  # not a dated row: not resolved as of a date


def test_uv_config_takes_setuptools_from_its_first_editable_release_only_before_it(tmp_path):
    before = tomllib.loads(uv_config_text(utc("2022-04-20")))
    assert before == {"exclude-newer": "2022-04-20T00:00:00Z",
                      "exclude-newer-package": {"setuptools": "2022-09-01T00:00:00Z"}}
    after = tomllib.loads(uv_config_text(utc("2023-07-01")))
    assert after == {"exclude-newer": "2023-07-01T00:00:00Z"}
    config = tmp_path / "uv.toml"
    assert uv_environment(utc("2023-07-01"), config, "3.9.18") == {"UV_CONFIG_FILE": str(config),
                                                                   "UV_EXCLUDE_NEWER": "2023-07-01T00:00:00Z",
                                                                   "UV_COMPILE_BYTECODE": "1"}
    # uv's compile script needs Python 3.7's py_compile.PycInvalidationMode: on 3.6 every install failed.
    assert "UV_COMPILE_BYTECODE" not in uv_environment(utc("2021-06-01"), config, "3.6.15")


def test_uv_installs_into_a_python_3_6_environment_under_the_dated_variables(tmp_path):
    """astropy 1.3 and 2.0 run on Python 3.6: uv's bytecode compile (UV_COMPILE_BYTECODE) failed every install."""
    uv = find_uv()
    assert uv is not None, "the test extra installs uv"
    interpreter, version = find_interpreter("3.6")
    config = tmp_path / "uv.toml"
    config.write_text(uv_config_text(utc("2021-06-01")))
    (tmp_path / "demo-1.0-py3-none-any.whl").write_bytes(wheel("demo", "1.0"))
    env = {key: value for key, value in os.environ.items() if not key.startswith("UV_")}
    env.update(uv_environment(utc("2021-06-01"), config, version), UV_CACHE_DIR=str(tmp_path / "cache"))
    venv = tmp_path / "venv"
    subprocess.run([uv, "venv", "--quiet", "--python", str(interpreter), str(venv)], env=env, check=True, timeout=120)
    installed = subprocess.run([uv, "pip", "install", "--quiet", "--offline", "--python", str(venv / "bin" / "python"),
                                str(tmp_path / "demo-1.0-py3-none-any.whl")], capture_output=True, text=True,
                               env=env, timeout=120, check=False)
    assert installed.returncode == 0, installed.stderr


def wheel(name: str, version: str) -> bytes:
    buffer = io.BytesIO()
    info = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": f"VERSION = {version!r}\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    files[f"{info}/RECORD"] = "".join(f"{path},,\n" for path in files) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(buffer, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    return buffer.getvalue()


@pytest.fixture
def dated_index() -> Iterator[str]:
    """A PEP 691 index on 127.0.0.1 whose files have upload times: demo 1.0 (2020), 2.0 (2024); setuptools 60/65/70."""
    releases = {"demo": [("1.0", "2020-01-01T00:00:00Z"), ("2.0", "2024-01-01T00:00:00Z")],
                # What `uv venv --seed` installs (stand-ins: an environment built here never runs them).
                "pip": [("20.0", "2020-01-01T00:00:00Z")], "wheel": [("0.34.0", "2020-01-01T00:00:00Z")],
                "setuptools": [("60.0.0", "2022-01-01T00:00:00Z"), ("65.3.0", "2022-08-29T00:00:00Z"),
                               ("70.0.0", "2022-12-01T00:00:00Z")]}
    wheels = {f"{name}-{version}-py3-none-any.whl": wheel(name, version)
              for name, versions in releases.items() for version, _ in versions}

    class Index(BaseHTTPRequestHandler):
        def do_HEAD(self) -> None:  # noqa: N802 (http.server's names)
            self.answer(send_body=False)

        def do_GET(self) -> None:  # noqa: N802
            self.answer(send_body=True)

        def answer(self, send_body: bool) -> None:
            parts = [part for part in self.path.split("/") if part]
            if len(parts) == 2 and parts[0] == "simple" and parts[1] in releases:
                files = [{"filename": f"{parts[1]}-{version}-py3-none-any.whl",
                          "url": f"/files/{parts[1]}-{version}-py3-none-any.whl",
                          "hashes": {"sha256": hashlib.sha256(
                              wheels[f"{parts[1]}-{version}-py3-none-any.whl"]).hexdigest()},
                          "upload-time": uploaded} for version, uploaded in releases[parts[1]]]
                body = json.dumps({"meta": {"api-version": "1.1"}, "name": parts[1], "files": files,
                                   "versions": [version for version, _ in releases[parts[1]]]}).encode()
                kind = "application/vnd.pypi.simple.v1+json"
            elif len(parts) == 2 and parts[0] == "files" and parts[1] in wheels:
                body, kind = wheels[parts[1]], "application/octet-stream"
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if send_body:
                self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Index)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/simple"
    finally:
        server.shutdown()
        server.server_close()


def compiled(tmp_path: Path, index: str, as_of: datetime, requirement: str) -> str:
    """What ``uv pip compile`` picks for ``requirement`` under the config and variables for ``as_of``."""
    uv = find_uv()
    assert uv is not None, "the test extra installs uv"
    config = tmp_path / f"uv-{as_of:%Y%m%d}.toml"
    config.write_text(uv_config_text(as_of))
    (tmp_path / "requirements.in").write_text(requirement + "\n")
    env = {key: value for key, value in os.environ.items() if not key.startswith("UV_")}
    env.update(uv_environment(as_of, config, platform.python_version()), UV_CACHE_DIR=str(tmp_path / "cache"))
    completed = subprocess.run([uv, "pip", "compile", "--quiet", "--no-header", "--index-url", index, "--python",
                                sys.executable, str(tmp_path / "requirements.in")], capture_output=True, text=True,
                               env=env, cwd=tmp_path, timeout=300, check=False)
    assert completed.returncode == 0, completed.stderr
    return next(line for line in completed.stdout.splitlines() if line.startswith(requirement.split("=")[0] + "=="))


def test_uv_resolves_as_of_the_date_the_config_says(tmp_path, dated_index):
    assert compiled(tmp_path, dated_index, utc("2021-06-01"), "demo") == "demo==1.0"
    assert compiled(tmp_path, dated_index, utc("2025-06-01"), "demo") == "demo==2.0"


def test_uv_takes_setuptools_with_editable_builds_before_their_date_and_as_of_the_date_after(tmp_path, dated_index):
    assert utc("2022-04-20") < SETUPTOOLS_EDITABLE_FLOOR < utc("2022-12-01")
    assert compiled(tmp_path, dated_index, utc("2022-04-20"), "setuptools") == "setuptools==65.3.0"
    assert compiled(tmp_path, dated_index, utc("2023-01-01"), "setuptools") == "setuptools==70.0.0"
    assert compiled(tmp_path, dated_index, utc("2022-10-01"), "setuptools") == "setuptools==65.3.0"


# --- requirements from the repository ------------------------------------------------------------------------


def test_requirement_files_are_read_as_swe_bench_reads_them():
    files = {
        "requirements_test.txt": "-r requirements_test_min.txt\ncoverage~=6.2\n# a comment\n"
                                 "types-pkg_resources==0.1.3\n--index-url https://example.invalid\n",
        "requirements_test_min.txt": "-e .[testutil]\nastroid==2.11.3  # pinned for tests\n-r sub/more.txt\n",
        "sub/more.txt": "-r ../requirements_test_min.txt\npytest~=7.0\n.[test]\n",
    }
    found = requirements_from_files(files.get, ["missing.txt", "requirements_test.txt"])
    assert found == ("astroid==2.11.3", "pytest~=7.0", "coverage~=6.2", "types-setuptools")
    assert requirements_from_files(files.get, ["missing.txt"]) is None


def test_environment_files_become_pip_requirements_and_say_what_pypi_cannot_give():
    text = """
name: xarray-tests
channels: [conda-forge, nodefaults]
dependencies:
  - python=3.10
  - cdms2
  - conda-forge::numpy>=1.17   # numpy
  - matplotlib-base
  - pandas=1.3
  - scipy 1.7.*
  - dask=2021.04.0=pyhd8ed1ab_0
  - pip
  - pip:
    - numbagg
"""
    conda = CondaNames(pypi_names={"matplotlib-base": "matplotlib"}, not_on_pypi={"cdms2": "conda-forge only"})
    found = requirements_from_environment_file(text, conda)
    assert found.requirements == ("numpy>=1.17", "matplotlib", "pandas==1.3.*", "scipy==1.7.*", "dask==2021.04.0.*",
                                  "numbagg")
    assert found.dropped == {"cdms2": "conda-forge only"}
    with pytest.raises(ValueError, match="no 'dependencies' list"):
        requirements_from_environment_file("name: x\n", conda)


def test_conda_packages_and_pins_translate_to_pip_requirements():
    assert conda_requirement("'numpy==1.19.2'".strip("'")) == "numpy==1.19.2"
    assert conda_requirement("pandas<2.0.0") == "pandas<2.0.0"
    assert conda_requirement("setuptools=38") == "setuptools==38.*"
    assert override_requirements(["setuptools", "Werkzeug==2.3.7", "pytest<8", "mpmath; python_version<'4'"]) == (
        "Werkzeug==2.3.7", "pytest<8")
    assert build_constraints(["setuptools==38.2.4", "wheel==0.40.0", "numpy==1.16.0"]) == (
        "setuptools==40.8.0", "wheel==0.40.0")
    assert build_constraints(["setuptools==68.0.0", "setuptools"]) == ("setuptools==68.0.0",)


# --- the converter --------------------------------------------------------------------------------------------

FAKE_SPECS = '''
TEST_PYTEST = "pytest -rA"
SPECS_DEMO = {
    k: {
        "python": "3.9",
        "packages": "requirements.txt",
        "install": "python -m pip install -v --no-use-pep517 --no-build-isolation -e .",
        "pre_install": ["apt-get update && apt-get install -y graphviz", "sed -i 's/a/b/' setup.py"],
        "pip_packages": ["setuptools==70.0.0", "Werkzeug==2.3.7"],
        "eval_commands": ["export LANG=en_US.UTF-8", "locale-gen"],
        "test_cmd": TEST_PYTEST,
    }
    for k in ["1.0", "1.1"]
}
SPECS_DEMO["1.1"]["install"] = "python -m pip install -e .[test]"
SPECS_OLD = {"0.1": {"python": "3.6", "packages": "numpy 'scipy==1.5.2'", "pip_packages": ["scipy==1.5.2", "cython"],
                     "install": "python -m pip install -e ."}}
MAP_REPO_VERSION_TO_SPECS_PY = {"acme/demo": SPECS_DEMO, "acme/old": SPECS_OLD,
                                "swe-bench/humaneval": {"1.0": {"python": "3.9"}}}
MAP_REPO_TO_REQS_PATHS = {"acme/demo": ["requirements/dev.txt"]}
MAP_REPO_TO_ENV_YML_PATHS = {}
'''


def test_the_converter_translates_swe_bench_specs_to_the_shipped_format(tmp_path):
    swebench = tmp_path / "SWE-bench"
    constants = swebench / "swebench" / "harness" / "constants"
    constants.mkdir(parents=True)
    (constants / "python.py").write_text(FAKE_SPECS)
    subprocess.run(["git", "init", "-q", str(swebench)], check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-C", str(swebench), "add", "."],
                   check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-C", str(swebench), "commit",
                    "-qm", "specs"], check=True)
    out = tmp_path / "specs.toml"
    completed = subprocess.run([sys.executable, str(ROOT / "bench" / "swebench_specs.py"), "--swebench", str(swebench),
                                "--rev", "HEAD", "--out", str(out), "--no-resolve"], capture_output=True, text=True,
                               check=False)
    assert completed.returncode == 0, completed.stderr
    assert "| acme/demo | 2 | 2 | 2 | 0 |" in completed.stdout
    shipped = load_shipped_specs(out)
    assert sorted(shipped.specs) == [("acme/demo", "1.0"), ("acme/demo", "1.1"), ("acme/old", "0.1")]
    demo = shipped.get("acme/demo", "1.1")
    assert demo is not None
    assert dict(demo.env) == {"python": "3.9", "requirements": ["setuptools==70.0.0", "Werkzeug==2.3.7"],
                              "pre_install": ["sed -i 's/a/b/' setup.py"],
                              "install": "uv pip install -C editable_mode=compat -e .[test] || "
                                         "uv pip install --no-build-isolation -C editable_mode=compat -e .[test]"}
    assert demo.requirements_files == ("requirements/dev.txt",)
    assert demo.system_steps == ("apt-get update && apt-get install -y graphviz", "locale-gen")
    assert dict(demo.eval_env) == {"LANG": "en_US.UTF-8"}
    assert demo.swebench_test_cmd == "pytest -rA"
    assert shipped.get("acme/demo", "1.0").env["install"] == (
        "uv pip install -C editable_mode=compat -v --no-build-isolation -e .")
    old = shipped.get("acme/old", "0.1")
    assert old is not None
    assert old.env["requirements"] == ["numpy", "scipy==1.5.2", "cython"]
    assert old.env["install"] == "python -m pip install -e ."  # Python 3.6: pip's legacy editable install
