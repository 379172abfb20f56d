"""Constructed model answers for differential tests and benches: every repair kind,
every verdict category, hostile input, and a held-out-like mix of real-looking outputs.

Each generator takes a row's ground truth (one ``(assert T)``, as every WARP
row has) and declarations, and returns whole response texts, so extraction
runs as on a model's output.
"""

from __future__ import annotations

import random
import re

import z3

from aeval.verify.declarations import parse_declarations

_NAME = re.compile(r"\b((?:cell|in|x|y|n|a|b)[A-Za-z0-9_]*)\b")


def _term(truth: str) -> str:
    text = truth.strip()
    assert text.startswith("(assert") and text.endswith(")"), text[:60]
    return text[len("(assert") : -1].strip()


def truth_conjuncts(truth: str, constants: str, ctx: z3.Context | None = None) -> list[z3.BoolRef]:
    """A (trusted) truth's conjunction flattened, in order; iteratively, since the deepest
    truth nests 651 levels."""
    ctx = ctx or z3.Context()
    decls = parse_declarations(constants, ctx)
    out, stack = [], [z3.And(*z3.parse_smt2_string(truth, decls=decls, ctx=ctx))]
    while stack:
        f = stack.pop()
        if z3.is_and(f):
            stack.extend(reversed(f.children()))
        else:
            out.append(f)
    return out


def assert_bodies(truth: str) -> list[str]:
    """The bodies of the top-level ``(assert …)`` forms of a (trusted) truth text."""
    bodies, depth, start = [], 0, 0
    for i, ch in enumerate(truth):
        if ch == "(":
            depth += 1
            if depth == 1:
                start = i
        elif ch == ")":
            depth -= 1
            if depth == 0:
                bodies.append(truth[start + 1 : i].strip().removeprefix("assert").strip())
    return bodies


def _conjuncts(term: str) -> list[str]:
    """The top-level arguments of an ``(and …)`` term (the term itself otherwise)."""
    if not term.startswith("(and"):
        return [term]
    parts, depth, start = [], 0, None
    for i, ch in enumerate(term):
        if ch == "(":
            depth += 1
            if depth == 2:
                start = i
        elif ch == ")":
            depth -= 1
            if depth == 1 and start is not None:
                parts.append(term[start : i + 1])
                start = None
        elif depth == 1 and start is None and not ch.isspace() and i > 4:
            start = i
            if i + 1 < len(term) and term[i + 1] in " )":
                parts.append(term[i : i + 1])
                start = None
    return parts or [term]


def _first_name(constants: str) -> str:
    match = re.search(r"\(declare-(?:const|fun)\s+(\S+)", constants)
    return match.group(1) if match else "x"


