"""The report package's import graph has no circle (issue 29: `compare` → `tables`
→ `group_tables` → `compare`, and `groups` → `samples`/`summary` → `groups`).

Every import counts, the lazy ones inside functions too: a circle hidden in a
function body is still a circle, only one that fails later.
"""

from __future__ import annotations

import ast
from pathlib import Path

import aeval.report

PACKAGE = Path(aeval.report.__file__).parent


def _imports(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
    return {m.removeprefix("aeval.report.") for m in out if m.startswith("aeval.report.")}


def _graph() -> dict[str, set[str]]:
    return {p.stem: _imports(p) for p in PACKAGE.glob("*.py") if p.stem != "__init__"}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A circle of the graph, as the modules along it, or None."""
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_the_checker_finds_a_circle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_the_report_package_has_no_import_circle() -> None:
    graph = _graph()
    assert {"compare", "tables", "group_tables", "groups", "samples", "summary"} <= set(graph)
    assert _cycle(graph) is None, " → ".join(_cycle(graph) or [])


def test_sort_keys_and_formatters_sit_below_their_users() -> None:
    graph = _graph()
    assert graph["order"] == set()
    assert "compare" not in graph["group_tables"]
    assert "group_tables" not in graph["tables"]
    assert not {"samples", "summary"} & graph["groups"]
