"""Answers of several kinds to the same rows, scored by ``aeval rescore``: what the reward
(in process and as a service) must agree with, item for item."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import polars as pl

from aeval.rescoring.rescore import rescore_files
from aeval.verdicts import Verdict

AnswerKind = Callable[[str], str]


def _term(truth: str) -> str:
    return truth.strip()[len("(assert") : -1]


# Of a row's ground truth: right as it is, right after a lenient repair, wrong,
# malformed, and no answer tags at all.
ANSWER_KINDS: list[AnswerKind] = [
    lambda t: f"<think>.</think><answer>{t}</answer>",
    lambda t: f"<think>.</think><answer>(assert (not (not {_term(t)})))</answer>",
    lambda t: f"<think>.</think><answer>(assert (not {_term(t)}))</answer>",
    lambda t: f"<answer>```lisp\n{t}\n```</answer>",
    lambda t: f"<think>.</think><answer>{t.rstrip()[:-1]}</answer>",
    lambda t: f"Here it is: {t}",
]


def _line(custom_id: str, content: str) -> str:
    body = {"model": "m", "choices": [{"message": {"content": content}, "finish_reason": "stop"}]}
    return json.dumps({"custom_id": custom_id, "response": {"status_code": 200, "body": body}})


async def rescored(
    rows: pl.DataFrame, kinds: Sequence[AnswerKind], tmp_path: Path
) -> tuple[list[list[str]], dict[tuple[int, str], Verdict]]:
    """Each kind's answers to every row (one trial's output file per kind, trial ``k + 1``,
    custom id the row's index), rescored: the answers per kind, and the verdicts by
    (trial, custom id)."""
    truths = rows["answer"].to_list()
    answers, files = [], []
    for k, kind in enumerate(kinds):
        made = [kind(t) for t in truths]
        answers.append(made)
        path = tmp_path / f"trial{k + 1}.jsonl"
        path.write_text("\n".join(_line(str(i), a) for i, a in enumerate(made)) + "\n")
        files.append(path)
    result = await rescore_files(files, rows, workers=2)
    return answers, {(v.trial, v.custom_id): v for v in result.verdicts}