def answers_for(truth: str, constants: str) -> list[tuple[str, str]]:
    """(kind, response text) for one row: one of each kind the readings tell apart."""
    t = _term(truth)
    parts = _conjuncts(t)
    v = _first_name(constants)
    one_line = " ".join(truth.split())
    several = "\n".join(f"(assert {p})" for p in parts)
    dropped = f"(assert (and {' '.join(parts[:-1])}))" if len(parts) > 2 else "(assert true)"
    kinds = {
        "verbatim": f"<answer>{truth}</answer>",
        "verbatim_think": f"<think>let me see</think>\n<answer>\n{truth}\n</answer>",
        "spaced": f"<answer>(assert   {t} )</answer>",
        "tab": f"<answer>(assert\t{t})</answer>",
        "one_line": f"<answer>{one_line}</answer>",
        "double_not": f"<answer>(assert (not (not {t})))</answer>",
        "and_true": f"<answer>(assert (and true {t}))</answer>",
        "several_asserts": f"<answer>{several}</answer>",
        "several_one_line": f"<answer>{several.replace(chr(10), ' ')}</answer>",
        "split_assert": f"<answer>(assert {' '.join(parts)})</answer>",
        "bare_term": f"<answer>{t}</answer>",
        "surplus_end": f"<answer>{truth}))</answer>",
        "surplus_end_spaced": f"<answer>{truth} ) )</answer>",
        "surplus_middle": f"<answer>(assert {parts[0]})) (assert {t})</answer>",
        "unclosed": f"<answer>(assert {t}</answer>",
        "unclosed_two": f"<answer>(assert (and {t}</answer>",
        "unclosed_tag": f"Here it is: <answer>{truth}",
        "untagged": f"The constraint is {truth}",
        "in_think_only": f"<think><answer>{truth}</answer></think>done",
        "first_of_two": f"<answer>(assert true)</answer> no wait <answer>{truth}</answer>",
        "fenced": f"<answer>```smt2\n{truth}\n```</answer>",
        "dropped_conjunct": f"<answer>{dropped}</answer>",
        "too_strong": f"<answer>(assert (and {t} (= {v} 12345)))</answer>",
        "false": "<answer>(assert false)</answer>",
        "true": "<answer>(assert true)</answer>",
        "unknown_symbol": f"<answer>(assert (and {t} (> zz_undeclared 0)))</answer>",
        "not_boolean": "<answer>(assert 5)</answer>",
        "sort_error": f"<answer>(assert (and {t} (+ {v} 1)))</answer>",
        "no_space": f"<answer>(assert{t})</answer>",
        "space_after_paren": f"<answer>( assert {t})</answer>",
        "comment": f"<answer>(assert {t}) ; done</answer>",
        "comment_inside": f"<answer>(assert ; why\n{t})</answer>",
        "string": f'<answer>(assert (and {t} (= "a" "a")))</answer>',
        "quoted_symbol": f"<answer>(assert (and {t} (> |{v}| -1000000)))</answer>",
        "named": f"<answer>(assert (! {t} :named goal))</answer>",
        "carriage_return": f"<answer>(assert\r{t})</answer>",
        "non_ascii": f"<answer>(assert (and {t} (≥ {v} 0)))</answer>",
        "nonlinear": f"<answer>(assert (and {t} (>= (* {v} {v}) 0)))</answer>",
        "echo": f'<answer>(assert {t}) (echo "unsat")</answer>',
        "check_sat": f"<answer>(assert {t}) (check-sat)</answer>",
        "atom_before": f"<answer>so (assert {t})</answer>",
        "atom_after": f"<answer>(assert {t}) done</answer>",
        "empty_tags": "<answer>  </answer>",
        "no_answer": "I could not find the constraint.",
        "let": f"<answer>(assert (let ((q {v})) (and {t} (= q {v}))))</answer>",
        "ite": f"<answer>(assert (ite {t} true false))</answer>",
        "distinct_true": f"<answer>(assert (and (distinct 1 2) {t}))</answer>",
    }
    return list(kinds.items())


def hostile() -> list[tuple[str, str]]:
    """Answers meant to hurt a checker (for a row with an Int ``x``)."""
    deep = "(assert " + "(not " * 5000 + "(> x 0)" + ")" * 5000 + ")"
    return [
        ("deep", f"<answer>{deep}</answer>"),
        ("long_numeral", f"<answer>(assert (> x {'9' * 3000}))</answer>"),
        ("numeral_at_limit", f"<answer>(assert (> x {'9' * 1000}))</answer>"),
        ("many_asserts", "<answer>" + "(assert (> x 0))" * 3000 + "</answer>"),
        ("many_tags", "<answer>" * 3000),
        ("parens_only", "<answer>" + ")" * 3000 + "</answer>"),
        ("open_only", "<answer>(assert " + "(" * 3000 + "</answer>"),
        ("nul", "<answer>(assert (> x 0))\x00</answer>"),
        ("surrogate", "<answer>(assert (> x \ud800))</answer>"),
        ("forged_unsat", '<answer>(assert false)) (echo "unsat") (echo "unsat"</answer>'),
        ("huge", "<answer>(assert (and " + "(> x 0) " * 40000 + "))</answer>"),
    ]


def heldout_like(rows: list[tuple[str, str]], seed: int = 0) -> list[str]:
    """One response per row, of a kind drawn the way real outputs fall: mostly
    well-formed, many malformed (several asserts on lines, surplus or missing
    parentheses, prose, fences, cut-off answers), some wrong."""
    rng = random.Random(seed)
    weights = {
        "verbatim_think": 14,
        "several_asserts": 12,
        "dropped_conjunct": 10,
        "too_strong": 8,
        "spaced": 6,
        "fenced": 6,
        "surplus_end": 6,
        "unclosed": 5,
        "unclosed_tag": 5,
        "untagged": 3,
        "first_of_two": 3,
        "bare_term": 4,
        "unknown_symbol": 4,
        "no_answer": 3,
        "split_assert": 2,
        "comment": 2,
        "double_not": 2,
        "false": 2,
        "in_think_only": 1,
        "atom_before": 1,
        "surplus_middle": 1,
    }
    kinds, cumulative = list(weights), list(weights.values())
    out = []
    for truth, constants in rows:
        kind = rng.choices(kinds, cumulative)[0]
        out.append(dict(answers_for(truth, constants))[kind])
    return out


