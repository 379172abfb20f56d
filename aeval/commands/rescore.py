"""``python -m aeval rescore``: verify Batch API output/error files that already exist.

    python -m aeval rescore results/<run-id>/outputs/*.jsonl
    python -m aeval rescore --dataset bench.parquet --out results/rescore-1 \\
        trial1_output.jsonl trial2_output.jsonl

With only files named, the benchmark is the one their run recorded (every file in
one aeval run's ``outputs/``), else the hub's WARP benchmark as ``run`` defaults to
(offline, the same one-line error saying to pass a local file), and the output goes
to a new directory under ``results/`` that the command names on stderr.

Writes ``OUT/verdicts.parquet`` and ``OUT/summary.json`` and prints the
per-model table. Lines that cannot be scored are listed on stderr (file and
line) and the exit code is 1; every other line is still scored. A file whose
lines could not be given a model gets one ``note`` line on stderr.

Its arguments are in :mod:`aeval.commands.rescore_args`, which ``--help`` loads
without this module's verifier and polars.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import anyio
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from aeval.commands.drive import ray_address
from aeval.dataset import DEFAULT_DATASET, load_dataset_fingerprinted
from aeval.display import stdout_console
from aeval.display.final import final_summary
from aeval.errors import ConfigError, RunDirError
from aeval.rescoring.rescore import RescoreResult, check_out_dir, rescore_files, write_outputs
from aeval.store import VERDICT_CACHE_FILE, new_run_id
from aeval.store.layout import RunLayout
from aeval.store.provenance import rescore_provenance
from aeval.verify.cache import VerdictCache
from aeval.verify.limits import VerifyLimits

# Problems listed one by one on stderr before the rest are only counted.
_MAX_LISTED_PROBLEMS = 20


def _trials(text: str | None, count: int) -> list[int] | None:
    if text is None:
        return None
    try:
        trials = [int(part) for part in text.split(",")]
    except ValueError:
        raise ConfigError(f"--trials {text!r}: expected comma-separated integers") from None
    if len(trials) != count:
        raise ConfigError(f"--trials gives {len(trials)} trial(s) for {count} file(s)")
    return trials


def _models(text: str | None, count: int) -> list[str | None] | None:
    if text is None:
        return None
    names = [part.strip() or None for part in text.split(",")]
    if len(names) == 1:
        if names[0] is None:
            raise ConfigError("--model: expected a model name")
        return names * count
    if len(names) != count:
        raise ConfigError(f"--model gives {len(names)} model(s) for {count} file(s)")
    return names


# Where a rescore writes when --out is not given: beside the runs, as `run` does.
DEFAULT_RESULTS = Path("results")


def recorded_dataset(files: list[Path]) -> tuple[str, str | None] | None:
    """The benchmark (and its pinned hub revision) that the run holding every file
    recorded, when every file is in the ``outputs/`` of one and the same aeval run;
    else ``None``.

    :raises ConfigError: the files come from runs that recorded different data.
    """
    found: dict[tuple[str, str | None], Path] = {}
    for path in files:
        run_dir = Path(path).resolve().parent.parent
        layout = RunLayout(run_dir)
        if Path(path).resolve().parent != layout.outputs_dir or not layout.config.is_file():
            return None
        try:
            config = layout.read_config() or {}
        except RunDirError:
            return None
        ref, revision = config.get("dataset"), config.get("dataset_revision")
        if not isinstance(ref, str):
            return None
        found.setdefault((ref, revision if isinstance(revision, str) else None), run_dir)
    if len(found) > 1:
        (a, run_a), (b, run_b) = list(found.items())[:2]
        raise ConfigError(
            f"the files come from runs scored on different data ({run_a}: {a[0]}, "
            f"{run_b}: {b[0]}): give --dataset, or rescore each run's files apart"
        )
    return next(iter(found), None)


def main(args: argparse.Namespace) -> int:
    trials = _trials(args.trials, len(args.files))
    models = _models(args.model, len(args.files))
    if args.workers is not None and args.workers < 1:
        raise ConfigError(f"--workers must be at least 1, got {args.workers}")
    if args.published_binary and not args.published:
        raise ConfigError("--published-binary reads the published reading: drop --no-published")
    limits = VerifyLimits.with_budget(args.timeout, memory_mb=args.memory_mb)
    address = ray_address(args)
    if args.out is None:
        args.out = DEFAULT_RESULTS / f"rescore-{new_run_id()}"
        print(f"aeval: rescoring into {args.out}", file=sys.stderr)
    check_out_dir(args.out)
    if args.dataset is not None:
        ref, revision = args.dataset, None
    else:
        ref, revision = recorded_dataset(args.files) or (DEFAULT_DATASET, None)
    dataset, fingerprint = load_dataset_fingerprinted(ref, revision=revision)
    err = Console(stderr=True)
    progress = Progress(
        TextColumn("verifying"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=args.quiet or not err.is_terminal,
    )
    task = progress.add_task("verify", total=None)

    # Each distinct answer checked once, across rescores into the same --out.
    cache = None if args.no_cache else VerdictCache(path=Path(args.out) / VERDICT_CACHE_FILE)

    async def main() -> RescoreResult:
        with progress:
            return await rescore_files(
                args.files,
                dataset,
                trials=trials,
                models=models,
                limits=limits,
                workers=args.workers,
                ray_address=address,
                on_verdict=lambda _v: progress.advance(task),
                published=args.published,
                published_binary=args.published_binary,
                cache=cache,
            )

    try:
        result = anyio.run(main)
    finally:
        if cache is not None:
            cache.close()
    summary = write_outputs(result, args.out, rescore_provenance(fingerprint, list(args.files)))
    stdout_console().print(
        final_summary(summary, title=f"aeval rescore → {args.out}", run_dir=args.out)
    )
    for problem in result.problems[:_MAX_LISTED_PROBLEMS]:
        print(f"aeval: skipped: {problem}", file=sys.stderr)
    hidden = len(result.problems) - _MAX_LISTED_PROBLEMS
    if hidden > 0:
        print(f"aeval: … and {hidden} more line(s) skipped", file=sys.stderr)
    for note in result.notes:
        print(f"aeval: note: {note}", file=sys.stderr)
    out = RunLayout(Path(args.out))
    print(
        f"aeval: {len(result.verdicts)} verdict(s) from {result.lines} line(s) in "
        f"{len(result.files)} file(s) written to {out.verdicts_parquet} and {out.summary.name}"
        + (f"; {len(result.problems)} problem(s), listed above" if result.problems else ""),
        file=sys.stderr,
    )
    return 1 if result.problems else 0
