"""The verdict cache: each distinct answer checked once, never a different verdict."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import polars as pl
import pytest
from answer_corpus import answers_for, hostile

from aeval.rescoring.rescore import rescore_files
from aeval.reward.schedule import Schedule, check_all
from aeval.store import VERDICT_CACHE_FILE
from aeval.study_reasons import EQUIVALENT, NO_ANSWER
from aeval.verdicts import CheckResult, Status
from aeval.verify import VerifierPool
from aeval.verify.cache import CachedChecker, VerdictCache
from aeval.verify.limits import DEFAULT_LIMITS
from aeval.verify.published import PublishedResult

INTS = "(declare-const x Int)\n(declare-const y Int)"
ROWS = [("(assert (and (> x 0) (< x 5) (distinct x y)))", INTS)]
OTHER_TRUTH = "(assert (or (> x 3) (< y 0)))"


def output_line(custom_id: int, model: str, content: str) -> str:
    body = {
        "model": model,
        "choices": [{"index": 0, "message": {"content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1},
    }
    return json.dumps({"custom_id": str(custom_id), "response": {"status_code": 200, "body": body}})


def corpus_files(tmp_path: Path) -> list[Path]:
    """Two trials of every kind of answer to two rows and the hostile set: the second
    trial repeats the first word for word (half the answers are duplicates)."""
    lines = [
        output_line(i, f"m-{kind}", text)
        for i, (truth, constants) in enumerate(ROWS)
        for kind, text in answers_for(truth, constants)
    ]
    lines += [output_line(0, f"h-{kind}", text) for kind, text in hostile()]
    files = []
    for trial in (1, 2):
        path = tmp_path / f"trial{trial}.jsonl"
        path.write_text("\n".join(lines) + "\n")
        files.append(path)
    return files


def verdicts(result: Any) -> pl.DataFrame:
    rows = [
        (
            v.model,
            v.trial,
            v.custom_id,
            v.status.value,
            v.reason,
            v.repaired,
            v.direction,
            # A witness, not the verdict: which one Z3 finds already varies from run
            # to run with each worker's history; that there is one is the verdict's.
            v.counterexample is not None,
            v.correct_published,
            v.published_reason,
        )
        for v in result.verdicts
    ]
    return pl.DataFrame(rows, orient="row").sort(["column_0", "column_1", "column_2"])


@pytest.mark.anyio
async def test_the_same_verdicts_with_and_without_the_cache(tmp_path: Path) -> None:
    files = corpus_files(tmp_path)
    dataset = pl.DataFrame({"answer": [t for t, _ in ROWS], "constants": [c for _, c in ROWS]})
    plain = await rescore_files(files, dataset, trials=[1, 2], workers=2)
    path = tmp_path / "out" / VERDICT_CACHE_FILE
    first_cache = VerdictCache(path=path)
    first = await rescore_files(files, dataset, trials=[1, 2], workers=2, cache=first_cache)
    first_cache.close()
    # Trial 2 repeats trial 1: at least as many hits as there are stable answers.
    assert first_cache.hits >= len(first.verdicts) // 2 - len(hostile())
    # A second rescore into the same directory reads every answer from the file.
    again_cache = VerdictCache(path=path)
    loaded = len(again_cache)
    again = await rescore_files(files, dataset, trials=[1, 2], workers=2, cache=again_cache)
    again_cache.close()
    # Every outcome that does not depend on the machine came from the file.
    stable = sum(VerdictCache.keeps(CheckResult(v.status)) for v in plain.verdicts)
    stable += sum(
        VerdictCache.keeps(PublishedResult(bool(v.correct_published), v.published_reason or ""))
        and v.published_reason != NO_ANSWER
        for v in plain.verdicts
    )
    assert loaded > 0 and again_cache.hits >= stable
    assert verdicts(plain).equals(verdicts(first))
    assert verdicts(plain).equals(verdicts(again))
    assert len(plain.verdicts) == 2 * (sum(len(answers_for(*r)) for r in ROWS) + len(hostile()))


def test_bounded_and_only_machine_independent_outcomes() -> None:
    cache = VerdictCache(max_entries=3)
    keys = [bytes([i]) * 20 for i in range(6)]
    for key in keys[:5]:
        cache.put(key, CheckResult(Status.EQUIVALENT))
    assert len(cache) == 3 and cache.get(keys[0]) is None and cache.get(keys[4]) is not None
    cache.put(keys[5], CheckResult(Status.TIMEOUT, "killed after 10 s"))
    cache.put(keys[5], CheckResult(Status.RESOURCE_LIMIT, "memory"))
    cache.put(keys[5], CheckResult(Status.UNKNOWN, "verifier error"))
    cache.put(keys[5], PublishedResult(False, "z3 killed after 10 s"))
    assert cache.get(keys[5]) is None
    cache.put(keys[5], PublishedResult(True, EQUIVALENT))
    assert cache.get(keys[5]) == PublishedResult(True, EQUIVALENT)


def test_keys_follow_what_the_verdict_depends_on() -> None:
    def key(text: str, truth: str = ROWS[0][0], details: bool = True) -> bytes | None:
        return VerdictCache.check_key(text, truth, INTS, DEFAULT_LIMITS, details)

    answer = "(assert (> x 0))"
    # The words around the answer do not matter; the answer, its repairs, the row do.
    assert key(f"<think>a</think><answer>{answer}</answer>") == key(f"<answer>{answer}</answer>")
    assert key(f"<answer>{answer}</answer>") != key(f"<answer>```{answer}```</answer>")
    assert key(f"<answer>{answer}</answer>") != key(answer)  # untagged: a repair
    assert key(f"<answer>{answer}</answer>") != key(f"<answer>{answer}</answer>", OTHER_TRUTH)
    assert key(f"<answer>{answer}</answer>") != key(f"<answer>{answer}</answer>", details=False)
    assert key("x" * (DEFAULT_LIMITS.max_answer_bytes * 64 + 1)) is None


def test_a_file_from_other_code_is_not_read(tmp_path: Path) -> None:
    path = tmp_path / VERDICT_CACHE_FILE
    entry = {"k": "00" * 20, "r": {"status": "equivalent", "reason": ""}}
    path.write_text(json.dumps({"aeval_verdict_cache": 1, "code": "other"}) + "\n")
    path.write_text(path.read_text() + json.dumps(entry) + "\n")
    cache = VerdictCache(path=path)
    assert len(cache) == 0
    cache.put(b"\x01" * 20, CheckResult(Status.EQUIVALENT))
    cache.close()
    # Started afresh with this code's header; a torn last line is skipped.
    with path.open("a") as handle:
        handle.write('{"k": "02')
    reread = VerdictCache(path=path)
    assert len(reread) == 1 and reread.get(b"\x01" * 20) == CheckResult(Status.EQUIVALENT)


def verdict(result: CheckResult) -> tuple[Any, ...]:
    return (result.status, result.reason, result.repaired, result.direction)


class CountingPool:
    """A real pool, counting the checks that reach it."""

    def __init__(self, pool: VerifierPool) -> None:
        self.pool = pool
        self.limits = pool.limits
        self.workers = pool.workers
        self.sent: list[str | None] = []

    async def check(self, text: str | None, *args: Any, **kwargs: Any) -> CheckResult:
        self.sent.append(text)
        return await self.pool.check(text, *args, **kwargs)


@pytest.mark.anyio
async def test_a_reward_call_checks_each_distinct_answer_once() -> None:
    truth, constants = ROWS[0]
    good = f"<answer>{truth}</answer>"
    wrong = "<answer>(assert (> x 0))</answer>"
    group = [good, f"<think>same</think>{good}", wrong, good, wrong, "no answer", "no answer"]
    checks = [(text, truth, constants) for text in group]
    schedule = Schedule(deadline_s=10.0)
    async with VerifierPool(workers=1) as pool:
        counting = CountingPool(pool)
        alone = [await pool.check(t, truth, constants, details=False) for t in group]
        outcome = await check_all(counting, checks, schedule)  # type: ignore[arg-type]
        assert counting.sent == [good, wrong, "no answer"]  # the first of each kind
        assert [verdict(r) for r in outcome.results] == [verdict(r) for r in alone]
        cache = VerdictCache()
        await check_all(counting, checks, schedule, cache)  # type: ignore[arg-type]
        again = await check_all(counting, checks, schedule, cache)  # type: ignore[arg-type]
        assert counting.sent == [good, wrong, "no answer"] * 2  # the second call: no check
        assert [verdict(r) for r in again.results] == [verdict(r) for r in alone]
        assert again.statuses == outcome.statuses


def test_rescore_writes_the_cache_into_out_and_no_cache_skips_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from aeval.cli import main

    data = tmp_path / "rows.jsonl"
    row = {"question": "q", "answer": ROWS[0][0], "constants": INTS}
    data.write_text(json.dumps(row) + "\n")
    answers = tmp_path / "out.jsonl"
    answers.write_text(output_line(0, "m", f"<answer>{ROWS[0][0]}</answer>") + "\n")
    base = ["rescore", "--dataset", str(data), "--workers", "1", "--quiet"]
    assert main([*base, "--out", str(tmp_path / "a"), str(answers)]) == 0
    assert (tmp_path / "a" / VERDICT_CACHE_FILE).stat().st_size > 0
    assert main([*base, "--no-cache", "--out", str(tmp_path / "b"), str(answers)]) == 0
    assert not (tmp_path / "b" / VERDICT_CACHE_FILE).exists()
    capsys.readouterr()
    code = main([*base, "--no-published", "--published-binary", "--out", "c", str(answers)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "--published-binary" in err[0]


def test_the_file_is_compacted_on_load_and_stays_as_large_as_the_cache(tmp_path: Path) -> None:
    path = tmp_path / VERDICT_CACHE_FILE
    keys = [bytes([i]) * 20 for i in range(6)]
    for _ in range(3):  # three sessions, each checking every key again after evictions
        cache = VerdictCache(max_entries=2, path=path)
        for key in keys:
            cache.put(key, CheckResult(Status.EQUIVALENT))
        cache.close()
    # Loaded: the two most recent entries; the file then holds those and its header only.
    reread = VerdictCache(max_entries=2, path=path)
    assert len(reread) == 2 and reread.get(keys[-1]) is not None
    assert len(path.read_text().splitlines()) == 1 + 2
    reread.close()


class RecordingPool(CountingPool):
    """A real pool, recording every call that reaches it (checks, published, both)."""

    def __init__(self, pool: VerifierPool) -> None:
        super().__init__(pool)
        self.published = pool.published
        self.calls: list[str] = []

    async def check(self, text: str | None, *args: Any, **kwargs: Any) -> CheckResult:
        self.calls.append("check")
        return await super().check(text, *args, **kwargs)

    async def check_published(self, *args: Any) -> PublishedResult:
        self.calls.append("published")
        return await self.pool.check_published(*args)

    async def check_both(self, *args: Any, **kwargs: Any) -> tuple[CheckResult, PublishedResult]:
        self.calls.append("both")
        return await self.pool.check_both(*args, **kwargs)


@pytest.mark.anyio
async def test_the_same_check_asked_at_once_reaches_the_pool_once() -> None:
    # Concurrent callers with one answer: the first checks it, the others wait for
    # its result (the in-flight de-duplication), and everyone gets the same verdict.
    truth, constants = ROWS[0]
    good = f"<answer>{truth}</answer>"
    async with VerifierPool(workers=2) as pool:
        recording = RecordingPool(pool)
        async with CachedChecker(VerdictCache(), recording) as cached:  # type: ignore[arg-type]
            results: list[CheckResult] = []

            async def ask(text: str) -> None:
                results.append(await cached.check(text, truth, constants))

            async with anyio.create_task_group() as tg:
                for text in [good, f"<think>{0}</think>{good}", good, good]:
                    tg.start_soon(ask, text)
    assert recording.calls == ["check"]
    assert len(results) == 4 and {r.status for r in results} == {Status.EQUIVALENT}


@pytest.mark.anyio
async def test_check_both_asks_once_for_both_readings_then_answers_from_the_cache() -> None:
    truth, constants = ROWS[0]
    good = f"<answer>{truth}</answer>"
    async with VerifierPool(workers=1, published=True) as pool:
        recording = RecordingPool(pool)
        cache = VerdictCache()
        async with CachedChecker(cache, recording) as cached:  # type: ignore[arg-type]
            first = await cached.check_both(good, truth, constants)
            again = await cached.check_both(good, truth, constants)
            only_check = await cached.check(good, truth, constants)
    assert recording.calls == ["both"]  # one round trip for both readings, then none
    assert first == again
    assert first[0].status is Status.EQUIVALENT and first[1].correct
    assert only_check == first[0]
    assert cache.hits == 3 and cache.misses == 2
