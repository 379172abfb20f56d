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

The ``<think>`` draft is read only when the text outside it holds no answer at
all: then the last ``<answer>`` block inside the draft is taken
(``answer_in_think``). A block outside ``<think>`` always wins, because the
draft is where the model may still change its mind.
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
    ANSWER_IN_THINK = "answer_in_think"
    # Made by the sanitiser (aeval.verify.sanitiser), named here with the others.
    CLOSED_PARENS = "closed_parens"
    DROPPED_EXTRA_PARENS = "dropped_extra_parens"
    SPLIT_ASSERT = "split_assert"
    WRAPPED_BARE_TERM = "wrapped_bare_term"


@dataclass(frozen=True, slots=True)
class Extraction:
    """The answer text to sanitise (``None`` if there is none) and the repairs used."""

    text: str | None
    repairs: tuple[str, ...] = ()
    reason: str = ""  # why there is no answer, when ``text`` is None

    @property
    def may_be_cut(self) -> bool:
        """Whether the answer is simply the rest of the response (no closing tag ended it).

        Such an answer may have been cut off by the token limit, so the
        sanitiser closes at most a couple of parentheses missing at its end
        rather than any number (see :func:`aeval.verify.sanitiser.sanitise`).
        """
        return Repair.UNCLOSED_ANSWER in self.repairs or Repair.UNTAGGED_ANSWER in self.repairs


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


def _split_think(text: str) -> tuple[str, list[tuple[int, int]]]:
    """The text outside the ``<think>`` draft (joined), and the draft's spans in order."""
    blocks, lone_close, _ = _blocks(text, _THINK_TAG)
    # Some chat templates open <think> in the prompt, so only "</think>" shows:
    # everything before it is draft.
    start = lone_close if lone_close >= 0 else 0
    kept, pos = [], start
    draft = [(0, start)] if start else []
    for open_start, _, _, close_end in blocks:
        if close_end <= start:
            continue
        kept.append(text[pos:open_start])
        draft.append((open_start, close_end))
        pos = close_end
    kept.append(text[pos:])
    return " ".join(kept), draft


def _last_block(bodies: list[str], repairs: list[str]) -> str:
    if len({" ".join(b.split()) for b in bodies}) > 1:
        repairs.append(Repair.LAST_OF_SEVERAL)
    return bodies[-1]


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
    text, draft = _split_think(response_text)
    repairs: list[str] = []
    spans, _, unclosed = _blocks(text, _ANSWER_TAG)
    if spans:
        body = _last_block([text[start:end] for _, start, end, _ in spans], repairs)
    elif unclosed >= 0:
        # Output cut off (max tokens) or degenerated before "</answer>".
        body = text[unclosed:]
        repairs.append(Repair.UNCLOSED_ANSWER)
    elif first := _FIRST_ASSERT.search(text):
        body = text[first.start() :]
        repairs.append(Repair.UNTAGGED_ANSWER)
    else:
        # Nothing outside the draft: the model's last answer block inside it.
        # Each piece is paired on its own, so tags never pair across pieces.
        any_tag = draft and _ANSWER_TAG.search(response_text)
        pieces = [response_text[a:b] for a, b in draft] if any_tag else []
        inside = [piece[a:b] for piece in pieces for _, a, b, _ in _blocks(piece, _ANSWER_TAG)[0]]
        if not inside:
            if any(_ANSWER_TAG.search(piece) for piece in pieces):
                why = "no <answer> block outside <think>, and none closed inside it"
            else:
                why = "no <answer> block in the response"
            return Extraction(None, reason=why)
        repairs.append(Repair.ANSWER_IN_THINK)
        body = _last_block(inside, repairs)
    body = _strip_fences(body, repairs).strip()
    if not body:
        return Extraction(None, tuple(repairs), reason="the <answer> block is empty")
    return Extraction(body, tuple(repairs))
