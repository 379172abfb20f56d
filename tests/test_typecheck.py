"""The type checker sees the public API as it is: a misspelled name fails the check.

The packages load their heavy names lazily (PEP 562 ``__getattr__``); a
``__getattr__`` the checker could see would answer ``Any`` for every name,
misspelled or not. This runs mypy, with the project's own settings, on a file
that imports one real and several misspelled public names.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

USER_CODE = """\
from aeval import Run, Rnu
from aeval.verify import VerifierPol
from aeval.store import RunStor
from aeval.batch import BatchProvidr
from aeval.batch.providers import open_provider

run: Run
"""

# The packages the user file imports from: what a user's checker reads to resolve a name.
# mypy checks these and skips every other module (an import of one is ``Any``), so the
# check is of the packages' own namespaces, where a lazy ``__getattr__`` would show, and
# costs about 1 s of CPU where following every import of the package cold cost about 29 s
# (measured side by side, docs/tooling.md). The whole package is type-checked by CI's
# `mypy` step.
PUBLIC_PACKAGES = ("aeval", "aeval.verify", "aeval.store", "aeval.batch", "aeval.batch.providers")


def test_a_misspelled_public_name_fails_the_type_check(tmp_path: Path) -> None:
    user = tmp_path / "user_code.py"
    user.write_text(USER_CODE)
    packages = [str(ROOT / p.replace(".", "/") / "__init__.py") for p in PUBLIC_PACKAGES]
    done = subprocess.run(
        [
            *(sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml")),
            *("--follow-imports", "skip", "--cache-dir", str(tmp_path / "mypy-cache")),
            *(str(user), *packages),
        ],
        cwd=ROOT,
        env={**os.environ, "MYPYPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    # every error is the user file's: the packages themselves check clean
    assert all(line.startswith(str(user)) for line in errors), done.stdout
    assert [line.split(":")[1] for line in errors] == ["1", "2", "3", "4", "5"], done.stdout
    assert 'Module "aeval" has no attribute "Rnu"' in errors[0]
    assert all("[attr-defined]" in line for line in errors)


def _public_callables() -> dict[str, object]:
    """Every function and method (``__init__``/``__call__`` included) named in the
    ``__all__`` of aeval and of each of its packages, by defining module and qualified name."""
    import importlib
    import inspect
    import pkgutil

    import aeval

    found: dict[str, object] = {}
    packages = ["aeval"] + [
        m.name for m in pkgutil.walk_packages(aeval.__path__, "aeval.") if m.ispkg
    ]
    for package in packages:
        module = importlib.import_module(package)
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name)
            members = [obj] if inspect.isfunction(obj) else []
            if inspect.isclass(obj) and obj.__module__.startswith("aeval"):
                for attr, value in vars(obj).items():
                    if attr.startswith("_") and attr not in ("__init__", "__call__"):
                        continue
                    if isinstance(value, classmethod | staticmethod):
                        value = value.__func__
                    if isinstance(value, property):
                        value = value.fget
                    if inspect.isfunction(value):
                        members.append(value)
            for fn in members:
                found[f"{fn.__module__}.{fn.__qualname__}"] = fn
    return found


def test_no_documented_public_signature_takes_or_returns_any() -> None:
    import re

    callables = _public_callables()
    assert len(callables) > 150  # the walk reaches the API (Run, RunStore, the reward, ...)
    with_any = sorted(
        f"{name}: {param}"
        for name, fn in callables.items()
        for param, annotation in getattr(fn, "__annotations__", {}).items()
        if re.search(r"\bAny\b", annotation if isinstance(annotation, str) else repr(annotation))
    )
    assert with_any == []
