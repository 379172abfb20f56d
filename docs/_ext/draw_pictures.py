"""Draw the documentation's pictures from an offline run: ``python draw_pictures.py OUT``.

Run by ``aeval_pictures`` (the Sphinx extension beside it) in a child process whose
environment holds no provider key, so the run is always the offline demo: aeval's
local batch server with synthetic models on the bundled demo benchmark, never a
paid API. It writes into OUT:

- ``live-view-start.svg``: the live view (``aeval.display.render_progress``) at the
  start of the run in an 80×24 terminal, ``live-view.svg``: half-way through it at 110
  columns, and ``final-view.svg``: the summary printed at its end, all exported by Rich
  from the renderables the terminal shows;
- ``run/``: the run directory itself;
- ``report.md``: ``python -m aeval report RUN --format md``;
- ``latex/``: ``python -m aeval report RUN --format latex --out latex`` (booktabs
  tables, PDF and SVG figures), and ``board/`` the same from ``leaderboard``;
- ``html/``: the PNG figures of ``report RUN --format html`` (verdict mix, accuracy
  against extrapolation distance and against answer size), taken out of the page as
  it embeds them;
- ``reasoning/``: a second offline run of reasoning variants (``gpt-5@low``,
  ``@medium``, ``@high``, ``o4-mini@low``, ``@high``), and ``board-reasoning/`` its ``leaderboard
  --format latex``, whose accuracy-against-reasoning-tokens figure the pages show;
- ``viewer.png``: ``python -m aeval view RUN --by size`` in headless Chromium at
  1400×900, filtered and with one answer open. Without Chromium (``apt-get install
  chromium``) it is a picture that says so, unless ``AEVAL_CI`` is set (``.ci/run``
  installs Chromium and sets it): then a missing browser fails the build.
"""

from __future__ import annotations

import base64
import io
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import anyio
from rich.console import Console

from aeval import (
    Credentials,
    LocalBatchServer,
    Run,
    RunConfig,
    VerdictProduced,
    demo_dataset_path,
    load_dataset,
)
from aeval.display import ProgressState, render_progress
from aeval.display.final import final_summary
from aeval.events import (
    JobFinished,
    OutputDownloaded,
    RunStarted,
    ShardInfo,
    ShardUpdated,
)
from aeval.local import ModelSpec, demo_models, demo_timing
from aeval.report.headless_chromium import find_chromium, headless_command
from aeval.store import RunLayout
from aeval.verdicts import Status, Verdict

MODELS = ("gpt-4o-mini-2024-07-18", "gpt-4o-2024-11-20", "gpt-3.5-turbo-0125")
TRIALS = 2
LIMIT = 40
WIDTH = 110
START = (80, 24)  # the start of the run, in a small terminal
# The reasoning run: one synthetic responder per base model (a variant's request names
# the bare model; the server spends thinking tokens by the effort it asks for).
REASONING_MODELS = ("gpt-5@low", "gpt-5@medium", "gpt-5@high", "o4-mini@low", "o4-mini@high")
REASONING_SPECS = {
    "gpt-5": ModelSpec("synthetic", seed=5, accuracy=0.6),
    "o4-mini": ModelSpec("synthetic", seed=4, accuracy=0.45),
}
VIEWER_SIZE = (1400, 900)


def _svg(renderable: object, title: str, size: tuple[int, int | None] = (WIDTH, None)) -> str:
    width, height = size
    console = Console(
        record=True,
        width=width,
        height=height,
        file=io.StringIO(),
        force_terminal=True,
        color_system="truecolor",
        no_color=False,  # whatever NO_COLOR says: the picture is the same everywhere
    )
    console.print(renderable)
    return console.export_svg(title=title)


def _started(event: object, state: ProgressState) -> bool:
    """The moment the start picture shows: a batch in progress whose API counts have
    begun to move, before any answer is verified."""
    return (
        isinstance(event, ShardUpdated)
        and event.phase == "in_progress"
        and event.completed > 0
        and state.verified == 0
    )


