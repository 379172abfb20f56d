"""The benchmark as an lm-evaluation-harness task, scored by aeval's judge.

``lm_eval --tasks warp --include_path "$(python -m aeval.interop.lm_eval_task)"``
loads the task files shipped in :data:`TASKS_DIR`: ``warp`` (every row),
``warp_small``/``warp_medium``/``warp_large`` (one tier each) and the group
``warp_tiers`` (the three tiers, aggregated by size). The harness (0.4.13 on
PyPI; EleutherAI/lm-evaluation-harness@4e7e0d47, ``lm_eval/tasks/manager.py``)
finds external tasks only through ``--include_path``: it has no entry-point
mechanism for task plugins.

What each piece is, in the harness's terms:

- **dataset**: ``custom_dataset`` (``lm_eval/config/task.py``, called in
  ``ConfigurableTask.download`` with the task's metadata as keyword arguments)
  is :func:`load_docs`, aeval's own loader: a hub id (default
  ``dannkoh/invaR1ant-benchmark``), a ``.parquet``/``.jsonl``/``.csv`` file, a
  ``save_to_disk`` directory, or ``demo``. Choose with ``--metadata
  '{"dataset": "/data/warp.parquet"}'`` (the hub is one option among those,
  not the only one, so an offline machine reads a local copy without an
  override file). ``protocol`` (``default`` or ``warp-2025``) and the judge's
  ``check_timeout``/``memory_mb``/``workers`` come the same way.
- **prompt**: each doc's ``prompt`` is :func:`aeval.prompts.format_prompt` of
  its question, the user message aeval sends; ``--apply_chat_template`` makes
  it the one user message (``--system_instruction`` adds a system message).
- **generation**: ``generation_kwargs`` in ``warp.yaml`` (no stop sequence,
  greedy, ``max_gen_toks``), each overridable with ``--gen_kwargs``.
- **metric**: :func:`process_results` checks the answer with Z3 in aeval's
  killable worker pool under its limits and returns the three readings
  (``lenient``, ``strict``, ``published``) as 0/1; ``aggregation: mean`` gives
  the harness's closed-form standard error (``mean_stderr`` in
  ``lm_eval/api/metrics.py``, used whenever ``--bootstrap_iters`` > 0).

**The pool's life.** The harness has no teardown hook for a task, so the pool
is shared by every task of the process: it starts with the first answer to
check (:class:`~aeval.reward.runtime.PoolRuntime`, its own event loop on a
daemon thread) and its workers are killed at interpreter exit (``atexit``),
or by :func:`close_judges`.
"""

from __future__ import annotations

import atexit
import threading
from pathlib import Path
from typing import Any

from aeval.dataset import DEFAULT_DATASET, demo_dataset_path, load_dataset
from aeval.errors import ConfigError
from aeval.prompts import PROTOCOLS, PromptSettings, format_prompt
from aeval.reward.runtime import PoolRuntime
from aeval.verdicts import Status
from aeval.verify import DEFAULT_LIMITS, VerifyLimits
from aeval.verify.checker import Checker

__all__ = [
    "READINGS",
    "TASKS_DIR",
    "close_judges",
    "doc_to_text",
    "load_docs",
    "process_results",
    "read_answer",
]

# The task files (YAML and the module their ``!function``s name).
TASKS_DIR = Path(__file__).with_name("lm_eval_tasks")

# The three readings of one answer: the task's metrics, in this order.
READINGS = ("lenient", "strict", "published")

DEMO = "demo"  # dataset=demo: the small synthetic benchmark bundled with aeval

# Columns each doc carries for the judge, so a logged sample says how it was checked.
_TIMEOUT_FIELD = "check_timeout_s"
_MEMORY_FIELD = "memory_mb"


class _Judges:
    """One pool per (limits) the process has used; all killed at exit."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._workers: int | None = None
        self._pools: dict[VerifyLimits, PoolRuntime] = {}

    def configure(self, workers: int | None) -> None:
        with self._lock:
            self._workers = workers

    def get(self, limits: VerifyLimits) -> PoolRuntime:
        with self._lock:
            runtime = self._pools.get(limits)
            if runtime is None:
                runtime = self._pools[limits] = PoolRuntime(limits, self._workers)
            return runtime

    def pids(self) -> tuple[int, ...]:
        with self._lock:
            return tuple(pid for runtime in self._pools.values() for pid in runtime.pids)

    def close(self) -> None:
        with self._lock:
            pools = list(self._pools.values())
        for runtime in pools:
            runtime.close()


# The harness calls process_results with a doc and the answers only: the pool a
# whole harness run shares has to live at module level, closed at exit.
_JUDGES = _Judges()
atexit.register(_JUDGES.close)


def close_judges() -> None:
    """Kill the judge's workers now (a later answer starts them again)."""
    _JUDGES.close()


