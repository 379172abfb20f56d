"""A small run directory laid out as ``aeval run`` writes one, for the viewer and
``report --wrong`` tests: config, manifest, request and output files, verdicts,
and the dataset the config names."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from aeval.store import shard_stem
from aeval.verdicts import Status, Verdict

E, W = Status.EQUIVALENT, Status.NOT_EQUIVALENT

# What a model wrote, hostile markup included: the page must show it as text.
HOSTILE = "</script><img src=x onerror=\"document.title='pwned'\"><!--"


@dataclass(frozen=True)
class Answer:
    item: str
    status: Status
    content: str | None  # None: an error line (no response)
    repaired: str | None = None
    published: bool | None = None
    reason: str | None = None  # default: "" when equivalent, else "reason for item N"


def truth(item: str) -> str:
    return f"(assert (and (>= n 1) (<= n {item})))"


def answer_text(body: str, *, draft: str = "I reason about the loop.") -> str:
    return f"<think>{draft}</think><answer>{body}</answer>"


def default_answers() -> dict[tuple[str, int], list[Answer]]:
    """alpha: two trials over items 1..12; beta: one trial with a repair, a published
    disagreement, an API error and a hostile answer."""
    alpha = [
        Answer(str(i), E if i % 3 else W, answer_text(truth(str(i)) if i % 3 else truth("99")))
        for i in range(1, 13)
    ]
    beta = [
        Answer("1", E, answer_text(truth("1"))),
        Answer("2", E, "```smt2\n" + truth("2") + "\n```", repaired="code_fence+untagged_answer"),
        Answer("3", W, answer_text(truth("4") + HOSTILE), published=True),
        Answer("10", Status.API_ERROR, None),
        Answer("11", Status.NO_ANSWER, "I could not find it."),
    ]
    return {("alpha", 1): alpha, ("alpha", 2): alpha[:6], ("beta", 1): beta}


def _output_line(model: str, answer: Answer) -> dict[str, object]:
    if answer.content is None:
        return {
            "id": f"req-{answer.item}",
            "custom_id": answer.item,
            "response": None,
            "error": {"code": "batch_expired", "message": "This request could not be executed."},
        }
    return {
        "id": f"req-{answer.item}",
        "custom_id": answer.item,
        "response": {
            "status_code": 200,
            "body": {
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": answer.content},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 120, "completion_tokens": 45},
            },
        },
        "error": None,
    }


def write_dataset(path: Path, items: int = 12) -> Path:
    rows = [
        {
            "id": str(i),
            "question": f"Question {i}: the worst-case path of program P{i}.",
            "answer": truth(str(i)),
            "constants": "(declare-const n Int)",
            "tier": "small" if i <= 6 else "medium",
        }
        for i in range(1, items + 1)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def make_run(
    run_dir: Path,
    answers: dict[tuple[str, int], list[Answer]] | None = None,
    *,
    dataset: Path | None = None,
) -> Path:
    """Write the run directory; returns it."""
    answers = default_answers() if answers is None else answers
    dataset = dataset or write_dataset(run_dir.parent / "bench.jsonl")
    for sub in ("requests", "outputs"):
        (run_dir / sub).mkdir(parents=True, exist_ok=True)
    (run_dir / "config.json").write_text(json.dumps({"dataset": str(dataset), "run_id": "r"}))
    shards = {}
    verdicts = []
    for (model, trial), rows in answers.items():
        stem = shard_stem(model, trial, 0)
        key = f"{model}|t{trial}|s0"
        shards[key] = {
            "key": key,
            "model": model,
            "trial": trial,
            "shard": 0,
            "requests": len(rows),
            "input_path": f"requests/{stem}.jsonl",
            "sha256": "",
            "bytes": 0,
            "round": 0,
        }
        (run_dir / "requests" / f"{stem}.jsonl").write_text("")
        good = [_output_line(model, a) for a in rows if a.content is not None]
        bad = [_output_line(model, a) for a in rows if a.content is None]
        for kind, lines in (("output", good), ("error", bad)):
            path = run_dir / "outputs" / f"{stem}-a0.{kind}.jsonl"
            path.write_text("".join(json.dumps(line) + "\n" for line in lines))
        for a in rows:
            verdicts.append(
                Verdict(
                    model=model,
                    trial=trial,
                    custom_id=a.item,
                    status=a.status,
                    reason=a.reason
                    if a.reason is not None
                    else ("" if a.status is E else f"reason for item {a.item}"),
                    repaired=a.repaired,
                    direction="too_weak" if a.status is W else None,
                    counterexample={"n": "7"} if a.status is W else None,
                    tier="small" if int(a.item) <= 6 else "medium",
                    finish_reason=None if a.content is None else "stop",
                    prompt_tokens=None if a.content is None else 120,
                    completion_tokens=None if a.content is None else 45,
                    correct_published=(a.status is E) if a.published is None else a.published,
                )
            )
    manifest = {"version": 1, "run_id": "r", "created": 0, "shards": shards}
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    (run_dir / "verdicts.jsonl").write_text(
        "".join(json.dumps(v.to_record()) + "\n" for v in verdicts)
    )
    return run_dir
