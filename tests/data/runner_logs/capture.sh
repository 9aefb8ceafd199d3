#!/usr/bin/env bash
# Capture the corpus's logs by running the real runners (not part of the test suite: it needs the
# repositories, PyPI, and minutes). Usage:
#   tests/data/runner_logs/capture.sh MIRRORS_DIR SWE_BENCH_LITE_JSON [WORK_DIR]
# MIRRORS_DIR holds bare clones named owner+name/repo (sympy, sphinx, pytest); the JSON is the
# SWE-bench Lite test split. Each log is written beside this script and its runner's exit status printed
# (the "returncode" of its JSON companion, whose cases are written by hand); then run
# swebench_reference.py to record SWE-bench's answers in the JSON files.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
mirrors="$1"; lite="$2"; work="${3:-$(mktemp -d)}"
mkdir -p "$work"
echo "working in $work"

run() {  # run NAME DIR COMMAND...: the command's output (stdout and stderr) is the log
    local name="$1" dir="$2"; shift 2
    local status=0
    (cd "$dir" && "$@") >"$here/$name.log" 2>&1 || status=$?
    echo "$name: exit $status"
}

checkout() {  # checkout INSTANCE_ID DIR: the repo at base_commit with test_patch applied; patch saved as DIR.patch
    python3 - "$lite" "$1" "$2" "$mirrors" <<'EOF'
import json, subprocess, sys
from pathlib import Path
lite, instance_id, target, mirrors = sys.argv[1:]
row = next(row for row in json.load(open(lite)) if row["instance_id"] == instance_id)
mirror = Path(mirrors) / row["repo"].replace("/", "+") / "repo"
Path(target).mkdir(parents=True)
archive = subprocess.run(["git", "-C", str(mirror), "archive", row["base_commit"]], check=True, capture_output=True)
subprocess.run(["tar", "-x", "-C", target], input=archive.stdout, check=True)
for command in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "-c", "user.name=corpus", "-c", "user.email=corpus@localhost", "commit", "-qm", "base"]):
    subprocess.run(command, cwd=target, check=True)
subprocess.run(["git", "apply", "-"], cwd=target, input=row["test_patch"].encode(), check=True)
Path(target + ".patch").write_text(row["patch"])
EOF
}

# --- Django: the real django package, a small project, the runner SWE-bench's runtests.py is built on.
python3 -m venv "$work/venv-django" && "$work/venv-django/bin/pip" install -q django
cp -r "$here/sources/django_project" "$work/django_project"
run django-runner "$work/django_project" env PYTHONPATH=. "$work/venv-django/bin/python" -m django test \
    --settings=settings --verbosity 2 --parallel 1 shop

# --- pytest -rA on a small project, in the forms SWE-bench's pytest commands take.
python3 -m venv "$work/venv-pytest" && "$work/venv-pytest/bin/pip" install -q pytest
cp -r "$here/sources/pytest_project" "$work/pytest_project"
run pytest-rA "$work/pytest_project" "$work/venv-pytest/bin/pytest" -rA -p no:cacheprovider tests/test_statuses.py
run pytest-classic-vv "$work/pytest_project" "$work/venv-pytest/bin/pytest" -rA -vv -o console_output_style=classic \
    --tb=no -p no:cacheprovider tests/test_statuses.py
printf 'import module_that_does_not_exist  # noqa: F401\n\n\ndef test_never_collected():\n    pass\n' \
    >"$work/pytest_project/tests/test_broken_import.py"
run pytest-collection-error "$work/pytest_project" "$work/venv-pytest/bin/pytest" -rA -p no:cacheprovider \
    tests/test_statuses.py tests/test_broken_import.py
cp -r "$here/sources/exit_status_project" "$work/exit_status_project"
run pytest-exit-status "$work/exit_status_project" "$work/venv-pytest/bin/pytest" -rA -p no:cacheprovider tests/test_ok.py

# An eval script as SWE-bench 5 writes them (markers, test_patch applied in a heredoc, the exit status kept).
project="$work/eval_project"
cp -r "$here/sources/pytest_project" "$project"
(cd "$project" && git init -q && git add -A \
    && git -c user.name=corpus -c user.email=corpus@localhost commit -qm "base: PASSED tests/test_statuses.py::test_fails")
