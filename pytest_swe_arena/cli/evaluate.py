"""``swe-arena evaluate``: SWE-bench's ``run_evaluation``, drop-in, without Docker.

The flags are SWE-bench's, spelled as SWE-bench spells them; its Docker-only flags are accepted and
said to be unused. The evaluation is a sweep like any other: pytest runs the plugin over the selected
rows with one ``replay`` arm (SWE-bench's apply chain, ``arms/replay.py``) on ``--max_workers`` xdist
workers, so the ledger, the viewer and ``swe-arena compare`` come with it. Then SWE-bench's outputs
are written from the ledger (``results/swebench.py``): the per-instance tree under
``./logs/run_evaluation/<run_id>/<model>/`` and the run report in ``--report_dir``.

The sweep's own files live in ``./logs/run_evaluation/<run_id>/swe-arena/``: the rows it ran
(``instances.jsonl``), its configuration (``pyproject.toml``) and its out dir (``out/``). Running the
same ``--run_id`` again resumes (``--arena-resume``): finished instances are kept, as SWE-bench skips
instances whose report exists.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from ..instances.loading import read_rows, resolve_source
from ..instances.model import InstanceFileError
from ..instances.predictions import GOLD, PREDICTION_FORMS, PredictionsError, load_predictions
from ..ledger.reader import latest_run_rows, read_ledger
from ..naming import ARM_NAME, LEDGER_NAME, REFERENCE_ARMS
from ..results.swebench import RUN_EVALUATION_LOG_DIR, Evaluation, is_empty, write_logs, write_run_report

#: SWE-bench's flags that only mean something to its Docker (or Modal) harness: accepted, unused.
DOCKER_ONLY = ("--cache_level", "--clean", "--namespace", "--instance_image_tag", "--env_image_tag",
               "--force_rebuild", "--open_file_limit", "--modal")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-d", "--dataset_name", default="SWE-bench/SWE-bench_Lite",
                        help="a local .json or .jsonl of SWE-bench rows, or a dataset name on the hub (read "
                             "through the `datasets` library where the hub can be reached)")
    parser.add_argument("-s", "--split", default="test", help="the split of a hub dataset (a file is read whole)")
    parser.add_argument("-i", "--instance_ids", nargs="+", metavar="ID", help="instance ids to run (space separated)")
    parser.add_argument("-p", "--predictions_path", required=True,
                        help=f"the predictions: {PREDICTION_FORMS}")
    parser.add_argument("--max_workers", type=int, default=4, help="xdist workers (pytest -n)")
    parser.add_argument("-t", "--timeout", type=int, default=1800, help="seconds the tests of one instance may run")
    parser.add_argument("-id", "--run_id", required=True, help="the run's id: names its logs and its report")
    parser.add_argument("--rewrite_reports", type=_boolean, default=False,
                        help="run nothing: write the logs and the report again from the run's ledger")
    parser.add_argument("--report_dir", type=Path, default=Path("."), help="where the run report goes")
    parser.add_argument("--repos", type=Path, default=None,
                        help="folder of repository mirrors (the sweep's --arena-repos; `swe-arena mirror` makes them)")
    for flag in DOCKER_ONLY:
        parser.add_argument(flag, default=None, metavar="VALUE", help=argparse.SUPPRESS)


def _boolean(text: str) -> bool:
    if text.lower() in ("yes", "true", "t", "y", "1"):
        return True
    if text.lower() in ("no", "false", "f", "n", "0"):
        return False
    raise argparse.ArgumentTypeError(f"{text!r} is not a boolean (true or false)")


def command_evaluate(args: argparse.Namespace) -> int:
    unused = [flag for flag in DOCKER_ONLY if getattr(args, flag.lstrip("-")) is not None]
    if unused:
        print(f"swe-arena evaluate: {', '.join(unused)} only mean something to SWE-bench's Docker harness: "
              "unused here (no images, no containers)", file=sys.stderr)
    if args.max_workers < 1:
        raise SystemExit(f"swe-arena evaluate: --max_workers {args.max_workers}: give 1 or more")
    work = RUN_EVALUATION_LOG_DIR / args.run_id / "swe-arena"
    work.mkdir(parents=True, exist_ok=True)
    dataset = _dataset(args.dataset_name, args.split, work)
    if args.instance_ids:
        unknown = sorted(set(args.instance_ids) - {row["instance_id"] for row in dataset})
        if unknown:
            raise SystemExit(f"swe-arena evaluate: --instance_ids: not in {args.dataset_name}: {' '.join(unknown)}")
        dataset = [row for row in dataset if row["instance_id"] in args.instance_ids]
    predictions = _predictions(args.predictions_path, dataset)
    missing = sorted(set(predictions) - {row["instance_id"] for row in dataset})
    if missing and not args.instance_ids:
        raise SystemExit(f"swe-arena evaluate: {args.predictions_path}: predictions for instances not in "
                         f"{args.dataset_name}: {' '.join(missing)}")
    predictions = {iid: prediction for iid, prediction in predictions.items() if iid not in missing}
    out = work / "out"
    to_run = [row for row in dataset
              if row["instance_id"] in predictions and not is_empty(predictions[row["instance_id"]])]
    evaluation = Evaluation(args.run_id, [row["instance_id"] for row in dataset], predictions, {})
    if to_run and not args.rewrite_reports:
        returncode = _sweep(args, work, out, to_run, evaluation.model)
        if returncode not in (0, 1, 6):  # 1: some instance did not resolve; 6: many harness errors, recorded
            raise SystemExit(f"swe-arena evaluate: the sweep could not run (pytest exit status {returncode}, "
                             "its message above); no report written")
    rows = _rows(out)
    evaluation = Evaluation(args.run_id, evaluation.dataset_ids, predictions, rows)
    logs = write_logs(evaluation, Path("."), out)
    report = write_run_report(evaluation, args.report_dir)
    resolved = sum(1 for row in rows.values() if row.get("status") == "resolved")
    print(f"Instances resolved: {resolved} of {len(evaluation.dataset_ids)}")
    print(f"logs: {logs}\nswe-arena out dir (ledger, viewer): {out}\nReport written to {report}")
    return 0


def _dataset(name: str, split: str, work: Path) -> list[dict[str, Any]]:
    """The dataset's rows: a local file as it is, or a hub dataset's split, saved beside the sweep."""
    path = Path(name)
    if not path.exists():
        path = _from_hub(name, split, work)
    try:
        rows = read_rows(path)
    except InstanceFileError as error:
        raise SystemExit(f"swe-arena evaluate: --dataset_name: {error}") from None
    for line, row in rows:
        if not isinstance(row, dict) or not isinstance(row.get("instance_id"), str):
            raise SystemExit(f"swe-arena evaluate: {path}:{line}: expected a SWE-bench row (an object with "
                             "'instance_id')")
        if row.get("source"):  # the sweep reads the rows from its own folder: a relative source is anchored here
            try:
                source = resolve_source(path, line, row, None)
            except InstanceFileError as error:
                raise SystemExit(f"swe-arena evaluate: {error}") from None
            row["source"] = {source.kind: source.location}
    return [row for _, row in rows]


def _from_hub(name: str, split: str, work: Path) -> Path:
    try:
        import datasets  # type: ignore[import-untyped,import-not-found,unused-ignore]
    except ImportError:
        raise SystemExit(f"swe-arena evaluate: --dataset_name {name!r} is not a file here, and reading it from the "
                         "hub needs the `datasets` library (pip install datasets); or pass a local .json or "
                         ".jsonl file of the dataset's rows") from None
    try:
        rows = datasets.load_dataset(name, split=split)
    except Exception as error:  # the hub's errors are many (network, name, split); each is said as is
        raise SystemExit(f"swe-arena evaluate: --dataset_name {name!r} (split {split!r}) cannot be read from the "
                         f"hub ({type(error).__name__}: {error}); pass a local .json or .jsonl file") from None
    path = work / "dataset.jsonl"
    path.write_text("".join(json.dumps(dict(row)) + "\n" for row in rows), encoding="utf-8")
    return path


def _predictions(given: str, dataset: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    if given == GOLD:
        return {row["instance_id"]: {"instance_id": row["instance_id"], "model_patch": row.get("patch"),
                                     "model_name_or_path": GOLD} for row in dataset}
    try:
        return load_predictions(Path(given))
    except PredictionsError as error:
        raise SystemExit(f"swe-arena evaluate: {error}") from None


def arm_name(model: str) -> str:
    """The replay arm's name: the model's, made a valid arm name (``org/model-7b`` -> ``org__model-7b``)."""
    name = re.sub(r"[^A-Za-z0-9_-]", "_", model.replace("/", "__"))
    name = re.sub(r"-r\d+$", lambda match: match.group().replace("-", "_"), name)
    if name.lower() in {arm.lower() for arm in REFERENCE_ARMS}:  # "gold": the built-in GOLD arm's patch files
        name += "_predictions"
    return name if ARM_NAME.match(name) else f"m_{name}" if ARM_NAME.match(f"m_{name}") else "predictions"


def _sweep(args: argparse.Namespace, work: Path, out: Path, rows: list[dict[str, Any]], model: str) -> int:
    instances = work / "instances.jsonl"
    instances.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    arm = arm_name(model)
    predictions = GOLD if args.predictions_path == GOLD else str(Path(args.predictions_path).resolve())
    config = work / "pyproject.toml"
    config.write_text(f"[tool.pytest.ini_options]\n\n[tool.swe_arena.arms.{arm}]\nkind = \"replay\"\n"
                      f"predictions = {json.dumps(predictions)}\n", encoding="utf-8")
    argv = [sys.executable, "-m", "pytest", "-c", str(config.resolve()), "--rootdir", str(work.resolve()),
            "-p", "no:cacheprovider", "--arena-instances", str(instances.resolve()), "--arena-arms", arm,
            "--arena-out", str(out.resolve()), "--arena-verify-timeout", str(args.timeout)]
    if args.repos is not None:
        argv += ["--arena-repos", str(args.repos.resolve())]
    if args.max_workers > 1:
        argv += ["-n", str(args.max_workers)]
    if (out / LEDGER_NAME).exists():
        argv.append("--arena-resume")
    # The sweep runs in its own folder: a conftest.py or pytest.ini where the user stands is not its.
    return subprocess.run(argv, cwd=work, check=False).returncode


def _rows(out: Path) -> dict[str, dict[str, Any]]:
    """The sweep's final row per instance (one arm, one trial)."""
    ledger = out / LEDGER_NAME
    if not ledger.exists():
        return {}
    return {str(row["instance_id"]): row for row in latest_run_rows(read_ledger(ledger))}