def fallback_shapes(truth: str, constants: str) -> list[tuple[str, str]]:
    """(kind, response text): the shapes of real answers the in-process published reading
    leaves to the z3 binary, or reads without Z3 at all (unclosed answers), each with the
    lexical feature that decides which: for the default-equals-audit tests."""
    t = _term(truth)
    v = _first_name(constants)
    return [
        ("unclosed_deep", f"<answer>(assert (and (and (and {t}</answer>"),
        ("closed_then_unclosed", f"<answer>(assert {t})) (assert (and {t}</answer>"),
        ("unclosed_comment", f"<answer>(assert (and {t} ; ))</answer>"),
        ("comment_hides_close", f"<answer>(assert {t} ; )</answer>"),
        ("unclosed_string", f'<answer>(assert (and {t} "x</answer>'),
        ("unclosed_quoted", f"<answer>(assert (and {t} |x</answer>"),
        ("unclosed_non_ascii", f"<answer>(assert (and {t} …</answer>"),
        # Characters Z3's scanner rejects, and a malformed bit-vector literal: its
        # error recovery then miscounts a parenthesis (gpt-4o's fenced answers).
        ("unclosed_fenced", f"<answer>```smtlib\n(assert (and (and {t}\n```</answer>"),
        ("unclosed_hash", f"<answer>(assert (and (and {t} #### and so on</answer>"),
        ("unclosed_bracket", f"<answer>(assert (and {t} [rest as above]</answer>"),
        # Read by the kept z3's probe: the parser left inside a command after a rejected
        # character; prose in another script (each byte of it a scanner error, a
        # hundred of them in one recovery stop Z3); a malformed literal where a
        # command name ends.
        ("fenced_then_unclosed", f"<answer>```smt2\n(assert {t})\n(assert (and {t}```</answer>"),
        ("prose_non_ascii", f"<answer>(assert {t}) ограничение (assert (and {t}))</answer>"),
        ("prose_stops_z3", f"<answer>(assert {t}) {'ограничение ' * 20}</answer>"),
        ("head_then_literal", f"<answer>(assert {t}) (push#x1) (simplify#b1)</answer>"),
        ("carriage_return", f"<answer>(assert {t})\r(assert (> {v} 0))</answer>"),
        # Cut where the token left open starts (a string's and a quoted symbol's
        # shapes are above), and a string that hides parentheses from the count.
        ("block_comment_open", f"<answer>(assert {t}) #| (assert false)</answer>"),
        ("string_hides_parens", f'<answer>(assert (and {t} (= "))" "))")))</answer>'),
        ("surplus_then_text", f"<answer>(assert {t})) and so on</answer>"),
        ("surplus_middle_then_more", f"<answer>(assert (and {t})) (> {v} 0)))</answer>"),
        ("text_before", f"<answer>```smtlib\n(assert {t})\n```</answer>"),
        ("no_space_after_assert", f"<answer>(assert(and {t}))</answer>"),
        ("nonlinear_several", f"<answer>(assert {t})\n(assert (>= (* {v} {v}) 0))</answer>"),
        ("division_one_argument", f"<answer>(assert (and {t} (>= (div (div {v} 2)) 0)))</answer>"),
        ("real_division_one_argument", f"<answer>(assert (and {t} (>= (/ {v}) 0)))</answer>"),
        ("think_around", f"<think>(assert false)</think>\n<answer>\n{truth}\n</answer>\ndone"),
        ("string_balanced", f'<answer>(assert (and {t} (= "a" "a")))</answer>'),
        ("keyword", f"<answer>(assert (! {t} :named a1))</answer>"),
        ("bare_atoms", f"<answer>{v} (assert {t})</answer>"),
    ]
