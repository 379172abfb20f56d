"""Sphinx configuration of aeval's documentation site (docs/tooling.md says why Sphinx).

Build: ``.venv/bin/python -m sphinx -W --keep-going -b html docs docs/_build/html``
(after ``pip install -e '.[docs]'``). Warnings are errors: a page of docs/ that no
toctree lists, a broken link or reference, or a docstring that does not render fails
the build. ``_ext/aeval_pictures.py`` draws the pictures from an offline run and
``_ext/aeval_cli.py`` writes the command-line reference from the argparse parsers,
both at build time, into ``_generated/``.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE / "_ext"))

from aeval.version import __version__  # noqa: E402

project = "aeval"
author = "the aeval authors"
copyright = "the aeval authors, Apache-2.0"
release = version = __version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "aeval_api",
    "aeval_cli",
    "aeval_pictures",
]

root_doc = "index"
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store", "figures/README.md"]
# docs/*.md and docs/**/*.md are all pages: a page no toctree lists fails the build
# ("document isn't included in any toctree"), so a new page is noticed at once.

myst_enable_extensions = ["colon_fence", "deflist"]
# Headings become link targets (`page.md#a-heading`) down to ####, as on GitHub.
myst_heading_anchors = 4
suppress_warnings: list[str] = []

# The API reference: what aeval.__all__ and each public subpackage's __all__ name.
autodoc_default_options = {
    "members": True,
    "undoc-members": True,
    "show-inheritance": True,
}
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_typehints_format = "short"
autodoc_preserve_defaults = True
napoleon_google_docstring = False
napoleon_numpy_docstring = False

html_theme = "furo"
html_title = f"aeval {release}"
html_static_path: list[str] = []
html_show_sourcelink = False
