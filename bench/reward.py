"""Benchmark: one GRPO-sized reward step, aeval's reward beside one ``z3 -in`` per completion.

    .venv/bin/python bench/reward.py [--rows 128] [--group 16] [--repeat 3] [--seed 0]

One step is ``rows`` benchmark rows × ``group`` completions built from the
ground truths: correct answers, equivalent rewrites, answers with a conjunct
dropped, malformed ones, and (in the hostile step) 1 % hostile ones —
300,000-digit numerals, 100,000 levels of nesting, and high-degree nonlinear
terms Z3 cannot decide. Printed side by side, in one run:

1. the steady step: ``EquivalenceReward`` with its pool warm (median of
   ``repeat`` steps);
2. the same completions, one ``z3 -in`` process per completion, two at a time
   (the study's reward: no time limit, ``unknown`` counted as equivalent);
3. the hostile step: its time against the per-check limit + 10 % of the clean
   step, and whether any other completion's score changed.
"""

from __future__ import annotations

import random
import re
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import polars as pl
from options import options_parser

from aeval.reward import EquivalenceReward

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from answer_corpus import truth_conjuncts  # noqa: E402

DEFAULT_DATASET = ROOT / "tests" / "data" / "warp-benchmark.parquet"
TARGET_SPEEDUP = 10.0
HOSTILE_SHARE = 0.01

Row = tuple[str, str]  # (truth, constants)


def z3_binary() -> str:
    """The z3 executable shipped in the z3-solver wheel (installed beside the interpreter)."""
    candidate = Path(sys.executable).parent / "z3"
    if not candidate.exists():
        raise SystemExit(f"bench/reward.py: no z3 binary at {candidate} (pip install z3-solver)")
    return str(candidate)


def conjuncts(truth: str, constants: str) -> list[str]:
    """The truth's conjuncts as S-expressions (nested ``and`` flattened)."""
    return [p.sexpr() for p in truth_conjuncts(truth, constants)]


def term(truth: str) -> str:
    text = truth.strip()
    return text[len("(assert") : -1] if text.startswith("(assert") else text


def tagged(answer: str) -> str:
    return f"<think>The constraint follows the pattern.</think><answer>{answer}</answer>"


def group_of(truth: str, constants: str, rng: random.Random) -> list[str]:
    """16 completions for one row: 4 correct, 4 rewrites, 4 with a conjunct dropped, 4 malformed."""
    parts = conjuncts(truth, constants)
    t = term(truth)
    out = [tagged(truth)] * 4
    out += [
        tagged("\n".join(f"(assert {p})" for p in reversed(parts))),  # one assert per conjunct
        tagged(f"(assert (not (not {t})))"),
        tagged(f"(assert (and true {t}))"),
        tagged(f"```smt2\n{truth}\n```"),  # a lenient repair: correct, not strictly
    ]
    for _ in range(4):
        if len(parts) > 1:
            drop = rng.randrange(len(parts))
            kept = [p for i, p in enumerate(parts) if i != drop]
            out.append(tagged(f"(assert (and {' '.join(kept)}))"))
        else:
            out.append(tagged(f"(assert (not {t}))"))
    name = re.findall(r"declare-const\s+(\S+)", constants)[0]
    out += [
        tagged(truth.rstrip()[:-1]),  # one parenthesis short
        "I could not find the constraint.",
        tagged(f"{truth}\n(check-sat)"),
        tagged(f"(assert (> undeclared_{name} 0))"),
    ]
    return out


_INTS = re.compile(r"declare-const\s+(\S+)\s+Int")


def hostile(truth: str, constants: str, kind: int) -> str:
    a, b, c = _INTS.findall(constants)[:3]
    if kind == 0:
        return tagged(f"(assert (and {term(truth)} (> {a} {'9' * 300_000})))")
    if kind == 1:
        return tagged("(assert " + "(not " * 100_000 + "true" + ")" * 100_001)
    cubes = f"(= (+ (* {a} {a} {a}) (* {b} {b} {b}) (* {c} {c} {c})) 33)"  # sum of three cubes
    return tagged(f"(assert (or {term(truth)} {cubes}))")


def build_step(
    data: pl.DataFrame, rows: int, group: int, seed: int
) -> tuple[list[str], list[str], list[str], dict[int, str]]:
    """(completions, answer column, constants column, hostile replacements by position)."""
    rng = random.Random(seed)
    picked = rng.sample(range(data.height), rows)
    completions, answers, constants = [], [], []
    for i in picked:
        truth, decls = data["answer"][i], data["constants"][i]
        made = group_of(truth, decls, rng)
        completions += [made[k % len(made)] for k in range(group)]
        answers += [truth] * group
        constants += [decls] * group
    count = max(1, round(len(completions) * HOSTILE_SHARE))
    # Rows with three integer variables, so that the nonlinear kind is a real
    # three-cubes problem (with one variable, 3x^3 = 33 is decided at once).
    eligible = [i for i, c in enumerate(constants) if len(_INTS.findall(c)) >= 3]
    positions = sorted(rng.sample(eligible, count))
    replaced = {p: hostile(answers[p], constants[p], n % 3) for n, p in enumerate(positions)}
    return completions, answers, constants, replaced


