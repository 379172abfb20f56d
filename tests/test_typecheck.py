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


def test_a_misspelled_public_name_fails_the_type_check(tmp_path: Path) -> None:
    user = tmp_path / "user_code.py"
    user.write_text(USER_CODE)
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"), str(user)],
        cwd=ROOT,  # the project's own cache (.mypy_cache), shared with CI's mypy step
        env={**os.environ, "MYPYPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    assert [line.split(":")[1] for line in errors] == ["1", "2", "3", "4", "5"], done.stdout
    assert 'Module "aeval" has no attribute "Rnu"' in errors[0]
    assert all("[attr-defined]" in line for line in errors)
