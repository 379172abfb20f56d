"""The README and the documentation site's structure, checked without building the site.

The build itself (`sphinx -W`, in .ci/run) fails on a page outside the navigation, a
broken link or a missing API entry; these checks say the same things in the default
suite, in a second, so a pull request hears of them before CI's docs step.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README = (ROOT / "README.md").read_text()

MAIN_JOB = "python3 -m venv .venv && .venv/bin/pip install -q -e . && .venv/bin/python -m aeval"
TESTS = (
    "python3 -m venv .venv && .venv/bin/pip install -q -e '.[test]' && "
    ".venv/bin/python -m pytest -q -n 2"
)


def pages() -> list[Path]:
    """Every page of the site: docs/**/*.md but the build's own output."""
    return sorted(p for p in DOCS.rglob("*.md") if not p.relative_to(DOCS).parts[0].startswith("_"))


def toctree_entries() -> set[str]:
    index = (DOCS / "index.md").read_text()
    entries: set[str] = set()
    for block in re.findall(r"```\{toctree\}\n(.*?)```", index, re.S):
        entries.update(
            line.strip() for line in block.splitlines() if line.strip() and ":" not in line
        )
    return entries


def test_the_readme_is_short_and_keeps_both_set_up_commands_unchanged() -> None:
    assert len(README.splitlines()) <= 150
    assert f"```bash\n{MAIN_JOB}\n```" in README
    assert f"```bash\n{TESTS}\n```" in README
    assert "sphinx -W" in README  # the one command that builds the site
    assert README.count("![") == 1  # one picture


def test_every_readme_link_reaches_a_file() -> None:
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README) + re.findall(
        r"!\[[^]]*\]\(([^)]+)\)", README
    )
    local = [link for link in links if "://" not in link]
    assert len(local) > 20
    for link in local:
        assert (ROOT / link).exists(), link


def test_the_readme_picture_is_what_the_live_view_draws_today() -> None:
    """README's picture is a committed file (GitHub shows only those): the live view of a
    scripted offline-demo state, drawn by ``render_progress``. A change to the live view
    fails here until the picture is drawn again."""
    import sys

    assert "![the live view half-way through the offline demo](docs/live-view.svg)" in README
    sys.path.insert(0, str(DOCS / "_ext"))
    try:
        from draw_pictures import README_PICTURE, readme_view  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(DOCS / "_ext"))
    assert README_PICTURE == DOCS / "live-view.svg"
    assert readme_view() == README_PICTURE.read_text(), (
        "docs/live-view.svg is not what the live view draws today: draw it again with "
        "'.venv/bin/python docs/_ext/draw_pictures.py --readme'"
    )


def test_every_page_is_in_the_navigation() -> None:
    entries = toctree_entries()
    for page in pages():
        name = page.relative_to(DOCS).with_suffix("").as_posix()
        assert name == "index" or name in entries, (
            f"docs/{name}.md is in no toctree of docs/index.md: add it to its section "
            "(docs/tooling.md, 'Adding a page')"
        )
    generated = {e for e in entries if e.startswith("_generated/")}
    assert generated == {"_generated/cli"}  # written by the build (docs/_ext/aeval_cli.py)
    for entry in entries - generated:
        assert (DOCS / f"{entry}.md").is_file(), f"docs/index.md lists {entry}, which is no page"


def test_the_cli_page_is_generated_from_every_parser() -> None:
    import sys

    sys.path.insert(0, str(DOCS / "_ext"))
    try:
        from aeval_cli import cli_markdown  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(DOCS / "_ext"))
    from aeval.cli import COMMANDS, EXAMPLES

    page = cli_markdown()
    for name in COMMANDS:
        assert f"## `{name}`" in page
        assert EXAMPLES[name].split("\n")[0] in page  # each command's example, as --help has it
    assert page.count("example:") == len(COMMANDS) + 1
