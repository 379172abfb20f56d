"""aeval.reward: called exactly as TRL and verl call it, hostile completions, threads and loops,
the deadline, shutdown, determinism, and agreement with ``aeval rescore`` item for item."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import numpy as np
import polars as pl
import pytest
from rescored_answers import ANSWER_KINDS, rescored

from aeval.errors import ConfigError
from aeval.reward import (
    EquivalenceReward,
    RewardScores,
    completion_text,
    compute_score,
    compute_score_batch,
    well_formed,
)
from aeval.reward.verl import close_shared

TRUTH = "(assert (and (> x 1) (< y 10)))"
CONSTANTS = "(declare-const x Int)\n(declare-const y Int)\n(declare-const z Int)"
GOOD = f"<think>x above one, y below ten</think><answer>{TRUTH}</answer>"
REWRITE = "<think>.</think><answer>(assert (< y 10))\n(assert (not (<= x 1)))</answer>"
WRONG = "<think>.</think><answer>(assert (> x 1))</answer>"
FENCED = f"<think>.</think><answer>```smt2\n{TRUTH}\n```</answer>"  # lenient repair
UNTAGGED = TRUTH  # lenient repair: no tags
# Sum of three cubes = 33: Z3 cannot decide it in any sane time (4 s solver timeout by default).
HARD = (
    "<answer>(assert (or (and (> x 1) (< y 10)) (= (+ (* x x x) (* y y y) (* z z z)) 33)))</answer>"
)
HOSTILE = [
    f"<answer>(assert (> x {'9' * 300_000}))</answer>",  # 300,000-digit numeral
    "<answer>(assert " + "(not " * 100_000 + "true" + ")" * 100_001 + "</answer>",  # deep nesting
    "<answer>(assert (> (* x x x x x x x x x x x x x x x x x x x x) 0))</answer>",  # degree 20
    "<answer>(check-sat)</answer><answer>(reset)</answer>",
]


def columns(n: int) -> dict[str, list[str]]:
    return {"answer": [TRUTH] * n, "constants": [CONSTANTS] * n}


@pytest.fixture(scope="module")
def reward() -> Iterator[EquivalenceReward]:
    with EquivalenceReward(workers=2) as r:
        yield r


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ", 1)[1][0] != "Z"
    except FileNotFoundError:
        return False


# -- TRL's contract -------------------------------------------------------------------------


def test_called_as_trl_calls_a_sync_reward(reward: EquivalenceReward) -> None:
    completions = [GOOD, REWRITE, WRONG, FENCED, None, ""]
    n = len(completions)
    # GRPOTrainer._calculate_rewards: keywords only, every other dataset column, trainer_state.
    scores = reward(
        prompts=["question"] * n,
        completions=completions,
        completion_ids=[[1, 2, 3]] * n,
        trainer_state=object(),
        tier=["small"] * n,
        question=["q"] * n,
        **columns(n),
    )
    assert scores == [1.0, 1.0, 0.0, 0.0, 0.0, 0.0]
    assert all(type(s) is float for s in scores)
    assert isinstance(reward.__name__, str) and reward.__name__ == "aeval_equivalence"
    stats = reward.last_stats
    assert stats is not None and stats.completions == n and stats.correct == 2
    assert stats.statuses["equivalent"] == 3 and stats.statuses["no_answer"] == 2


def test_conversational_completions_take_the_assistant_message(
    reward: EquivalenceReward,
) -> None:
    conversational = [
        [{"role": "assistant", "content": GOOD}],
        [{"role": "assistant", "content": WRONG}],
        [
            {"role": "assistant", "content": "let me call a tool"},
            {"role": "tool", "content": GOOD},
            {"role": "assistant", "content": [{"type": "text", "text": GOOD}]},
        ],
        [{"role": "user", "content": GOOD}],  # no assistant message: nothing to score
    ]
    scores = reward(
        prompts=[[{"role": "user", "content": "q"}]] * 4, completions=conversational, **columns(4)
    )
    assert scores == [1.0, 0.0, 1.0, 0.0]
    assert completion_text([{"role": "user", "content": GOOD}]) is None


def test_async_variant_runs_as_trl_runs_it(reward: EquivalenceReward) -> None:
    func = reward.as_async()
    assert asyncio.iscoroutinefunction(func) and func.__name__ == reward.__name__
    # TRL: a daemon thread runs an event loop; the trainer thread submits a gather to it.
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:

        async def gathered() -> list[list[float]]:
            return await asyncio.gather(
                func(prompts=None, completions=[GOOD, WRONG], **columns(2)),
                func(prompts=None, completions=[REWRITE], **columns(1)),
            )

        result = asyncio.run_coroutine_threadsafe(gathered(), loop).result(timeout=60)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()
    assert result == [[1.0, 0.0], [1.0]]


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_score_async_in_either_event_loop(reward: EquivalenceReward) -> None:
    assert await reward.score_async(completions=[WRONG, GOOD], **columns(2)) == [0.0, 1.0]


def test_sync_call_from_a_thread_without_loop_and_from_inside_a_running_loop(
    reward: EquivalenceReward,
) -> None:
    results: list[list[float]] = []
    worker = threading.Thread(
        target=lambda: results.append(reward(completions=[GOOD, WRONG], **columns(2)))
    )
    worker.start()
    worker.join(60)

    async def inside_a_loop() -> list[float]:
        return reward(completions=[WRONG, GOOD], **columns(2))

    results.append(asyncio.run(inside_a_loop()))
    assert results == [[1.0, 0.0], [0.0, 1.0]]


def test_concurrent_calls_from_threads_share_one_pool(reward: EquivalenceReward) -> None:
    reward(completions=[GOOD], **columns(1))
    pids = reward.worker_pids
    out: dict[int, list[float]] = {}

    def run(k: int) -> None:
        out[k] = reward(completions=[GOOD, WRONG] * 5, **columns(10))

    threads = [threading.Thread(target=run, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert all(out[k] == [1.0, 0.0] * 5 for k in range(4))
    assert reward.worker_pids == pids


# -- verl's contract ------------------------------------------------------------------------


def test_called_as_verl_calls_compute_score() -> None:
    try:
        # NaiveRewardManager: one item at a time, keywords.
        assert (
            compute_score(
                data_source="warp",
                solution_str=GOOD,
                ground_truth=TRUTH,
                extra_info={"constants": CONSTANTS, "index": 3},
            )
            == 1.0
        )
        as_dict = {"answer": TRUTH, "constants": CONSTANTS}
        assert compute_score("warp", WRONG, as_dict) == 0.0
        # custom_reward_function.reward_kwargs arrive as keywords.
        assert compute_score("warp", FENCED, as_dict, reading="lenient") == 1.0
        assert compute_score("warp", FENCED, as_dict) == 0.0
        # BatchRewardManager: plural keywords, one list.
        assert compute_score_batch(
            data_sources=["warp"] * 3,
            solution_strs=[GOOD, WRONG, REWRITE],
            ground_truths=[TRUTH, as_dict, TRUTH],
            extra_infos=[{"constants": CONSTANTS}, None, {"constants": CONSTANTS}],
        ) == [1.0, 0.0, 1.0]
        # verl hands non-tensor batch fields over as numpy object arrays.
        assert compute_score_batch(
            data_sources=np.array(["warp"] * 2, dtype=object),
            solution_strs=[REWRITE, FENCED],
            ground_truths=[TRUTH, TRUTH],
            extra_infos=np.array([{"constants": CONSTANTS}] * 2, dtype=object),
            reading="lenient",
        ) == [1.0, 1.0]
        with pytest.raises(ConfigError, match="extra_info"):
            compute_score("warp", GOOD, TRUTH)
        with pytest.raises(ConfigError, match="unknown reward setting"):
            compute_score("warp", GOOD, as_dict, bonus=3.0)
    finally:
        close_shared()


# -- scores ---------------------------------------------------------------------------------


def test_readings_format_credit_and_repair_penalty() -> None:
    scores = RewardScores(format_credit=0.1, repair_penalty=0.2)
    completions = [GOOD, FENCED, UNTAGGED, WRONG, "<answer>(assert (> x 1))</answer>", HOSTILE[0]]
    with EquivalenceReward(workers=1, scores=scores) as strict:
        got = strict(completions=completions, **columns(len(completions)))
        lenient = EquivalenceReward(workers=1, scores=scores, reading="lenient")
        with lenient:
            got_lenient = lenient(completions=completions, **columns(len(completions)))
    # strict: repaired answers are wrong, only a well-formed wrong answer earns the credit
    assert got == [1.0, 0.0, 0.0, 0.1, 0.0, 0.0]
    assert got_lenient == [1.0, 0.8, 0.8, 0.1, 0.0, 0.0]
    assert well_formed(GOOD) and well_formed("</think><answer>(assert true)</answer>")
    assert not well_formed(f"{GOOD} trailing") and not well_formed(GOOD + GOOD)


@pytest.mark.parametrize(
    ("settings", "match"),
    [
        ({"undecided": 0.5}, "must not exceed wrong"),
        ({"format_credit": 0.6, "repair_penalty": 0.5}, "lower format_credit"),
        ({"format_credit": -0.1}, ">= 0"),
        ({"equivalent": float("nan")}, "finite"),
    ],
)
def test_scores_that_would_reward_a_wrong_answer_are_refused(
    settings: dict[str, float], match: str
) -> None:
    with pytest.raises(ConfigError, match=match):
        RewardScores(**settings)


def test_bad_columns_are_named(reward: EquivalenceReward) -> None:
    with pytest.raises(ConfigError, match=r"'constants'.*columns passed were: answer, tier"):
        reward(completions=[GOOD], answer=[TRUTH], tier=["small"])
    with pytest.raises(ConfigError, match="'answer' has 2 values for 1 completions"):
        reward(completions=[GOOD], answer=[TRUTH] * 2, constants=[CONSTANTS])
    with pytest.raises(ConfigError, match="reading"):
        EquivalenceReward(reading="loose")  # type: ignore[arg-type]


def test_same_inputs_same_scores(reward: EquivalenceReward) -> None:
    completions = [GOOD, WRONG, REWRITE, FENCED, *HOSTILE] * 3
    first = reward(completions=completions, **columns(len(completions)))
    assert reward(completions=completions, **columns(len(completions))) == first
    with EquivalenceReward(workers=1) as other:
        assert other(completions=completions, **columns(len(completions))) == first


# -- hostile completions, the deadline, shutdown --------------------------------------------


def test_hostile_completions_score_as_wrong_and_spare_the_others(
    reward: EquivalenceReward,
) -> None:
    completions = [GOOD, *HOSTILE, REWRITE, WRONG]
    scores = reward(completions=completions, **columns(len(completions)))
    assert scores == [1.0, *[0.0] * len(HOSTILE), 1.0, 0.0]
    assert reward.last_stats is not None and reward.last_stats.statuses["too_large"] == 2


def test_a_stuck_check_gets_the_timeout_score_at_the_call_deadline() -> None:
    # HARD needs Z3's full 4 s solver timeout; the call's deadline is 1 s.
    with EquivalenceReward(workers=2, deadline_s=1.0) as reward:
        reward(completions=[GOOD], **columns(1))  # start the pool outside the timing
        completions = [HARD, GOOD, REWRITE, HARD, *[GOOD, WRONG] * 10]
        start = time.perf_counter()
        scores = reward(completions=completions, **columns(len(completions)))
        elapsed = time.perf_counter() - start
        stats = reward.last_stats
        # the workers killed at the deadline are replaced: the pool serves on (an
        # answer it has not seen, so it is checked, not taken from the verdict cache)
        fresh = "<answer>(assert (and (< y 10) (> x 1)))</answer>"
        assert reward(completions=[fresh], **columns(1)) == [1.0]
        pids = reward.worker_pids
    assert scores == [0.0, 1.0, 1.0, 0.0, *[1.0, 0.0] * 10]
    assert stats is not None and stats.past_deadline == 2 and stats.statuses["timeout"] == 2
    # Only the stuck ones outlived their first budget: the checks queued behind
    # them in a worker's pipe were not charged for the wait.
    assert stats.retried == 2
    assert elapsed < 3.0  # well before the 4 s each stuck check would take by itself
    assert pids and not any(alive(p) for p in pids)


def test_close_kills_every_worker_and_the_next_call_starts_anew() -> None:
    reward = EquivalenceReward(workers=2)
    assert reward.worker_pids == ()  # started lazily
    assert reward(completions=[GOOD], **columns(1)) == [1.0]
    first = reward.worker_pids
    assert len(first) == 2 and all(alive(p) for p in first)
    reward.close()
    assert reward.worker_pids == () and not any(alive(p) for p in first)
    assert reward(completions=[WRONG], **columns(1)) == [0.0]
    second = reward.worker_pids
    reward.close()
    reward.close()  # idempotent
    assert not any(alive(p) for p in second)


def test_interpreter_exit_leaves_no_worker_processes(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(
        "from aeval.reward import EquivalenceReward\n"
        "reward = EquivalenceReward(workers=2)\n"
        f"print(reward(completions=[{GOOD!r}], answer=[{TRUTH!r}], constants=[{CONSTANTS!r}]))\n"
        "print(*reward.worker_pids)\n"  # never closed: the interpreter's exit must do it
    )
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, env=env
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "[1.0]"
    pids = [int(p) for p in lines[1].split()]
    assert len(pids) == 2 and not any(alive(p) for p in pids)


@pytest.mark.anyio
async def test_cancelling_an_async_call_leaves_the_reward_usable(
    reward: EquivalenceReward,
) -> None:
    with anyio.move_on_after(0.3) as scope:
        await reward.score_async(completions=[HARD], **columns(1))
    assert scope.cancelled_caught
    assert await reward.score_async(completions=[GOOD, WRONG], **columns(2)) == [1.0, 0.0]


# -- agreement with aeval rescore -----------------------------------------------------------


@pytest.mark.anyio
async def test_scores_agree_with_rescore_item_for_item(
    dataset: pl.DataFrame, tmp_path: Path, reward: EquivalenceReward
) -> None:
    rows = dataset.head(20)
    truths, decls = rows["answer"].to_list(), rows["constants"].to_list()
    kinds = [*ANSWER_KINDS, lambda t: "<answer>(assert (> undeclared 0))</answer>"]
    completions, verdicts = await rescored(rows, kinds, tmp_path)
    assert len(verdicts) == len(kinds) * rows.height

    flat = [c for made in completions for c in made]
    n = len(flat)
    with EquivalenceReward(workers=2, reading="lenient") as lenient:
        for reading, judge in (("strict", reward), ("lenient", lenient)):
            scores = await judge.score_async(
                completions=flat, answer=truths * len(kinds), constants=decls * len(kinds)
            )
            expected = []
            for k in range(len(kinds)):
                for i in range(rows.height):
                    v = verdicts[(k + 1, str(i))]
                    correct = v.correct and (reading == "lenient" or v.repaired is None)
                    expected.append(1.0 if correct else 0.0)
            assert len(scores) == n
            assert scores == expected, reading
    # both readings were exercised: some answers are correct only leniently
    assert any(v.correct and v.repaired for v in verdicts.values())
    assert any(v.correct and not v.repaired for v in verdicts.values())


def test_status_only_checks_give_the_full_checks_status(dataset: pl.DataFrame) -> None:
    # The reward asks the verifier for the status only (details=False): no
    # direction or counterexample, one solver call fewer on wrong answers.
    from aeval.verify import Verifier

    verifier = Verifier()
    for truth, decls in dataset.head(15).select("answer", "constants").iter_rows():
        term = truth.strip()[len("(assert") : -1]
        for answer in (truth, f"(assert (not {term}))", f"(assert (or {term} (> 1 0)))", GOOD):
            full = verifier.check(f"<answer>{answer}</answer>", truth, decls)
            fast = verifier.check(f"<answer>{answer}</answer>", truth, decls, details=False)
            assert (fast.status, fast.repaired) == (full.status, full.repaired)
            assert fast.direction is None and fast.counterexample is None


def test_a_forked_child_starts_its_own_pool() -> None:
    # Data-loader workers are forked from the trainer: the parent's portal
    # thread and workers do not exist in the child, so it must not use them.
    # A reward of its own: the module's shared one may still be replacing a worker
    # that an earlier test killed (a cancelled check), so its worker set is not yet
    # steady and the parent's pids read before the fork would not be the ones after.
    with EquivalenceReward(workers=2) as reward:
        assert reward(completions=[GOOD], **columns(1)) == [1.0]
        parent_pids = reward.worker_pids
        assert len(parent_pids) == 2
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: score, report, and leave without running the parent's cleanup
            try:
                scores = reward(completions=[WRONG, GOOD], **columns(2))
                mine = reward.worker_pids
                reward.close()
                os.write(write, json.dumps([scores, list(mine)]).encode())
            finally:
                os._exit(0)
        os.close(write)
        with os.fdopen(read) as pipe:
            scores, child_pids = json.loads(pipe.read())
        os.waitpid(pid, 0)
        assert scores == [0.0, 1.0]
        assert child_pids and not set(child_pids) & set(parent_pids)
        assert reward.worker_pids == parent_pids and all(alive(p) for p in parent_pids)
        assert reward(completions=[REWRITE], **columns(1)) == [1.0]
