"""The WARP study's reasons for a published-reading verdict, and its categories of them.

Vocabulary, below every package that names them: the verifier writes these reasons
(:mod:`aeval.verify.published`), a verdict derives its category from one
(:mod:`aeval.verdicts`), and the reports count by category.
"""

from __future__ import annotations

__all__ = [
    "EQUIVALENT",
    "NOT_IMPLIED",
    "NOT_IMPLYING",
    "NO_ANSWER",
    "STUDY_CATEGORIES",
    "UNPARSED",
    "study_category",
]

# The study's own reasons, verbatim, so verdicts compare line by line with its outputs.
NO_ANSWER = "Failed to extract response."
UNPARSED = "Could not parse results correctly."
NOT_IMPLIED = "Original does not imply generated."
NOT_IMPLYING = "Generated does not imply original."
EQUIVALENT = "Constraints are logically equivalent."

# The study's aggregation (dannkoh/WARP-evaluation, src/aggregate.py) sorts its
# evaluator's reasons into these categories by exact match; any other reason
# (aeval's refusals, a z3 killed at the time limit) is in none of them, as the
# study's tables would have left it out.
STUDY_CATEGORIES: dict[str, str] = {
    EQUIVALENT: "correct",
    NOT_IMPLIED: "error_semantics",
    NOT_IMPLYING: "error_semantics",
    UNPARSED: "error_syntax",
    NO_ANSWER: "error_output_formatting",
}


def study_category(reason: str | None) -> str | None:
    """The study's category of a published-reading reason: ``correct``,
    ``error_semantics``, ``error_syntax``, ``error_output_formatting``, or None."""
    return STUDY_CATEGORIES.get(reason) if reason is not None else None
