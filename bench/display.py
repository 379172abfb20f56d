"""Cost of the live display: the same run of N verdicts with the Rich live view,
with plain lines, and quiet, side by side in one process.

The "run" is the engine's per-verdict path on the main thread, minus the Z3
check (which happens in worker processes): parse a batch output line
(:func:`aeval.scoring.responses.parse_batch_line`), build the verdict, append and flush
it to a real ``verdicts.jsonl`` (:class:`aeval.store.RunStore`), and hand a
``VerdictProduced`` event to the subscriber, with ``ShardUpdated`` events every
few thousand verdicts. Leaving Z3 out makes the display's share as large as it
can be, so the ratio is an upper bound on what a real run pays.

The live view draws to a terminal console (``force_terminal``) writing to
/dev/null, so every frame does all of its real work. Modes are
run back to back in each of several repeats (alternating order); the figure
judged is the median over repeats of each repeat's ratio to quiet, which
cancels the slow drift of a machine shared with other users. Best-of-N and
median wall and CPU (all threads) ratios are printed beside it.

    .venv/bin/python bench/display.py                 # 200,000 verdicts, 5 repeats
    .venv/bin/python bench/display.py --verdicts 50000 --repeats 3
    .venv/bin/python bench/display.py --engine --verdicts 20000 --repeats 3   # whole runs

Target: live and plain within 5 % of quiet (median paired wall ratio ≤ 1.05).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.live import Live

from aeval.display import ProgressState, progress_view, render_progress
from aeval.events import (
    BatchPhase,
    Event,
    JobFinished,
    RunFinished,
    RunStarted,
    ShardInfo,
    ShardUpdated,
    VerdictProduced,
)
from aeval.scoring.responses import parse_batch_line, verdict_from_check
from aeval.store import RunStore
from aeval.verdicts import CheckResult, Status, Verdict

MODES = ("quiet", "live", "plain")
TARGET = 1.05  # the most a mode may take of the quiet run's wall time, paired per repeat


def output_lines(models: list[str], per_model: int) -> list[tuple[str, bytes]]:
    """Batch output lines as the API writes them (one per request)."""
    lines = []
    for model in models:
        for k in range(per_model):
            body = {
                "id": f"batch_req_{k}",
                "custom_id": f"warp-{k:06d}",
                "response": {
                    "status_code": 200,
                    "body": {
                        "model": model,
                        "choices": [
                            {
                                "message": {
                                    "role": "assistant",
                                    "content": "<answer>(assert (> in0 3))</answer>",
                                },
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": {"prompt_tokens": 912, "completion_tokens": 240},
                    },
                },
                "error": None,
            }
            lines.append((model, json.dumps(body).encode()))
    return lines


CHECKS = (
    CheckResult(Status.EQUIVALENT),
    CheckResult(Status.NOT_EQUIVALENT, "too weak", None, "too_weak", {"in0": "4"}),
    CheckResult(Status.PARSE_ERROR, "unbalanced parentheses"),
)


def whole_shard(model: str, phase: BatchPhase, requests: int) -> ShardUpdated:
    """The update of a model's one shard in ``phase``, every request of it counted."""
    return ShardUpdated(
        model=model,
        trial=1,
        shard=0,
        phase=phase,
        batch_id="batch_x",
        completed=requests,
        failed=0,
        total=requests,
    )