async def _run(out: Path) -> Path:
    demo = str(demo_dataset_path())
    state = ProgressState()
    live: str | None = None
    start: str | None = None
    # The offline demo's models: seeded synthetic answers, right and wrong as real ones are.
    # demo_timing: batches validate, run and finalise as the offline demo's do (counts move).
    server = LocalBatchServer(
        dataset=load_dataset(demo), models=demo_models(), timing=demo_timing()
    )
    async with server:
        config = RunConfig(
            models=MODELS,
            trials=TRIALS,
            limit=LIMIT,
            dataset=demo,
            out_dir=str(out),
            run_id="run",
            credentials=Credentials("sk-local", server.base_url, aeval_server=True),
        )
        run = Run(config)
        events = run.events()
        total = len(MODELS) * TRIALS * LIMIT
        async with anyio.create_task_group() as tg:
            tg.start_soon(run.run)
            async for event in events:
                state.apply(event)
                if start is None and _started(event, state):
                    start = _svg(render_progress(state), "python -m aeval", START)
                half = isinstance(event, VerdictProduced) and state.verified >= total // 2
                if live is None and half:
                    live = _svg(render_progress(state), "python -m aeval")
    assert live is not None, "the run produced fewer verdicts than half its answers"
    assert start is not None, "no batch was seen in progress before the first verdict"
    (out / "live-view.svg").write_text(live)
    (out / "live-view-start.svg").write_text(start)
    return out / "run"


async def _reasoning_run(out: Path) -> Path:
    """An offline run of reasoning variants: the leaderboard's reasoning-token figure."""
    demo = str(demo_dataset_path())
    async with LocalBatchServer(dataset=load_dataset(demo), models=REASONING_SPECS) as server:
        config = RunConfig(
            models=REASONING_MODELS,
            trials=1,
            limit=LIMIT,
            dataset=demo,
            out_dir=str(out),
            run_id="reasoning",
            credentials=Credentials("sk-local", server.base_url, aeval_server=True),
        )
        await Run(config).run()
    return out / "reasoning"


def _html_figures(report: Path, out: Path) -> None:
    """The PNG figures ``report --format html`` embeds, as files (chart id -> name)."""
    page = report.read_text(encoding="utf-8")
    wanted = {"chart-mix": "verdict-mix", "chart-distance": "distance", "chart-size": "size"}
    out.mkdir(parents=True, exist_ok=True)
    for chart, name in wanted.items():
        found = re.search(
            rf'<figure class="chart" id="{chart}"><img [^>]*src="data:image/png;base64,([^"]+)"',
            page,
        )
        assert found, f"{report} has no {chart} figure"
        (out / f"{name}.png").write_bytes(base64.b64decode(found.group(1)))


def _viewer_hash(run_dir: Path) -> str:
    """The viewer's address part: one model's wrong answers on the items models disagree
    on, with one of them open."""
    import polars as pl

    model = MODELS[1]
    verdicts = pl.read_parquet(RunLayout(run_dir).verdicts_parquet)
    solved = verdicts.filter(pl.col("status") == "equivalent")
    by_others = set(solved.filter(pl.col("model") != model)["custom_id"].to_list())
    by_model = set(solved.filter(pl.col("model") == model)["custom_id"].to_list())
    wrong = verdicts.filter(
        (pl.col("model") == model)
        & (pl.col("trial") == 1)
        & pl.col("custom_id").is_in(sorted(by_others - by_model))
    ).sort("custom_id")
    assert wrong.height, "the run has no item that another model solves and this one never does"
    item = wrong["custom_id"][0]
    return f"model={model}&status=wrong&standing=split&open={model}/1/{item}"


