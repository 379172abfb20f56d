"""The tables of a run with repair rounds, from its summary's ``rounds`` records
(:mod:`aeval.summary.rounds`): accuracy@1…@K with the repair rate and the cost per
solved item, what each round asked and cost, and accuracy@k of k rounds beside
pass@k of k independent trials at their costs.

Like every table (:mod:`aeval.summary.tables`) they read only the summary; a
summary without rounds (a one-round run) has none of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aeval.cost import usd
from aeval.store.provenance import synthetic_label
from aeval.summary.tables import Grid, fmt_interval, fmt_pct, fmt_tokens

__all__ = [
    "ROUNDS_NOTE",
    "fmt_cost_per_solved",
    "most_rounds",
    "round_cost_grid",
    "rounds_grid",
    "rounds_grids",
    "rounds_vs_trials_grid",
]

ROUNDS_NOTE = (
    "Repair rounds: an answer that was not equivalent was asked again with the "
    "verifier's feedback, up to K rounds. Every other table counts round 1 only, so it "
    "reads as a one-round run. accuracy@k is the share of the round-1 answers scored "
    "that were equivalent by round k; the repair rate is the share of the answers "
    "wrong in round 1 (scored, not equivalent) that a later round solved; rounds to "
    "solve is the mean first equivalent round over the answers solved. Cost per solved "
    "item is every round's cost over the answers solved by round K. Where a model has "
    "several trials, accuracy@k of k rounds stands beside pass@k of k independent "
    "trials, each with its cost per item: whether feedback beats asking again for the "
    "same money.\n"
)


def _rounds(group: Mapping[str, Any]) -> Mapping[str, Any] | None:
    return group.get("rounds")


def most_rounds(summary: Mapping[str, Any]) -> int:
    """K: the most rounds any model's record has (0: the summary has no rounds)."""
    return max((r["rounds"] for m in summary["models"] if (r := _rounds(m))), default=0)


def _synthetic(summary: Mapping[str, Any]) -> bool:
    return bool(synthetic_label(summary.get("provenance")))


def fmt_cost_per_solved(record: Mapping[str, Any], *, synthetic: bool = False) -> str:
    """USD per solved item, or tokens where the price is unknown (or the answers were
    synthetic: they cost nothing)."""
    cost = record.get("cost_per_solved_usd")
    if cost is not None and not synthetic:
        return usd(cost)
    tokens = record.get("tokens_per_solved")
    return "—" if tokens is None else f"{fmt_tokens(round(tokens))} tok"


def _at(record: Mapping[str, Any], k: int, brief: bool) -> str:
    entries = record["accuracy_at_k"]
    if k > len(entries):
        return "—"
    return fmt_pct(entries[k - 1]["value"]) if brief else fmt_interval(entries[k - 1])


def rounds_grid(summary: Mapping[str, Any], *, brief: bool = False) -> Grid:
    """Per model: accuracy@1…@K, the repair rate, mean rounds to solve and the cost per
    solved item (``brief``: intervals only for @1 and @K)."""
    k_max = most_rounds(summary)
    synthetic = _synthetic(summary)
    rows = []
    for m in summary["models"]:
        r = _rounds(m)
        if r is None:
            continue
        rate = r["repair_rate"]
        rows.append(
            (
                m["model"],
                *(_at(r, k, brief and k not in (1, k_max)) for k in range(1, k_max + 1)),
                (fmt_pct(rate["value"]) if brief else fmt_interval(rate))
                + f" ({r['repaired']}/{r['first_wrong']})",
                "—" if r["mean_rounds_to_solve"] is None else f"{r['mean_rounds_to_solve']:.2f}",
                fmt_cost_per_solved(r, synthetic=synthetic),
            )
        )
    ci = " [95% CI]"
    heads = tuple(
        f"acc@{k}" + (ci if not brief or k in (1, k_max) else "") for k in range(1, k_max + 1)
    )
    return Grid(
        f"Repair rounds (K = {k_max}): accuracy by round k over the round-1 answers scored, "
        "repair rate of the answers first wrong, mean rounds to solve, cost per solved item "
        "(Batch API price unless the run was direct; tokens where no price is known)",
        ("Model", *heads, "Repair rate" + ("" if brief else ci), "Rounds to solve", "Cost/solved"),
        tuple(rows),
        right=frozenset(range(1, k_max + 4)),
    )