base="$(git -C "$project" rev-parse HEAD)"
cat >"$work/eval.sh" <<EOF
#!/bin/bash
set -uxo pipefail
cd $project
git status
echo 'PASSED tests/test_statuses.py::test_only_printed'  # outside the markers: not test output
git show
git checkout $base tests/test_statuses.py tests/test_added.py
git apply -v - <<'EOF_114329324912'
diff --git a/tests/test_added.py b/tests/test_added.py
new file mode 100644
--- /dev/null
+++ b/tests/test_added.py
@@ -0,0 +1,2 @@
+def test_added_by_the_test_patch():
+    assert True
EOF_114329324912
: '>>>>> Start Test Output'
$work/venv-pytest/bin/pytest -rA -p no:cacheprovider tests/test_statuses.py tests/test_added.py
SWEBENCH_TEST_EXIT_CODE=\$?
: '>>>>> End Test Output'
echo ">>>>> Test Exit Code: \$SWEBENCH_TEST_EXIT_CODE"
git checkout $base tests/test_statuses.py tests/test_added.py
EOF
run pytest-eval-script "$project" bash "$work/eval.sh"

# --- pytest-dev/pytest itself (SWE-bench Lite pytest-dev__pytest-11143), without and with the gold patch.
checkout pytest-dev__pytest-11143 "$work/pytest-11143"
python3 -m venv "$work/venv-pytest-11143"
SETUPTOOLS_SCM_PRETEND_VERSION=8.0.0.dev0 "$work/venv-pytest-11143/bin/pip" install -q -e "$work/pytest-11143"
run pytest-11143-nogold "$work/pytest-11143" "$work/venv-pytest-11143/bin/pytest" -rA testing/test_assertrewrite.py
git -C "$work/pytest-11143" apply "$work/pytest-11143.patch"
run pytest-11143-gold "$work/pytest-11143" "$work/venv-pytest-11143/bin/pytest" -rA testing/test_assertrewrite.py

# --- sphinx through tox (sphinx-doc__sphinx-11445), as SWE-bench's environment sets it up.
checkout sphinx-doc__sphinx-11445 "$work/sphinx-11445"
sed -i 's/pytest/pytest -rA/' "$work/sphinx-11445/tox.ini"
python3 -m venv "$work/venv-sphinx"
"$work/venv-sphinx/bin/pip" install -q "tox==4.16.0" "tox-current-env==0.0.11" -e "$work/sphinx-11445[test]"
# tox-current-env links .tox/py39/bin/python to the running interpreter; through a venv's symlink that
# resolves to the base Python (SWE-bench's conda env has no such link). A wrapper keeps the venv.
mkdir -p "$work/sphinx-11445/.tox/py39/bin"
for name in python python3 python3.11; do
    printf '#!/bin/sh\nexec %s "$@"\n' "$work/venv-sphinx/bin/python" >"$work/sphinx-11445/.tox/py39/bin/$name"
    chmod +x "$work/sphinx-11445/.tox/py39/bin/$name"
done
run sphinx-11445-nogold "$work/sphinx-11445" env PATH="$work/venv-sphinx/bin:$PATH" tox --current-env -epy39 -v -- \
    tests/test_util_rst.py
git -C "$work/sphinx-11445" apply "$work/sphinx-11445.patch"
run sphinx-11445-gold "$work/sphinx-11445" env PATH="$work/venv-sphinx/bin:$PATH" tox --current-env -epy39 -v -- \
    tests/test_util_rst.py

# --- sympy's bin/test (sympy__sympy-23262 and -24213), without and with the gold patch.
python3 -m venv "$work/venv-sympy" && "$work/venv-sympy/bin/pip" install -q mpmath==1.3.0
sympy_test() {  # sympy_test NAME DIR FILES...
    local name="$1" dir="$2"; shift 2
    run "$name" "$dir" env PATH="$work/venv-sympy/bin:$PATH" \
        PYTHONWARNINGS='ignore::UserWarning,ignore::SyntaxWarning' bin/test -C --verbose "$@"
}
checkout sympy__sympy-23262 "$work/sympy-23262"
sympy_test sympy-23262-nogold "$work/sympy-23262" sympy/utilities/tests/test_lambdify.py
git -C "$work/sympy-23262" apply "$work/sympy-23262.patch"
sympy_test sympy-23262-gold "$work/sympy-23262" sympy/utilities/tests/test_lambdify.py
checkout sympy__sympy-24213 "$work/sympy-24213"
sympy_test sympy-24213-nogold "$work/sympy-24213" sympy/physics/units/tests/test_quantities.py
git -C "$work/sympy-24213" apply "$work/sympy-24213.patch"
sympy_test sympy-24213-gold "$work/sympy-24213" sympy/physics/units/tests/test_quantities.py
# Results Lite's files rarely show (xpass, slow, skips, output before a result), from a file of our own.
cp "$here/sources/sympy/test_arena_statuses.py" "$work/sympy-24213/sympy/physics/units/tests/"
sympy_test sympy-statuses "$work/sympy-24213" sympy/physics/units/tests/test_arena_statuses.py \
    sympy/physics/units/tests/test_prefixes.py
