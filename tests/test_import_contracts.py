"""The package's layers, held by import-linter's contracts in pyproject.toml [tool.importlinter].

The contracts (layers, no circle among siblings, independence, the run directory's
one reader) run here as a default test, so a violation fails the suite, and CI runs
``lint-imports`` itself. docs/architecture.md draws the same layers. What the
contracts cannot say is checked here too: that the layers keep issue #40's order
for the packages it names (on the contract's own list), and that a function-local
import of an aeval module says why it is deferred, in a comment directly above it
(docs/architecture.md, "Deferred imports").
"""

from __future__ import annotations

import ast
import itertools
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
# import-linter's command, installed beside this interpreter by the test extra
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(cwd: Path) -> subprocess.CompletedProcess[str]:
    # lint-imports reads ./pyproject.toml and puts its directory first on sys.path,
    # so the package it checks is the one under cwd
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_import_contracts_hold() -> None:
    done = lint_imports(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


def contracts() -> list[dict[str, Any]]:
    with open(ROOT / "pyproject.toml", "rb") as f:
        found: list[dict[str, Any]] = tomllib.load(f)["tool"]["importlinter"]["contracts"]
    return found


def layers_contract() -> dict[str, Any]:
    return next(c for c in contracts() if c["type"] == "layers")


def test_no_contract_ignores_an_import() -> None:
    # Issue #40: every knot is cut by moving a concept down, none is listed as known.
    assert [c["id"] for c in contracts() if c.get("ignore_imports")] == []


# Issue #40's order, bottom to top: "from the vocabulary at the bottom, through
# verification, the store, datasets, batch, scoring and reward, the engine and
# rescoring, reports and display, interop and the commands, to the CLI". Packages in
# one step are named as a pair that must not know each other, so they share a row as
# independent siblings. "interop and the commands" are two steps: `export inspect`
# (commands) imports interop.
VOCABULARY = (
    "events",
    "cost",
    "prompts",
    "api_settings",
    "uvicorn_thread",
    "verdicts",
    "model_names",
    "reasoning",
    "study_reasons",
    "json_values",
    "errors",
    "version",
    "exception_groups",
    "_lazy",
    "allocator",
    "process_exit",
)
ISSUE_ORDER: tuple[tuple[str, ...], ...] = (
    VOCABULARY,
    ("verify",),
    ("store",),
    ("dataset",),
    ("batch",),
    ("scoring", "reward"),
    ("engine", "rescoring"),
    ("report", "display"),
    ("interop",),
    ("commands",),
    ("cli",),
)


def order_breaks(layers: list[str]) -> list[str]:
    """Where a layers list (top to bottom, as in pyproject) departs from ISSUE_ORDER."""
    rows = list(reversed(layers))  # bottom first: a package's height is its row's index
    height = {name.strip(): h for h, row in enumerate(rows) for name in re.split(r"[|:]", row)}
    breaks: list[str] = []
    for lower, upper in itertools.pairwise(ISSUE_ORDER):
        top_of_lower = max(lower, key=height.__getitem__)
        bottom_of_upper = min(upper, key=height.__getitem__)
        if height[top_of_lower] >= height[bottom_of_upper]:
            breaks.append(f"{top_of_lower} is not below {bottom_of_upper}")
    for pair in (step for step in ISSUE_ORDER if step != VOCABULARY and len(step) > 1):
        # one row, and "|" (independent) between them, never ":" (either may import the other)
        shared = {rows[height[name]] for name in pair}
        if len(shared) != 1 or ":" in next(iter(shared)):
            breaks.append(f"{' and '.join(pair)} are not independent siblings of one row")
    return breaks


def test_the_layers_keep_the_issues_order() -> None:
    # A re-ordering that hides a knot (the engine below the reports, rescoring
    # above interop) fails here even when the contracts themselves still pass.
    assert order_breaks(layers_contract()["layers"]) == []


def test_the_order_check_sees_a_layer_moved() -> None:
    layers = list(layers_contract()["layers"])
    # the order before #40's knots were cut: engine below report, rescoring above interop
    old = [r for r in layers if r not in ("report | display", "engine | rescoring")]
    at = old.index("interop")
    old[at : at + 1] = ["rescoring", "interop", "display", "engine", "report"]
    assert order_breaks(old) == [
        "rescoring is not below report",
        "engine and rescoring are not independent siblings of one row",
        "report and display are not independent siblings of one row",
    ]
    # ":" lets siblings of one row import each other: no longer independent
    joined = [r.replace("report | display", "report : display") for r in layers]
    assert order_breaks(joined) == ["report and display are not independent siblings of one row"]


def test_every_package_is_in_the_layers() -> None:
    # exhaustive = true makes import-linter refuse a child of aeval the layers do not name
    layers = layers_contract()
    assert layers["containers"] == ["aeval"] and layers["exhaustive"] is True
    named = {n.strip() for layer in layers["layers"] for n in layer.split("|")}
    children = {p.stem for p in (ROOT / "aeval").glob("*.py")} | {
        p.parent.name for p in (ROOT / "aeval").glob("*/__init__.py")
    }
    assert children - {"__init__"} == named


def test_a_deferred_upward_import_is_caught(tmp_path: Path) -> None:
    # A copy of the package with one import back up, inside a function: the kind
    # of import that hid the knots import-linter now holds.
    shutil.copytree(
        ROOT / "aeval",
        tmp_path / "aeval",
        ignore=shutil.ignore_patterns("__pycache__", "data", "assets"),
    )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    planted = tmp_path / "aeval" / "errors.py"
    planted.write_text(
        planted.read_text(encoding="utf-8")
        + "\n\ndef _planted() -> None:\n    from aeval.commands import run  # noqa: F401\n",
        encoding="utf-8",
    )
    done = lint_imports(tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "aeval.errors -> aeval.commands.run" in done.stdout
    assert "Each package imports only the packages below it BROKEN" in done.stdout


# --------------------------------------------------------------------------- deferred imports


def _is_aeval(node: ast.Import | ast.ImportFrom) -> bool:
    if isinstance(node, ast.ImportFrom):
        return node.level > 0 or (node.module or "").split(".")[0] == "aeval"
    return any(alias.name.split(".")[0] == "aeval" for alias in node.names)


def _imported(node: ast.Import | ast.ImportFrom) -> str:
    if isinstance(node, ast.ImportFrom):
        return "." * node.level + (node.module or "")
    return ",".join(alias.name for alias in node.names)


def _in_functions(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """The import statements inside a def or async def, at any depth."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if in_function and isinstance(child, (ast.Import, ast.ImportFrom)):
                found.append(child)
            inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            visit(child, inner)

    visit(tree, False)
    return found


def undeclared_deferred_imports(source: str) -> list[tuple[int, str]]:
    """(line, module) of each function-local import of an aeval module with no comment
    directly above it, or above the run of imports it is in (the blank line ruff puts
    between a third-party import and aeval's counts as part of that run). A comment
    that is only a ``noqa`` or ``type:`` directive does not say why."""
    tree = ast.parse(source)
    lines = source.splitlines()
    import_lines = {
        n
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for n in range(node.lineno, (node.end_lineno or node.lineno) + 1)
    }
    missing = []
    for node in _in_functions(tree):
        if not _is_aeval(node):
            continue
        above = node.lineno - 1  # 1-based number of the line above
        while above >= 1 and (
            above in import_lines or (not lines[above - 1].strip() and above - 1 in import_lines)
        ):
            above -= 1
        text = lines[above - 1].strip() if above >= 1 else ""
        said = text.removeprefix("#").strip()
        if not text.startswith("#") or not said or said.startswith(("noqa", "type:")):
            missing.append((node.lineno, _imported(node)))
    return missing


def test_every_deferred_aeval_import_says_why() -> None:
    found = sorted(
        (path.relative_to(ROOT).as_posix(), module)
        for path in sorted((ROOT / "aeval").rglob("*.py"))
        for _, module in undeclared_deferred_imports(path.read_text(encoding="utf-8"))
    )
    assert not found, f"deferred aeval imports with no comment above saying why: {found}"


@pytest.mark.parametrize(
    ("body", "flagged"),
    [
        # lifted to the top: not deferred
        ("from aeval.errors import ConfigError\n\ndef f():\n    return ConfigError\n", []),
        # deferred, no reason
        ("def f():\n    x = 1\n    from aeval.errors import ConfigError\n", [3]),
        ("async def f():\n    if x:\n        import aeval.engine\n", [3]),
        ("def f():\n    from . import errors\n", [2]),
        # a reason directly above, for a run of imports with ruff's blank line in it
        (
            "def f():\n    # ray is optional (aeval[ray])\n    import ray\n\n"
            "    from aeval.verify import cluster\n    from aeval import errors\n",
            [],
        ),
        # a comment, then a blank line, then the import: not directly above
        ("def f():\n    # why\n\n    from aeval import errors\n", [4]),
        # a directive is no reason
        ("def f():\n    # noqa: F401\n    from aeval import errors\n", [3]),
        # another package's deferred import is not this rule's
        ("def f():\n    import polars\n", []),
        # in a class body's method and inside try
        (
            "class C:\n    def m(self):\n        try:\n            from aeval import x\n"
            "        except ImportError:\n            pass\n",
            [4],
        ),
    ],
)
def test_the_deferred_import_rule(body: str, flagged: list[int]) -> None:
    assert [line for line, _ in undeclared_deferred_imports(body)] == flagged
