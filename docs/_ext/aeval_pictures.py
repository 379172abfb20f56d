"""Sphinx extension: the site's pictures, drawn by the build from an offline run.

At ``builder-inited`` it runs ``draw_pictures.py`` (beside this file) in a child
process into ``_generated/pictures/``: the live view and the final summary as Rich
draws them, a report's tables and figures, and the leaderboard's, all from one
offline run (aeval's local server, synthetic models, the bundled demo benchmark).
The child's environment holds no provider key, so the build never calls a paid API
whatever the shell exports.

The pictures are drawn again whenever a file of the package or the drawing script
changed, or a browser (for the viewer's screenshot) came or went (a stamp holds a hash
of them), so a page shows what the code draws today; an unchanged tree reuses them and
a rebuild takes seconds.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from sphinx.application import Sphinx
from sphinx.errors import ExtensionError

import aeval
from aeval.report.headless_chromium import find_chromium

HERE = Path(__file__).parent
SCRIPT = HERE / "draw_pictures.py"
# Every variable that could point a run at a real provider or a hub.
_SCRUBBED_SUFFIXES = ("_API_KEY", "_KEY", "_BASE_URL", "_ENDPOINT", "_TOKEN")


def _tree_hash() -> str:
    digest = hashlib.sha256()
    # Whether a browser can draw the viewer: one installed since the last build redraws.
    browser = find_chromium()
    digest.update(repr(browser).encode())
    package = Path(aeval.__file__).parent
    for path in sorted([*package.rglob("*.py"), *package.glob("data/*"), SCRIPT]):
        digest.update(str(path.relative_to(package.parent)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def offline_env() -> dict[str, str]:
    """This process's environment less every provider key, endpoint and token."""
    env = {k: v for k, v in os.environ.items() if not k.endswith(_SCRUBBED_SUFFIXES)}
    env.update(HF_HUB_OFFLINE="1", MPLBACKEND="Agg", COLUMNS="110")
    return env


def _draw(app: Sphinx) -> None:
    out = Path(app.srcdir) / "_generated" / "pictures"
    stamp = out / "stamp"
    wanted = _tree_hash()
    if stamp.is_file() and stamp.read_text() == wanted:
        return
    shutil.rmtree(out, ignore_errors=True)
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), str(out)],
        env=offline_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode != 0:
        raise ExtensionError(f"drawing the pictures failed:\n{proc.stdout}\n{proc.stderr}")
    stamp.write_text(wanted)


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("builder-inited", _draw)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
