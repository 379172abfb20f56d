"""Draw the documentation's pictures from an offline run: ``python draw_pictures.py OUT``.

Run by ``aeval_pictures`` (the Sphinx extension beside it) in a child process whose
environment holds no provider key, so the run is always the offline demo: aeval's
local batch server with synthetic models on the bundled demo benchmark, never a
paid API. It writes into OUT:

- ``live-view.svg``: the live view (``aeval.display.render_progress``) half-way
  through the run, and ``final-view.svg``: the summary printed at its end, both
  exported by Rich from the renderables the terminal shows;
- ``run/``: the run directory itself;
- ``report.md``: ``python -m aeval report RUN --format md``;
- ``latex/``: ``python -m aeval report RUN --format latex --out latex`` (booktabs
  tables, PDF and SVG figures), and ``board/`` the same from ``leaderboard``.
"""

from __future__ import annotations

import io
import subprocess
import sys
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
from aeval.local import demo_models
from aeval.store import RunLayout

MODELS = ("gpt-4o-mini-2024-07-18", "gpt-4o-2024-11-20", "gpt-3.5-turbo-0125")
TRIALS = 2
LIMIT = 40
WIDTH = 110


def _svg(renderable: object, title: str) -> str:
    console = Console(
        record=True, width=WIDTH, file=io.StringIO(), force_terminal=True, color_system="truecolor"
    )
    console.print(renderable)
    return console.export_svg(title=title)


async def _run(out: Path) -> Path:
    demo = str(demo_dataset_path())
    state = ProgressState()
    live: str | None = None
    # The offline demo's models: seeded synthetic answers, right and wrong as real ones are.
    async with LocalBatchServer(dataset=load_dataset(demo), models=demo_models()) as server:
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
                half = isinstance(event, VerdictProduced) and state.verified >= total // 2
                if live is None and half:
                    live = _svg(render_progress(state), "python -m aeval")
    assert live is not None, "the run produced fewer verdicts than half its answers"
    (out / "live-view.svg").write_text(live)
    return out / "run"


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


if __name__ == "__main__":
    main(Path(sys.argv[1]))
