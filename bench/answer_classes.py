"""What maj@n's equivalence classes cost, beside the verification of the same answers.

For ``--rows`` real benchmark rows and ``--trials`` answers each, every answer is
drawn (seeded) from a few spellings of the truth, of two wrong formulas and of
``(assert false)``, weighted like a model that is right about half the time.
In one pool, side by side: the time to verify every answer against its truth
(what a run does anyway), then the time to put the answers into classes, with
the number of Z3 checks made against the all-pairs bound Σ w·(w−1)/2.

    .venv/bin/python bench/answer_classes.py --rows 200 --trials 5
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

import anyio
import polars as pl
from options import options_parser

from aeval.scoring.answer_classes import answer_classes, canonical_answer, keys_needing_text
from aeval.verdicts import verdicts_frame
from aeval.verify import VerifierPool

ROOT = Path(__file__).resolve().parents[1]
BENCHMARK = ROOT / "tests" / "data" / "warp-benchmark.parquet"

sys.path.insert(0, str(ROOT / "tests"))
from answer_corpus import assert_bodies  # noqa: E402


def spellings(truth: str) -> list[tuple[str, float]]:
    bodies = assert_bodies(truth)
    b = bodies[0] if len(bodies) == 1 else "(and " + " ".join(bodies) + ")"
    return [
        (truth, 0.3),
        (f"(assert (not (not {b})))", 0.1),
        (f"(assert (and {b} true))", 0.1),
        (f"(assert (not {b}))", 0.15),
        (f"(assert (not (not (not {b}))))", 0.1),
        (f"(assert (or (not {b}) false))", 0.05),
        (f"(assert (and {b} false))", 0.1),  # another spelling of false
        ("(assert false)", 0.1),
    ]


async def main(rows: int, trials: int, workers: int, seed: int) -> None:
    data = pl.read_parquet(BENCHMARK).head(rows)
    rnd = random.Random(seed)
    answers: dict[tuple[str, int, str], str] = {}
    for i, truth in enumerate(data["answer"].to_list()):
        options = spellings(truth)
        for trial in range(1, trials + 1):
            text = rnd.choices([o for o, _ in options], [w for _, w in options])[0]
            answers[("m", trial, str(i))] = f"<answer>{text}</answer>"
    truths = data["answer"].to_list()
    constants = data["constants"].to_list()
    async with VerifierPool(workers=workers) as pool:
        start = time.perf_counter()
        records = []

        async def verify(key: tuple[str, int, str]) -> None:
            i = int(key[2])
            check = await pool.check(answers[key], truths[i], constants[i])
            records.append(
                {
                    "model": key[0],
                    "trial": key[1],
                    "custom_id": key[2],
                    "status": check.status.value,
                }
            )

        async with anyio.create_task_group() as tg:
            for key in answers:
                tg.start_soon(verify, key)
        verify_s = time.perf_counter() - start
        frame = verdicts_frame(records)
        start = time.perf_counter()
        keys = keys_needing_text(frame)
        texts = {k: canonical_answer(answers[k]) for k in keys}
        found = await answer_classes(frame, pool, texts, lambda cid: constants[int(cid)])
        classes_s = time.perf_counter() - start
    naive = rows * trials * (trials - 1) // 2
    print(f"{rows} rows × {trials} trials = {len(answers)} answers, {workers} workers")
    print(f"all pairs of every item's answers, n·(n−1)/2 per item: {naive} checks")
    print(f"verify every answer against its truth: {verify_s:.2f} s")
    print(
        f"equivalence classes: {classes_s:.2f} s ({classes_s / verify_s:.2f}× the verification), "
        f"{found.checks} checks of {found.bound} all-pairs "
        f"({found.checks / max(1, found.bound):.0%}), {found.undecided} undecided"
    )


if __name__ == "__main__":
    args = options_parser(__doc__, rows=200, trials=5, workers=2, seed=1).parse_args()
    anyio.run(main, args.rows, args.trials, args.workers, args.seed)