def round_cost_grid(summary: Mapping[str, Any]) -> Grid:
    """Per model and round: answers asked, infrastructure failures, newly solved,
    accuracy@k, tokens, cost and cost so far."""
    synthetic = _synthetic(summary)
    rows = []
    for m in summary["models"]:
        r = _rounds(m)
        if r is None:
            continue
        for k in range(1, r["rounds"] + 1):
            cost, so_far = r["cost_usd"][k - 1], r["cumulative_cost_usd"][k - 1]
            rows.append(
                (
                    m["model"],
                    str(k),
                    str(r["asked"][k - 1]),
                    str(r["infra_failures"][k - 1]),
                    str(r["solved"][k - 1]),
                    fmt_pct(r["accuracy_by_round"][k - 1]),
                    fmt_tokens(r["tokens"][k - 1]["total"]),
                    "—" if cost is None or synthetic else usd(cost),
                    "—" if so_far is None or synthetic else usd(so_far),
                )
            )
    return Grid(
        "Per round: answers asked, infrastructure failures, items first solved, "
        "accuracy@k, tokens and cost",
        (
            "Model",
            "Round",
            "Asked",
            "Infra fail",
            "Solved",
            "acc@k",
            "Tokens",
            "Cost",
            "Cost so far",
        ),
        tuple(rows),
        right=frozenset(range(1, 9)),
        alert=frozenset({3}),
    )


def _per_1000(value: float | None) -> str:
    return "—" if value is None else usd(1000 * value)


def _tokens_per_item(value: float | None) -> str:
    return "—" if value is None else fmt_tokens(round(value))


def rounds_vs_trials_grid(summary: Mapping[str, Any]) -> Grid:
    """Per model with several trials and each k: accuracy@k of k rounds and pass@k of k
    independent trials, each with its cost per 1,000 items (tokens per item where no
    price is known)."""
    synthetic = _synthetic(summary)
    rows = []
    for m in summary["models"]:
        r = _rounds(m)
        if r is None or not r.get("versus_trials"):
            continue
        priced = not synthetic and r["cost_usd"] and r["cost_usd"][0] is not None
        for v in r["versus_trials"]:
            if priced:
                rounds_cost = _per_1000(v["rounds_cost_per_item"])
                trials_cost = _per_1000(v["trials_cost_per_item"])
            else:
                rounds_cost = _tokens_per_item(v["rounds_tokens_per_item"]) + " tok/item"
                trials_cost = _tokens_per_item(v["trials_tokens_per_item"]) + " tok/item"
            rows.append(
                (
                    m["model"],
                    str(v["k"]),
                    fmt_pct(v["accuracy_at_k"]),
                    rounds_cost if v["accuracy_at_k"] is not None else "—",
                    fmt_pct(v["pass_at_k"]),
                    trials_cost if v["pass_at_k"] is not None else "—",
                )
            )
    return Grid(
        "k repair rounds against k independent trials: accuracy@k (feedback) beside "
        "pass@k (asking again without it), each at its cost per 1,000 items",
        ("Model", "k", "acc@k (rounds)", "Cost of k rounds", "pass@k (trials)", "Cost of k trials"),
        tuple(rows),
        right=frozenset(range(1, 6)),
    )


def rounds_grids(summary: Mapping[str, Any], *, brief: bool = False) -> list[Grid]:
    """The rounds' tables of a report, in reading order (none without rounds)."""
    if not most_rounds(summary):
        return []
    grids = [rounds_grid(summary, brief=brief)]
    if not brief:
        grids.append(round_cost_grid(summary))
    vs = rounds_vs_trials_grid(summary)
    if vs.rows:
        grids.append(vs)
    return grids
