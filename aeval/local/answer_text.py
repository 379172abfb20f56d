"""How a local model's answers read: a short reasoning, then the answer, in the prompt's tags.

Also the answer to a question no benchmark row matches: plausible, and wrong.
"""

from __future__ import annotations

import re

__all__ = ["plausible_wrong_answer", "reasoning", "tagged"]

_EXAMPLE = re.compile(r"^N=\d+: (\(assert .*\))\s*$", re.MULTILINE)


def plausible_wrong_answer(text: str) -> str:
    """What a model would write for a question we do not know: the last example.

    The question lists the constraint for smaller sizes; repeating the largest
    of them is the classic wrong answer (it ignores the new size).
    """
    examples = _EXAMPLE.findall(text)
    body = examples[-1] if examples else "(assert (and (>= in 0) (< in 10)))"
    return tagged(reasoning(text), body)


def reasoning(text: str) -> str:
    size = re.findall(r"N=(\d+)\?", text)
    target = f"N={size[-1]}" if size else "the requested size"
    return (
        "The examples grow with the input size; I extend the pattern of the largest "
        f"example to {target}, keeping every constraint the worst-case path needs."
    )


def tagged(think: str, answer: str) -> str:
    return f"<think>{think}</think><answer>{answer}</answer>"