def _viewer(run_dir: Path, out: Path) -> None:
    page = out / "viewer.html"
    _aeval("view", str(run_dir), "--by", "size", "--out", str(page))
    chromium = find_chromium()
    if chromium is None:
        if os.environ.get("AEVAL_CI"):
            raise SystemExit("the viewer needs headless Chromium (apt-get install chromium)")
        _no_browser(out / "viewer.png")
        return
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run(
            [
                *headless_command(chromium, Path(profile), VIEWER_SIZE),
                "--hide-scrollbars",
                "--virtual-time-budget=10000",
                f"--screenshot={out / 'viewer.png'}",
                f"{page.as_uri()}#{_viewer_hash(run_dir)}",
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )


def _no_browser(path: Path) -> None:
    """What the page shows where no browser drew the viewer: a picture that says so."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    fig = Figure(figsize=(VIEWER_SIZE[0] / 200, VIEWER_SIZE[1] / 400), dpi=100)
    fig.text(
        0.5,
        0.5,
        "The sample viewer's screenshot is drawn by the documentation build in headless\n"
        "Chromium, which the machine that built these pages did not have\n"
        "(apt-get install chromium, then build again). CI draws it.",
        ha="center",
        va="center",
        fontsize=11,
    )
    fig.savefig(path, format="png")


# README's picture: a file GitHub can show, so it is committed (docs/live-view.svg); it is
# drawn from a scripted state so that it comes out the same on every machine, and
# tests/test_docs_site.py checks the committed file is what this code draws today.
README_PICTURE = Path(__file__).resolve().parents[1] / "live-view.svg"
_T0 = 1_790_000_000.0  # the scripted run's start (epoch s)
# Per job: the phase shown, the API's done/failed counts, the verdicts so far, finished.
_SCRIPT: dict[tuple[str, int], tuple[str, int, int, int, bool]] = {
    (MODELS[0], 1): ("in_progress", 31, 0, 0, False),
    (MODELS[0], 2): ("in_progress", 24, 0, 0, False),
    (MODELS[1], 1): ("completed", 40, 0, 40, True),
    (MODELS[1], 2): ("completed", 39, 1, 27, False),
    (MODELS[2], 1): ("completed", 40, 0, 40, True),
    (MODELS[2], 2): ("finalizing", 40, 0, 0, False),
}
_ACCURACY = {MODELS[0]: 41, MODELS[1]: 62, MODELS[2]: 18}  # the demo's presets, in %


def readme_view() -> str:
    """The live view as ``render_progress`` draws it for a scripted state half-way
    through the offline demo (three models, two trials, 40 items; 16 s in), as SVG."""
    state = ProgressState(clock=lambda: _T0 + 16)
    shards = tuple(
        ShardInfo(model=m, trial=t, shard=0, requests=LIMIT)
        for m in MODELS
        for t in range(1, TRIALS + 1)
    )
    state.apply(
        RunStarted(
            run_id="demo",
            run_dir="results/demo",
            models=MODELS,
            trials=TRIALS,
            items=LIMIT,
            shards=shards,
            offline=True,
            synthetic=True,
            time=_T0,
        )
    )
    for (model, trial), (phase, done, failed, verified, finished) in _SCRIPT.items():
        job = {"model": model, "trial": trial}
        at = _T0 + 1 + trial
        batch = {"shard": 0, "batch_id": f"batch_{model}_{trial}", "total": LIMIT, "created_at": at}
        state.apply(ShardUpdated(**job, **batch, phase="validating", time=at))
        state.apply(
            ShardUpdated(**job, **batch, phase=phase, completed=done, failed=failed, time=_T0 + 15)
        )
        if not verified:
            continue
        state.apply(
            OutputDownloaded(**job, shard=0, output_lines=done, error_lines=failed, time=_T0 + 15)
        )
        for item in range(1, verified + 1):
            right = (item * 37 + trial * 11) % 100 < _ACCURACY[model]
            status = Status.EQUIVALENT if right else Status.NOT_EQUIVALENT
            if failed and item == verified:
                status = Status.API_ERROR
            verdict = Verdict(**job, custom_id=str(item), status=status)
            state.apply(VerdictProduced(verdict=verdict, time=_T0 + 15.5))
        if finished:
            end = {"completed": done, "failed": failed, "time": _T0 + 15.8}
            state.apply(ShardUpdated(**job, **batch, phase="done", **end))
            state.apply(JobFinished(**job, ok=True, time=_T0 + 15.8))
    return _svg(render_progress(state), "python -m aeval", (100, 16))


def _aeval(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "aeval", *args], check=True, stdout=subprocess.DEVNULL)


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    run_dir = anyio.run(_run, out)
    summary = RunLayout(run_dir).read_summary()
    assert summary is not None, f"{run_dir} wrote no summary.json"
    final = final_summary(summary, title=f"aeval → {run_dir.name}", run_dir=run_dir)
    (out / "final-view.svg").write_text(_svg(final, "python -m aeval"))
    _aeval("report", str(run_dir), "--format", "md", "--out", str(out / "report.md"))
    _aeval("report", str(run_dir), "--format", "latex", "--out", str(out / "latex"))
    _aeval("leaderboard", str(run_dir), "--format", "latex", "--out", str(out / "board"))
    _aeval("report", str(run_dir), "--format", "html", "--out", str(out / "report.html"))
    _html_figures(out / "report.html", out / "html")
    _viewer(run_dir, out)
    reasoning = anyio.run(_reasoning_run, out)
    _aeval(
        "leaderboard", str(reasoning), "--format", "latex", "--out", str(out / "board-reasoning")
    )


if __name__ == "__main__":
    if sys.argv[1:] == ["--readme"]:  # draw README's picture again, after a display change
        README_PICTURE.write_text(readme_view())
    else:
        main(Path(sys.argv[1]))
