"""The run directory has one reader: only aeval.store names its files.

What import-linter cannot see: a file name written as a string. The import
contracts (pyproject.toml [tool.importlinter], tests/test_import_contracts.py)
hold which packages may import the store; this holds that no other package
opens a run directory's file by its name or globs the directory itself.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "aeval"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


FILE_NAMES = (
    "verdicts.jsonl",
    "verdicts.parquet",
    "summary.json",
    "config.json",
    "manifest.json",
    "verdict-cache.jsonl",
    "run.lock",
    "submit-hold.json",
)


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: module_name(p))
def test_only_the_store_names_a_run_directory_file(path: Path) -> None:
    # Every run-directory file is reached through aeval.store (RunLayout and its
    # readers): a file name or a glob of the directory elsewhere is a second reader.
    if path.relative_to(PACKAGE).parts[0] == "store":
        return
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    named = [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
        and any(node.value == n or node.value.endswith("/" + n) for n in FILE_NAMES)
    ]
    globs = [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("glob", "rglob")
        and any(
            isinstance(a, ast.Constant) and isinstance(a.value, str) and "summary" in a.value
            for a in node.args
        )
    ]
    assert named == [] and globs == []
