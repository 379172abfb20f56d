"""aeval in Jupyter (Issue 21 §1), on a real kernel (ipykernel, driven by nbclient).

- examples/warp.ipynb, committed without outputs, executed top to bottom: the
  live progress, the summary as HTML, the verdicts as a polars frame, the tier
  chart and one wrong answer are all in its outputs.
- (slow) interrupting the kernel mid-run: the cell ends with the resume hint,
  every verdict written stays, and ``await notebook.resume(...)`` finishes the
  run with each answer verified once and each batch created once.
"""

from __future__ import annotations

import base64
import json
import os
import re
import time
from pathlib import Path
from typing import Any

import nbformat
import polars as pl
import pytest
from jupyter_client.manager import start_new_kernel
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "examples" / "warp.ipynb"
MODELS = ("gpt-4o-mini-2024-07-18", "gpt-4o-2024-11-20", "gpt-3.5-turbo-0125")


def kernel_env(out: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_KEY")}
    env.pop("OPENAI_BASE_URL", None)
    env["AEVAL_RESULTS"] = str(out)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


def outputs_of(cell: Any) -> dict[str, str]:
    """A code cell's outputs by MIME type (the last of each), errors under "error"."""
    found: dict[str, str] = {}
    for out in cell.outputs:
        if out.output_type == "error":
            found["error"] = f"{out.ename}: {out.evalue}"
        for mime, value in out.get("data", {}).items():
            found[mime] = value if isinstance(value, str) else json.dumps(value)
    return found


def test_the_committed_notebook_has_no_outputs() -> None:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None


def test_the_example_notebook_runs_top_to_bottom_on_a_real_kernel(tmp_path: Path) -> None:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(
        nb,
        timeout=180,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(kernel_env(tmp_path / "results"))
    try:
        client.execute()  # raises CellExecutionError on any error output
    finally:
        os.environ.clear()
        os.environ.update(saved)
    cells = {c.source: outputs_of(c) for c in nb.cells if c.cell_type == "code"}

    def cell(source_start: str) -> dict[str, str]:
        return next(v for k, v in cells.items() if k.startswith(source_start))

    # The progress display, replaced in place: only its final state is left, once.
    run_cell = next(c for c in nb.cells if c.source.startswith("result = await"))
    assert [o.output_type for o in run_cell.outputs] == ["display_data"]
    progress = outputs_of(run_cell)["text/plain"]
    assert "SYNTHETIC aeval run" in progress and "run finished" in progress
    assert "Total verified 90/90" in progress
    for model in MODELS:
        assert model in progress
    assert "<pre" in outputs_of(run_cell)["text/html"]

    summary = cells["result"]
    page = summary["text/html"]
    assert "SYNTHETIC" in page and "Accuracy [95% CI]" in page
    assert all(f"<td>{m}</td>" in page for m in MODELS)
    assert "finished" in summary["text/plain"]

    frame = cell("result.verdicts")
    assert "shape: (5," in frame["text/plain"] and "<table" in frame["text/html"]

    chart = cell('result.chart("tier")')["text/html"]
    # the report's tier figure (aeval.report.figures), inline as a PNG
    assert 'id="chart-tiers"' in chart
    [png] = re.findall(r'src="data:image/png;base64,([^"]+)"', chart)
    assert base64.b64decode(png).startswith(b"\x89PNG\r\n\x1a\n")

    wrong = cell("weakest =")["text/plain"]
    assert "not_equivalent" in wrong
    drill = cell("first =")["text/plain"]
    assert "counterexample" in drill and "first difference" in drill

    # What the notebook showed is what the run directory holds.
    [run_dir] = list((tmp_path / "results").iterdir())
    verdicts = pl.read_parquet(run_dir / "verdicts.parquet")
    assert verdicts.height == 90
    assert f"Total verified {verdicts.height}/90" in progress


def execute(kc: Any, code: str, timeout: float = 120) -> tuple[dict[str, Any], list[Any]]:
    """Run ``code`` on the kernel; its execute reply and the iopub messages it caused."""
    msg_id = kc.execute(code)
    messages = []
    deadline = time.monotonic() + timeout
    while True:
        msg = kc.get_iopub_msg(timeout=max(1.0, deadline - time.monotonic()))
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        messages.append(msg)
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            break
    return reply_to(kc, msg_id), messages


def reply_to(kc: Any, msg_id: str) -> dict[str, Any]:
    while True:
        reply = kc.get_shell_msg(timeout=30)
        if reply["parent_header"].get("msg_id") == msg_id:
            return reply["content"]  # type: ignore[no-any-return]


SETUP = """
from aeval import Credentials, LocalBatchServer, RunConfig, demo_dataset_path, load_dataset
from aeval.interop import notebook
from aeval.local import Timing, demo_models
dataset = str(demo_dataset_path())
server = LocalBatchServer(
    dataset=load_dataset(dataset), models=demo_models(),
    timing=Timing(validating_s=0.2, requests_per_second=6.0, finalizing_s=0.2),
)
server.start()
credentials = Credentials("sk-local", server.base_url)
config = RunConfig(
    models={models!r}, dataset=dataset, limit=30, out_dir={out!r}, credentials=credentials,
)
"""


@pytest.mark.slow
def test_interrupting_the_kernel_loses_nothing_and_resume_carries_on(tmp_path: Path) -> None:
    out = tmp_path / "results"
    km, kc = start_new_kernel(kernel_name="python3", env=kernel_env(out))
    try:
        reply, _ = execute(kc, SETUP.format(models=MODELS, out=str(out)))
        assert reply["status"] == "ok", reply
        msg_id = kc.execute("result = await notebook.run(config)")
        # Interrupt once some verdicts are written and the batches are still going.
        deadline = time.monotonic() + 120
        verdict_file = None
        while time.monotonic() < deadline:
            found = list(out.glob("*/verdicts.jsonl"))
            if found and len(found[0].read_text().splitlines()) >= 10:
                verdict_file = found[0]
                break
            time.sleep(0.1)
        assert verdict_file is not None, "no verdicts were written"
        km.interrupt_kernel()
        messages = []
        while True:
            msg = kc.get_iopub_msg(timeout=60)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            messages.append(msg)
            if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                break
        reply = reply_to(kc, msg_id)
        assert reply["status"] == "error"
        errors = [m["content"] for m in messages if m["msg_type"] == "error"]
        assert len(errors) == 1
        assert errors[0]["traceback"][0].startswith("KeyboardInterrupt: interrupted after")
        assert "await notebook.resume(" in errors[0]["traceback"][0]
        shown = [
            m["content"]["data"]["text/plain"]
            for m in messages
            if m["msg_type"] == "update_display_data"
        ]
        assert "await notebook.resume(" in " ".join(shown[-1].split())  # the output says it too
        before = [json.loads(line) for line in verdict_file.read_text().splitlines()]
        assert 10 <= len(before) < 90
        run_dir = verdict_file.parent

        reply, messages = execute(
            kc,
            f"result = await notebook.resume({str(run_dir)!r}, credentials=credentials)\n"
            "print(result.outcome, result.verdicts.height)\n"
            "print(server.counters().batches)",
        )
        assert reply["status"] == "ok", reply
        printed = "".join(
            m["content"]["text"] for m in messages if m["msg_type"] == "stream"
        ).splitlines()
        assert printed[0] == "finished 90"
        assert printed[1] == "3"  # one batch per model: none created again on resume
        after = pl.read_parquet(run_dir / "verdicts.parquet")
        keys = list(zip(after["model"], after["trial"], after["custom_id"], strict=True))
        assert len(keys) == len(set(keys)) == 90  # every answer verified exactly once
        lines = [json.loads(line) for line in verdict_file.read_text().splitlines()]
        assert len(lines) == 90  # nothing verified twice, nothing lost
        # The interrupt reached the whole process group: no verifier worker died of it.
        assert "resource_limit" not in set(after["status"].to_list())
        for rec in before:  # every verdict from before the interrupt kept as it was
            row = after.filter(
                (pl.col("model") == rec["model"]) & (pl.col("custom_id") == rec["custom_id"])
            )
            assert row["status"].item() == rec["status"]
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