# -- the study's way: one z3 -in per completion -------------------------------------------

_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


def top_level_terms(text: str) -> list[str]:
    """The terms of the top-level ``(assert …)`` forms, by counting parentheses (no checks)."""
    terms, depth, start = [], 0, -1
    for i, ch in enumerate(text):
        if ch == "(":
            if depth == 0:
                start = i
            depth += 1
        elif ch == ")" and depth > 0:
            depth -= 1
            if depth == 0:
                terms.append(term(text[start : i + 1]))
    return terms


def one_process(binary: str, completion: str, truth: str, constants: str) -> bool:
    found = _ANSWER.search(completion)
    answer = found.group(1).strip() if found else ""
    terms = top_level_terms(answer) or ["false"]
    a = terms[0] if len(terms) == 1 else f"(and {' '.join(terms)})"
    script = (
        f"{constants}\n(push)\n{truth}\n(assert (not {a}))\n(check-sat)\n(pop)\n"
        f"(push)\n(assert {a})\n(assert (not {term(truth)}))\n(check-sat)\n(pop)\n"
    )
    out = subprocess.run([binary, "-in"], input=script, capture_output=True, text=True).stdout
    verdicts = [w for w in out.split() if w in ("sat", "unsat", "unknown")]
    return len(verdicts) == 2 and "sat" not in verdicts  # unknown counts as equivalent


def process_per_completion(completions: list[str], answers: list[str], constants: list[str]):
    binary = z3_binary()
    start = time.perf_counter()
    with ThreadPoolExecutor(2) as pool:
        correct = list(
            pool.map(
                lambda x: one_process(binary, *x), zip(completions, answers, constants, strict=True)
            )
        )
    return time.perf_counter() - start, correct


# -- main -----------------------------------------------------------------------------------


def main() -> None:
    args = options_parser(
        __doc__, dataset=DEFAULT_DATASET, rows=128, group=16, repeat=3, seed=0, workers=int
    ).parse_args()

    data = pl.read_parquet(args.dataset)
    completions, answers, constants, replaced = build_step(data, args.rows, args.group, args.seed)
    dirty = [replaced.get(i, c) for i, c in enumerate(completions)]
    n = len(completions)
    print(f"step: {args.rows} rows x {args.group} completions = {n}; {len(replaced)} hostile")

    with EquivalenceReward(workers=args.workers) as reward:
        start = time.perf_counter()
        warm_scores = reward(completions=completions, answer=answers, constants=constants)
        first = time.perf_counter() - start
        workers = len(reward.worker_pids)
        clean_times, clean_scores = [], []
        for _ in range(args.repeat):
            start = time.perf_counter()
            clean_scores.append(
                reward(completions=completions, answer=answers, constants=constants)
            )
            clean_times.append(time.perf_counter() - start)
        clean_stats = reward.last_stats
        start = time.perf_counter()
        dirty_scores = reward(completions=dirty, answer=answers, constants=constants)
        dirty_time = time.perf_counter() - start
        dirty_stats = reward.last_stats
        limit = reward.limits.timeout_s

    steady = statistics.median(clean_times)
    deterministic = all(s == warm_scores for s in clean_scores)
    changed = [i for i in range(n) if i not in replaced and dirty_scores[i] != warm_scores[i]]
    hostile_scores = sorted({dirty_scores[i] for i in replaced})
    print(f"aeval EquivalenceReward ({workers} workers)")
    print(f"  first step (pool start-up + truths parsed)  {first:6.2f} s")
    print(
        f"  steady step, median of {args.repeat}             {steady:6.2f} s  "
        f"({n / steady:,.0f} completions/s; all steps {', '.join(f'{t:.2f}' for t in clean_times)})"
    )
    print(f"  statuses {clean_stats.statuses if clean_stats else {}}")
    print(f"  same scores in every clean step: {deterministic}")

    baseline, baseline_correct = process_per_completion(completions, answers, constants)
    ours_correct = sum(s == 1.0 for s in warm_scores)
    print("one z3 -in process per completion, 2 at a time")
    print(
        f"  step                                        {baseline:6.2f} s  ({n / baseline:,.0f}/s)"
    )
    print(f"  counted correct: {sum(baseline_correct)} (aeval strict: {ours_correct})")
    speedup = baseline / steady
    print(f"-> steady step vs process per completion: {speedup:.1f}x (target {TARGET_SPEEDUP:g}x)")

    bound = limit + 0.1 * steady
    print(f"hostile step ({len(replaced)} hostile = {len(replaced) / n:.1%})")
    print(
        f"  step {dirty_time:.2f} s vs per-check limit {limit:g} s + 10 % of the clean step "
        f"= {bound:.2f} s: {'met' if dirty_time <= bound else 'MISSED'}"
    )
    if dirty_stats is not None:
        print(
            f"  statuses {dirty_stats.statuses}; retried {dirty_stats.retried}, "
            f"past the deadline {dirty_stats.past_deadline}"
        )
    print(f"  hostile completions scored {hostile_scores}; other scores changed: {len(changed)}")


if __name__ == "__main__":
    main()