def judge_pids() -> tuple[int, ...]:
    """Process ids of the judge's live workers (empty before the first answer)."""
    return _JUDGES.pids()


def _optional_number(name: str, value: Any, kind: type[int] | type[float]) -> Any:
    if value is None:
        return None
    try:
        number = kind(value)
    except (TypeError, ValueError):
        raise ConfigError(f"warp task metadata {name}={value!r}: expected a number") from None
    if number <= 0:
        raise ConfigError(f"warp task metadata {name}={value!r}: must be positive")
    return number


def load_docs(
    dataset: str = DEFAULT_DATASET,
    protocol: str = "default",
    tier: str | None = None,
    check_timeout: float | None = None,
    memory_mb: int | None = None,
    workers: int | None = None,
    **_harness: Any,
) -> Any:
    """The harness's ``custom_dataset``: the benchmark as a ``DatasetDict`` with one
    ``test`` split, each row with its ``prompt`` and the judge's limits.

    The harness passes the task's whole metadata (its ``version``, the model's
    arguments, ``--metadata``); keys other than the parameters are its own and
    are ignored.

    :raises ConfigError: an unknown protocol or a bad limit.
    :raises DatasetError: the dataset cannot be read or the tier names no row.
    """
    import datasets

    if protocol not in PROTOCOLS:
        raise ConfigError(
            f"warp task metadata protocol={protocol!r}: expected one of {', '.join(PROTOCOLS)}"
        )
    timeout = _optional_number("check_timeout", check_timeout, float)
    memory = _optional_number("memory_mb", memory_mb, int)
    _JUDGES.configure(_optional_number("workers", workers, int))
    settings = PromptSettings.for_protocol(protocol)
    source = str(demo_dataset_path()) if dataset == DEMO else dataset
    frame = load_dataset(source, tier=tier)
    columns = frame.to_dict(as_series=False)
    columns["prompt"] = [format_prompt(q, settings) for q in columns["question"]]
    columns[_TIMEOUT_FIELD] = [timeout or DEFAULT_LIMITS.timeout_s] * frame.height
    columns[_MEMORY_FIELD] = [memory or DEFAULT_LIMITS.memory_mb] * frame.height
    return datasets.DatasetDict({"test": datasets.Dataset.from_dict(columns)})


def doc_to_text(doc: dict[str, Any]) -> str:
    """The user message of one row, as aeval sends it."""
    return str(doc["prompt"])


def read_answer(results: list[Any]) -> str | None:
    """The answer the harness hands ``process_results``: its filtered response."""
    first = results[0] if results else None
    if isinstance(first, list):  # a filter that keeps every repeat
        first = first[0] if first else None
    return first if isinstance(first, str) else None


def _limits(doc: dict[str, Any]) -> VerifyLimits:
    """The limits ``aeval rescore --check-timeout S --memory-mb MB`` checks under."""
    timeout = doc.get(_TIMEOUT_FIELD) or DEFAULT_LIMITS.timeout_s
    memory = doc.get(_MEMORY_FIELD) or DEFAULT_LIMITS.memory_mb
    return VerifyLimits.with_budget(float(timeout), memory_mb=int(memory))


def process_results(doc: dict[str, Any], results: list[Any]) -> dict[str, int]:
    """The harness's ``process_results``: the answer's three readings, 1 correct, 0 not."""
    text = read_answer(results)
    runtime = _JUDGES.get(_limits(doc))

    async def judge(pool: object) -> Any:
        assert isinstance(pool, Checker)  # this runtime's own pool, never the machine's
        return await pool.check_both(text, str(doc["answer"]), str(doc["constants"]))

    check, published = runtime.call(judge)
    equivalent = check.status is Status.EQUIVALENT
    return {
        "lenient": int(equivalent),
        "strict": int(equivalent and check.repaired is None),
        "published": int(published.correct),
    }


if __name__ == "__main__":  # the directory to give ``lm_eval --include_path``
    print(TASKS_DIR)
