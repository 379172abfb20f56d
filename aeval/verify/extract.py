"""Answer extraction: find the answer the instruction asks for, strictly or by a named repair.

The instruction asks for the constraint inside ``<answer>…</answer>``. *Strict*
extraction accepts exactly that: one answer block (or several identical ones)
outside the model's ``<think>`` draft. Everything else that real models produce
and that can still be read unambiguously is a *lenient repair*, and the repair
is named in the result so reports can show strict and lenient accuracy side by
side. Nothing is repaired silently.

Which block wins when there are several different ones: the **last** complete
block. Models that revise themselves ("…wait, that is wrong. <answer>…") put
the final word last, and the instruction asks for one final answer; taking the
first would score a draft the model itself rejected. It is still a repair
(``last_of_several_answers``), so strict accuracy does not count it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Extraction", "Repair", "extract_answer"]


class Repair:
    """Names of the lenient repairs (the ``repaired`` column joins them with ``+``)."""

    LAST_OF_SEVERAL = "last_of_several_answers"
    UNCLOSED_ANSWER = "unclosed_answer"
    UNTAGGED_ANSWER = "untagged_answer"
    CODE_FENCE = "code_fence"


@dataclass(frozen=True, slots=True)
class Extraction:
    """The answer text to sanitise (``None`` if there is none) and the repairs used."""

    text: str | None
    repairs: tuple[str, ...] = ()
    reason: str = ""  # why there is no answer, when ``text`` is None


# Tags are found with one linear scan each; a non-greedy "<answer>(.*?)</answer>"
# is quadratic on hostile text such as "<answer>" repeated 10,000 times.
_THINK_TAG = re.compile(r"<(/?)think>", re.IGNORECASE)
_ANSWER_TAG = re.compile(r"<(/?)answer>", re.IGNORECASE)
# ``` or ```lisp / ```smt2 / ```smt-lib fence markers, wherever they sit.
_FENCE = re.compile(r"```[A-Za-z0-9_+.-]*")
_FIRST_ASSERT = re.compile(r"\(\s*assert\b")


def _blocks(text: str, tag: re.Pattern[str]) -> tuple[list[tuple[int, int, int, int]], int, int]:
    """Pair opening and closing tags in one pass.

    Returns the blocks as (open start, body start, body end, close end), the
    end of the last closing tag that had no opening tag (-1 if none), and the
    body start of an opening tag left unclosed at the end (-1 if none). A
    closing tag pairs with the latest opening tag before it.
    """
    blocks: list[tuple[int, int, int, int]] = []
    lone_close = -1
    pending: tuple[int, int] | None = None
    for m in tag.finditer(text):
        if m.group(1):  # closing
            if pending is None:
                lone_close = m.end()
            else:
                blocks.append((pending[0], pending[1], m.start(), m.end()))
                pending = None
        else:
            pending = (m.start(), m.end())
    return blocks, lone_close, (pending[1] if pending else -1)


def _outside_think(text: str) -> str:
    blocks, lone_close, _ = _blocks(text, _THINK_TAG)
    # Some chat templates open <think> in the prompt, so only "</think>" shows:
    # everything before it is draft.
    start = lone_close if lone_close >= 0 else 0
    kept, pos = [], start
    for open_start, _, _, close_end in blocks:
        if close_end <= start:
            continue
        kept.append(text[pos:open_start])
        pos = close_end
    kept.append(text[pos:])
    return " ".join(kept)


def _strip_fences(body: str, repairs: list[str]) -> str:
    if "```" in body:
        body = _FENCE.sub(" ", body)
        repairs.append(Repair.CODE_FENCE)
    return body


def extract_answer(response_text: str | None) -> Extraction:
    """Take the answer out of a model response.

    Returns an :class:`Extraction` whose ``text`` is ``None`` (with a ``reason``)
    when the response holds no answer at all. Never raises on any string.
    """
    if response_text is None or not response_text.strip():
        return Extraction(None, reason="empty response")
    text = _outside_think(response_text)
    repairs: list[str] = []
    spans, _, unclosed = _blocks(text, _ANSWER_TAG)
    if spans:
        bodies = [text[start:end] for _, start, end, _ in spans]
        body = bodies[-1]
        if len({" ".join(b.split()) for b in bodies}) > 1:
            repairs.append(Repair.LAST_OF_SEVERAL)
    else:
        if unclosed >= 0:
            # Output cut off (max tokens) or degenerated before "</answer>".
            body = text[unclosed:]
            repairs.append(Repair.UNCLOSED_ANSWER)
        else:
            first = _FIRST_ASSERT.search(text)
            if first is None:
                return Extraction(None, reason="no <answer> block in the response")
            body = text[first.start() :]
            repairs.append(Repair.UNTAGGED_ANSWER)
    body = _strip_fences(body, repairs).strip()
    if not body:
        return Extraction(None, tuple(repairs), reason="the <answer> block is empty")
    return Extraction(body, tuple(repairs))
