"""How hard a model thinks: one vocabulary of effort levels and thinking budgets.

A run sets it for every model (``--reasoning-effort LEVEL``) or per model, as a
variant: ``MODEL@LEVEL`` or ``MODEL@N`` (a thinking budget of N tokens), e.g.
``openai/gpt-5@low,openai/gpt-5@high,anthropic/claude-sonnet-4-5@16000``. The
levels are OpenAI's (``openai.types.shared.ReasoningEffort``, openai 3.57: none,
minimal, low, medium, high, xhigh, max), the widest set any provider defines; each
provider's spec module writes a level into its own field, or refuses a level it
lacks in one line naming what it takes (docs/reasoning.md has the table).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from aeval.errors import ConfigError

__all__ = ["EFFORTS", "Effort", "Reasoning", "check_effort", "parse_reasoning"]

Effort = Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"]
EFFORTS: tuple[Effort, ...] = get_args(Effort)


@dataclass(frozen=True, slots=True)
class Reasoning:
    """A variant's setting: an effort level, or a thinking budget in tokens (one of them)."""

    effort: Effort | None = None
    budget: int | None = None

    def __post_init__(self) -> None:
        if (self.effort is None) == (self.budget is None):
            raise ConfigError("a reasoning setting is an effort level or a budget, not both")
        if self.effort is not None:
            check_effort(self.effort, "reasoning effort")
        if self.budget is not None and self.budget < 1:
            raise ConfigError(f"a thinking budget must be at least 1 token, got {self.budget}")

    @property
    def label(self) -> str:
        """What follows the ``@`` of a variant's name."""
        return self.effort if self.effort is not None else str(self.budget)


def check_effort(value: str, where: str) -> Effort:
    """``value`` as an :data:`Effort`, or a ConfigError naming ``where`` and the levels."""
    if value not in EFFORTS:
        raise ConfigError(f"{where} {value!r}: expected one of {', '.join(EFFORTS)}")
    return value


def parse_reasoning(text: str, model: str) -> Reasoning:
    """The setting after a variant's ``@``: a level, or a budget (digits).

    :raises ConfigError: anything else, naming the model and what ``@`` takes.
    """
    if text.isdigit():
        return Reasoning(budget=int(text))
    if text.lower() in EFFORTS:
        return Reasoning(effort=check_effort(text.lower(), model))
    raise ConfigError(
        f"model {model!r}: after '@' give an effort level ({', '.join(EFFORTS)}) "
        "or a thinking budget in tokens (e.g. @8192)"
    )
