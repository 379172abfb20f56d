"""The repair loop as a verifiers 0.4 taskset and multi-turn env (issue #44, docs/repair.md).

verifiers 0.4 removed the classic ``MultiTurnEnv`` (``verifiers.legacy``, which
:mod:`aeval.interop.verifiers_env` is written against) and kept its ``verifiers.v1``
stack, where a multi-turn environment is an ``Env`` whose ``run(task, agents)`` holds an
agent's rollout open turn by turn (``agent.interaction(task)``; each ``turn(message)``
sends one user message and runs the model once; verifiers 0.4.0
``verifiers/v1/agent.py``, ``Interaction``). This module is that shape:

- :class:`RepairTaskset` loads the benchmark rows as tasks: the prompt ``aeval run``
  sends (question and instruction in the protocol's order), the ground truth and the
  declarations (``verifiers/v1/taskset.py``: ``Taskset.load``);
- :class:`RepairEnv` plays one ``solver`` seat (a tool-less chat loop: verifiers' own
  ``null`` harness) on a task: it takes the model's answer, judges it with the reward's
  judge (:class:`~aeval.reward.repair.RepairRounds`), and answers with aeval's feedback
  message as the next user turn, until an ``equivalent`` answer, an answer no feedback
  repairs, or ``rounds`` answers, as ``aeval run --rounds`` does. The reward
  ``equivalence`` is the last answer's score; ``solved_round`` (0 when unsolved) is a
  metric; each round's verdict is in the trace's ``info["aeval_rounds"]``.

verifiers 0.4 publishes an environment as a package whose ``__all__`` exports its
``Taskset`` (and, for its own control flow, its ``Env``) subclass;
``vf.load_environment(EnvConfig)`` imports the package named by the taskset id and
builds the env (``verifiers/v1/utils/loaders.py``). The package is
``environments/aeval_repair`` (taskset id ``aeval-repair``): :func:`env_config` and
:func:`load_environment` build its config and env the same way from keyword arguments.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal

from aeval.dataset import demo_dataset_path, load_dataset
from aeval.prompts import PromptSettings, format_prompt
from aeval.reward.repair import DEFAULT_ROUNDS, RepairRounds, RepairStep

try:
    import verifiers.v1 as vf
    from pydantic import Field
    from verifiers.v1.types import content_text
except ImportError as err:  # pragma: no cover - depends on the environment
    raise ImportError(
        "aeval's verifiers taskset needs verifiers 0.4: pip install 'aeval[verifiers]'"
    ) from err

__all__ = [
    "TASKSET_ID",
    "RepairData",
    "RepairEnv",
    "RepairEnvConfig",
    "RepairTask",
    "RepairTaskset",
    "RepairTasksetConfig",
    "env_config",
    "load_environment",
]

TASKSET_ID = "aeval-repair"


class RepairData(vf.TaskData):
    """One benchmark row: ``prompt`` (and ``system_prompt``) as ``aeval run`` sends
    them, the ground truth and the declarations the judge parses answers against."""

    answer: str
    constants: str


class RepairTask(vf.Task[RepairData, vf.State, vf.TaskConfig]):
    """A benchmark row; the env's ``run`` judges it round by round."""

    @property
    def key(self) -> str:
        # the benchmark's item id: stable across runs (verifiers' default is a hash)
        return str(self.data.id)


class RepairTasksetConfig(vf.TasksetConfig):
    """Which rows (``--env.taskset.*``), as ``aeval run`` selects them."""

    dataset: str = "demo"
    """A hub id, a file, or ``demo`` (the bundled synthetic benchmark)."""
    tier: str | None = None
    sample_ids: str | None = None
    limit: int | None = None
    protocol: str = "default"
    system: str | None = None


# The keywords of env_config that select rows: the fields this taskset's config adds.
_ROW_FIELDS = tuple(
    name for name in RepairTasksetConfig.model_fields if name not in vf.TasksetConfig.model_fields
)


class RepairTaskset(vf.Taskset[RepairTask, RepairTasksetConfig]):
    """The benchmark rows as repair tasks."""

    def load(self) -> Iterator[RepairTask]:
        config = self.config
        settings = PromptSettings.for_protocol(config.protocol, system=config.system)
        source = str(demo_dataset_path()) if config.dataset == "demo" else config.dataset
        frame = load_dataset(source, tier=config.tier, ids=config.sample_ids, limit=config.limit)
        for row in frame.iter_rows(named=True):
            data = RepairData(
                id=str(row["id"]),
                name=f"warp-{row['id']}",
                prompt=format_prompt(row["question"], settings),
                system_prompt=settings.system,
                answer=row["answer"],
                constants=row["constants"],
            )
            yield RepairTask(data, config.task)