def one_run(
    mode: str, models: list[str], lines: list[tuple[str, bytes]], workdir: Path
) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the whole process, refresh thread included)."""
    per_model = len(lines) // len(models)
    shards = tuple(ShardInfo(model=m, trial=1, shard=0, requests=per_model) for m in models)
    with open(os.devnull, "w") as devnull:
        console = Console(file=devnull, force_terminal=mode == "live", width=160)
        store = RunStore.create(workdir, f"bench-{mode}-{time.monotonic_ns()}", {"bench": True})
        start, cpu = time.perf_counter(), time.process_time()
        with progress_view(console, mode=mode, interval=1.0) as emit:  # type: ignore[arg-type]
            emit(
                RunStarted(
                    run_id=store.run_id,
                    run_dir=str(store.run_dir),
                    models=tuple(models),
                    trials=1,
                    items=per_model,
                    shards=shards,
                )
            )
            done = dict.fromkeys(models, 0)
            for i, (model, raw) in enumerate(lines):
                response = parse_batch_line(raw, source="output.jsonl", lineno=i + 1)
                verdict: Verdict = verdict_from_check(
                    response, CHECKS[i % 3], model=model, trial=1, tier="small"
                )
                store.append_verdict(verdict)
                emit(VerdictProduced(verdict=verdict))
                done[model] += 1
                if done[model] % 5000 == 0:
                    emit(whole_shard(model, "completed", per_model))
            for model in models:
                emit(whole_shard(model, "done", per_model))
                emit(JobFinished(model=model, trial=1, ok=True))
            emit(RunFinished(outcome="finished", run_dir=str(store.run_dir)))
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
        store.close()
    return elapsed, cpu


def subscriber_cost(mode: str, models: list[str], n: int) -> float:
    """CPU ns per VerdictProduced through the ``mode`` subscriber itself (fold, and in
    live mode the frames it draws while the events flow)."""
    per_model = n // len(models)
    shards = tuple(ShardInfo(model=m, trial=1, shard=0, requests=per_model) for m in models)
    events: list[Event] = [
        VerdictProduced(
            verdict=Verdict(
                model=models[i % len(models)],
                trial=1,
                custom_id=f"i{i}",
                status=CHECKS[i % 3].status,
            )
        )
        for i in range(n)
    ]
    with open(os.devnull, "w") as devnull:
        console = Console(file=devnull, force_terminal=mode == "live", width=160)
        with progress_view(console, mode=mode) as emit:  # type: ignore[arg-type]
            emit(
                RunStarted(
                    run_id="r",
                    run_dir="/tmp/r",
                    models=tuple(models),
                    trials=1,
                    items=per_model,
                    shards=shards,
                )
            )
            start = time.process_time()
            for e in events:
                emit(e)
            return (time.process_time() - start) / n * 1e9


def frame_cost(models: list[str]) -> float:
    """CPU ms to build and draw one frame of the live view (``Live.refresh``)."""
    state = ProgressState()
    state.apply(
        RunStarted(
            run_id="r", run_dir="/tmp/r", models=tuple(models), trials=1, items=50_000, shards=()
        )
    )
    for m in models:
        state.apply(
            ShardUpdated(
                model=m,
                trial=1,
                shard=0,
                phase="in_progress",
                batch_id="b",
                completed=20_000,
                failed=3,
                total=50_000,
                created_at=time.time(),
            )
        )
    with open(os.devnull, "w") as devnull:
        console = Console(file=devnull, force_terminal=True, width=160)
        live = Live(
            get_renderable=lambda: render_progress(state),
            console=console,
            auto_refresh=False,
            redirect_stdout=False,
            redirect_stderr=False,
        )
        with live:
            start = time.process_time()
            for _ in range(50):
                live.refresh()
            return (time.process_time() - start) / 50 * 1e3


def paired_ratios(wall: dict[str, list[float]]) -> dict[str, float]:
    """Each mode's median per-repeat wall ratio to quiet.

    Each repeat runs the modes back to back: the median of the per-repeat ratios
    cancels the machine's slow drift (other users' load), which ratios of best or
    median times do not.
    """
    return {
        mode: statistics.median(w / q for w, q in zip(times, wall["quiet"], strict=True))
        for mode, times in wall.items()
    }


def engine_runs(args: argparse.Namespace) -> bool:
    """The same offline engine run (local batch server, synthetic models, real Z3
    verification) with the live view, plain lines and quiet; True if within target."""
    import anyio

    from aeval.config import Credentials, PollSettings, RunConfig
    from aeval.engine import Run
    from aeval.local import LocalBatchServer, ModelSpec
    from aeval.synth import generate, write_benchmark

    models = [f"model-{i}" for i in range(args.models)]
    rows = args.verdicts // args.models
    wall: dict[str, list[float]] = {m: [] for m in MODES}

    async def go(tmp: Path) -> None:
        frame, _ = generate(rows, seed=1)
        dataset = write_benchmark(frame, tmp / "bench.parquet")
        specs = {m: ModelSpec("synthetic", seed=i, accuracy=0.6) for i, m in enumerate(models)}
        async with LocalBatchServer(dataset=frame, models=specs) as server:
            config = RunConfig(
                models=tuple(models),
                dataset=str(dataset),
                out_dir=tmp / "results",
                poll=PollSettings(initial_s=0.05, factor=1.5, max_s=0.5),
                credentials=Credentials("sk-bench", server.base_url),
            )
            for r in range(args.repeats):
                for mode in MODES if r % 2 == 0 else MODES[::-1]:
                    with open(os.devnull, "w") as devnull:
                        console = Console(file=devnull, force_terminal=mode == "live", width=160)
                        start = time.perf_counter()
                        with progress_view(console, mode=mode) as emit:  # type: ignore[arg-type]
                            result = await Run(config, subscribers=[emit]).run()
                        wall[mode].append(time.perf_counter() - start)
                    assert result.outcome == "finished", result.message
                    assert result.verdicts.height == rows * len(models)

    with tempfile.TemporaryDirectory() as tmp:
        anyio.run(go, Path(tmp))
    print(
        f"engine: {rows * len(models):,} verdicts per run ({args.models} models × {rows} rows, "
        f"local batch server, Z3 verification), {args.repeats} repeats interleaved"
    )
    paired = paired_ratios(wall)
    for mode in MODES:
        best = min(wall[mode]) / min(wall["quiet"])
        runs = ", ".join(f"{t:.1f}" for t in wall[mode])
        print(
            f"  {mode:6s} best {min(wall[mode]):6.1f}s ratio {best:5.3f}   "
            f"median paired ratio {paired[mode]:5.3f}   [{runs}]"
        )
    ok = max(paired.values()) <= TARGET
    print(f"  target: median paired wall ratio ≤ {TARGET} → {'OK' if ok else 'MISSED'}")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--verdicts", type=int, default=200_000)
    parser.add_argument("--models", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--engine",
        action="store_true",
        help="time whole offline engine runs (server, Z3) instead of the main-thread path",
    )
    args = parser.parse_args()
    if args.engine:
        return 0 if engine_runs(args) else 1
    models = [f"model-{i}" for i in range(args.models)]
    lines = output_lines(models, args.verdicts // args.models)
    wall: dict[str, list[float]] = {m: [] for m in MODES}
    cpu: dict[str, list[float]] = {m: [] for m in MODES}
    with tempfile.TemporaryDirectory() as tmp:
        one_run("quiet", models, lines[:2000], Path(tmp))  # warm-up
        for r in range(args.repeats):
            order = MODES if r % 2 == 0 else MODES[::-1]
            for mode in order:
                w, c = one_run(mode, models, lines, Path(tmp))
                wall[mode].append(w)
                cpu[mode].append(c)
    print(
        f"{len(lines):,} verdicts, {args.models} models, {args.repeats} repeats interleaved; "
        "ratios against quiet"
    )
    print(
        f"  {'mode':6s} {'best wall':>10s} {'ratio':>6s} {'median wall':>12s} {'ratio':>6s}"
        f" {'median CPU':>11s} {'ratio':>6s} {'paired':>7s}"
    )
    paired = paired_ratios(wall)
    for mode in MODES:
        best = min(wall[mode]) / min(wall["quiet"])
        med = statistics.median(wall[mode]) / statistics.median(wall["quiet"])
        cpu_ratio = statistics.median(cpu[mode]) / statistics.median(cpu["quiet"])
        print(
            f"  {mode:6s} {min(wall[mode]):9.2f}s {best:6.3f} "
            f"{statistics.median(wall[mode]):11.2f}s {med:6.3f} "
            f"{statistics.median(cpu[mode]):10.2f}s {cpu_ratio:6.3f} {paired[mode]:7.3f}"
        )
    ok = max(paired.values()) <= TARGET
    print(
        f"  target: median paired wall ratio ≤ {TARGET} over {args.repeats} repeats → "
        f"{'OK' if ok else 'MISSED'}"
    )
    # The display's own work, measured apart from the noise of whole runs: what each
    # subscriber costs per verdict beyond the quiet one, plus the frames a run of
    # this length draws, as a share of the quiet run's CPU time.
    n = len(lines)
    ns = {mode: min(subscriber_cost(mode, models, n) for _ in range(3)) for mode in MODES}
    frame_ms = min(frame_cost(models) for _ in range(3))
    quiet_cpu = statistics.median(cpu["quiet"])
    frames = statistics.median(wall["live"]) * 2  # 2 frames a second
    live_s = (ns["live"] - ns["quiet"]) * n / 1e9 + frames * frame_ms / 1e3
    plain_s = (ns["plain"] - ns["quiet"]) * n / 1e9
    print(
        f"  per verdict through the subscriber: quiet {ns['quiet']:.0f} ns, "
        f"plain {ns['plain']:.0f} ns, live {ns['live']:.0f} ns; one live frame {frame_ms:.2f} ms"
    )
    print(
        f"  display's own CPU per run: live {live_s * 1e3:.0f} ms "
        f"({100 * live_s / quiet_cpu:.1f} % of the quiet run), "
        f"plain {plain_s * 1e3:.0f} ms ({100 * plain_s / quiet_cpu:.1f} %)"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
