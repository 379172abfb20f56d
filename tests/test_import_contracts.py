"""The package's layers, held by import-linter's contracts in pyproject.toml [tool.importlinter].

The contracts (layers, no circle among siblings, independence, the run directory's
one reader) run here as a default test, so a violation fails the suite, and CI runs
``lint-imports`` itself. docs/architecture.md draws the same layers.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

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


def test_every_package_is_in_the_layers() -> None:
    # exhaustive = true makes import-linter refuse a child of aeval the layers do not name
    with open(ROOT / "pyproject.toml", "rb") as f:
        contracts = tomllib.load(f)["tool"]["importlinter"]["contracts"]
    layers = next(c for c in contracts if c["type"] == "layers")
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