class RepairEnvConfig(vf.EnvConfig):
    """The repair protocol (``--env.rounds``, ``--env.feedback`` …) and its one seat."""

    solver: vf.AgentConfig = vf.AgentConfig(harness={"id": "null"}, runtime={"type": "subprocess"})
    """The model under training or evaluation, in verifiers' tool-less chat loop (the
    ``null`` harness: it runs no model-directed code, so a local subprocess hosts it
    where verifiers' default is a remote sandbox; ``--env.solver.runtime.type`` changes
    it)."""
    rounds: int = Field(DEFAULT_ROUNDS, ge=1)
    """The most model turns (K), as ``aeval run --rounds``."""
    feedback: Literal["retry", "reason", "counterexample"] = "counterexample"
    """What a repair round tells, as ``aeval run --feedback``."""
    feedback_file: str | None = None
    """A feedback template, as ``aeval run --feedback-file``."""
    reward: dict[str, Any] = Field(default_factory=dict)
    """The judge's settings (:class:`~aeval.reward.EquivalenceReward`: ``reading``,
    ``workers`` …)."""


def _answer_text(messages: Any) -> str | None:
    """The segment's last assistant message as received (verifiers' ``last_reply``
    strips it)."""
    for message in reversed(list(messages)):
        if getattr(message, "role", None) == "assistant":
            content = message.content
            return content if isinstance(content, str) else content_text(content)
    return None


class RepairEnv(vf.Env[RepairEnvConfig]):
    """aeval's repair rounds as a verifiers 0.4 env (see the module docstring)."""

    repair: RepairRounds | None = None

    async def start(self) -> None:
        config = self.config
        self.repair = RepairRounds(
            config.rounds,
            config.feedback,
            feedback_file=config.feedback_file,
            **dict(config.reward),
        )

    async def stop(self) -> None:
        if self.repair is not None:
            self.repair.close()
            self.repair = None

    async def run(self, task: RepairTask, agents: Any) -> None:
        repair = self.repair
        if repair is None:  # start() runs before any rollout (Env.serving)
            raise RuntimeError("the repair env was asked to run outside serving()")
        steps: list[RepairStep] = []
        async with agents.solver.interaction(task) as interaction:
            segment = await interaction.turn()  # the prompted task speaks first
            while not segment.terminated:
                step = await repair.judge(
                    _answer_text(segment.messages),
                    task.data.answer,
                    task.data.constants,
                    len(steps) + 1,
                )
                steps.append(step)
                if step.done or step.feedback is None:
                    break
                segment = await interaction.turn(step.feedback)
        trace = interaction.trace
        trace.record_reward("equivalence", float(steps[-1].score) if steps else 0.0, 1.0)
        trace.record_metric("solved_round", float(next((s.round for s in steps if s.solved), 0)))
        trace.info["aeval_rounds"] = [step.as_json() for step in steps]


def env_config(**options: Any) -> RepairEnvConfig:
    """The env config of the taskset id ``aeval-repair`` from keywords, narrowed by
    verifiers itself (``vf.resolve_env_config``: the package must be importable as
    ``aeval_repair``, i.e. ``environments/aeval_repair`` installed), as ``vf-eval``'s
    ``--env.*`` flags would build it: the keywords of verifiers 0.3's
    :func:`aeval.interop.verifiers_env.load_environment`, with the same defaults (the
    fields of :class:`RepairTasksetConfig` and :class:`RepairEnvConfig`), and the env
    config's own (``solver`` …, ``timeout``, ``retries``).
    """
    rows = {name: options.pop(name) for name in _ROW_FIELDS if name in options}
    options["reward"] = dict(options.get("reward") or {})
    config = vf.resolve_env_config({"taskset": {"id": TASKSET_ID, **rows}, **options})
    if not isinstance(config, RepairEnvConfig):
        raise TypeError(f"{TASKSET_ID} resolved to {type(config).__name__}, not RepairEnvConfig")
    return config


def load_environment(**options: Any) -> RepairEnv:
    """The env verifiers 0.4 builds for :func:`env_config` ``(**options)``
    (``vf.load_environment``)."""
    env = vf.load_environment(env_config(**options))
    if not isinstance(env, RepairEnv):
        raise TypeError(f"{TASKSET_ID} loaded {type(env).__name__}, not RepairEnv")
    return env
