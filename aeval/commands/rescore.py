"""``python -m aeval rescore``: verify Batch API output/error files that already exist.

    python -m aeval rescore --dataset bench.parquet --out results/rescore-1 \\
        trial1_output.jsonl trial2_output.jsonl

Writes ``OUT/verdicts.parquet`` and ``OUT/summary.json`` and prints the
per-model table. Lines that cannot be scored are listed on stderr (file and
line) and the exit code is 1; every other line is still scored. A file whose
lines could not be given a model gets one ``note`` line on stderr.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import anyio
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from aeval.commands.drive import add_ray_argument, ray_address
from aeval.commands.options import at_least, positive_float
from aeval.display import stdout_console
from aeval.errors import ConfigError
from aeval.store.layout import RunLayout
from aeval.verify.limits import DEFAULT_LIMITS, VerifyLimits

# Problems listed one by one on stderr before the rest are only counted.
_MAX_LISTED_PROBLEMS = 20


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "files",
        nargs="+",
        type=Path,
        metavar="FILE",
        help="Batch API output or error files (JSONL), lm-evaluation-harness logged "
        "samples (samples_*.jsonl) or Inspect AI eval logs (.eval), of any models; trials are "
        "numbered "
        "per model in the order given (see --trials)",
    )
    parser.add_argument(
        "--dataset",
        required=True,
        metavar="PATH",
        help="the benchmark the requests were made from: a local .parquet, .jsonl or .csv",
    )
    parser.add_argument(
        "--out",
        required=True,
        type=Path,
        metavar="DIR",
        help="where this command writes: verdicts.parquet and summary.json go in DIR",
    )
    parser.add_argument(
        "--trials",
        metavar="N,N,…",
        help="trial of each FILE, comma-separated (e.g. 1,1,2,2); default: from an aeval "
        "run's file names, else 1,2,3,… per model in the order given, an error file "
        "sharing the trial of its paired output file (…error… ↔ …output…)",
    )
    parser.add_argument(
        "--model",
        metavar="NAME[,NAME…]",
        help="the model of every line of the FILEs: one name for all, or one per FILE "
        "(empty: work it out); default: the model each response names, else that of its "
        "request (an aeval run's request file, or the paired output file)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="verifier processes (default: CPU count); with --ray, per node",
    )
    add_ray_argument(parser)
    parser.add_argument(
        "--check-timeout",
        dest="timeout",
        type=positive_float,
        default=DEFAULT_LIMITS.timeout_s,
        metavar="S",
        help="hard wall-clock budget per answer, in seconds",
    )
    parser.add_argument(
        "--memory-mb",
        type=at_least(256),
        default=DEFAULT_LIMITS.memory_mb,
        metavar="MB",
        help="address-space cap per verifier process",
    )
    parser.add_argument(
        "--no-published",
        dest="published",
        action="store_false",
        help="skip the published reading (the study's own evaluator): the "
        "correct_published column stays empty",
    )
    parser.add_argument(
        "--published-binary",
        action="store_true",
        help="give every published reading from the z3 binary, one process per answer, "
        "as the study ran it (an audit; by default answers whose outcome is provably "
        "the binary's are read in the verifier)",
    )
    parser.add_argument(
        "--no-cache",
        action="store_true",
        help="check every answer again, neither reading nor writing the verdict cache in "
        "DIR (the verdicts of distinct answers already checked into the same --out)",
    )
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress bar")


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


def main(args: argparse.Namespace) -> int:
    from aeval.dataset import load_dataset_fingerprinted
    from aeval.display.final import final_summary
    from aeval.rescoring.rescore import RescoreResult, check_out_dir, rescore_files, write_outputs
    from aeval.store import VERDICT_CACHE_FILE
    from aeval.store.provenance import rescore_provenance
    from aeval.verify.cache import VerdictCache

    trials = _trials(args.trials, len(args.files))
    models = _models(args.model, len(args.files))
    if args.workers is not None and args.workers < 1:
        raise ConfigError(f"--workers must be at least 1, got {args.workers}")
    if args.published_binary and not args.published:
        raise ConfigError("--published-binary reads the published reading: drop --no-published")
    limits = VerifyLimits.with_budget(args.timeout, memory_mb=args.memory_mb)
    address = ray_address(args)
    check_out_dir(args.out)
    dataset, fingerprint = load_dataset_fingerprinted(args.dataset)
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
