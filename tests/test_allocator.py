"""The CLI has polars' allocator return freed pages, unless the user chose otherwise."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from aeval import cli
from aeval.allocator import POLARS_ALLOCATOR_ENV, RETURN_FREED_PAGES, return_freed_pages


def _fresh_python(script: str, *args: str) -> Any:
    """What ``script`` prints last, as JSON, run by a new interpreter whose environment
    lacks the allocator variable."""
    env = {k: v for k, v in os.environ.items() if k != POLARS_ALLOCATOR_ENV}
    out = subprocess.run(
        [sys.executable, "-c", script, *args], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.splitlines()[-1])


def test_a_child_environment_gets_the_setting_unless_it_has_its_own() -> None:
    env: dict[str, str] = {}
    assert return_freed_pages(env) and env == {POLARS_ALLOCATOR_ENV: RETURN_FREED_PAGES}
    own = {POLARS_ALLOCATOR_ENV: "dirty_decay_ms:5000"}
    assert not return_freed_pages(own) and own == {POLARS_ALLOCATOR_ENV: "dirty_decay_ms:5000"}
    # a parent that imported polars (twice over: its parent did too) leaves polars'
    # own defaults behind, as seen in bench/engine_scale.py's engine: not a choice
    polars_default = "dirty_decay_ms:500,muzzy_decay_ms:1000"
    inherited = {POLARS_ALLOCATOR_ENV: f"{polars_default},{polars_default}"}
    assert return_freed_pages(inherited)
    assert inherited == {POLARS_ALLOCATOR_ENV: RETURN_FREED_PAGES}
    # ... but what the user added after them is
    chosen = {POLARS_ALLOCATOR_ENV: f"{polars_default},dirty_decay_ms:7"}
    assert not return_freed_pages(chosen)


def test_this_process_only_before_polars_is_loaded() -> None:
    import polars  # noqa: F401  (loaded: its allocator has read its settings)

    before = os.environ.get(POLARS_ALLOCATOR_ENV)
    assert not return_freed_pages()
    assert os.environ.get(POLARS_ALLOCATOR_ENV) == before
    script = (
        "import json, os, sys\n"
        "from aeval.allocator import return_freed_pages\n"
        "took = return_freed_pages()\n"
        "import polars\n"
        f"print(json.dumps([took, os.environ.get({POLARS_ALLOCATOR_ENV!r})]))\n"
    )
    took, conf = _fresh_python(script)
    # polars puts its own defaults first and the user's (ours) after: the later wins
    assert took and conf.endswith("," + RETURN_FREED_PAGES)


def test_the_cli_sets_it_before_a_command_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(cli, "return_freed_pages", lambda: calls.append("allocator") or True)
    monkeypatch.setattr(cli, "_main", lambda argv: calls.append("command") or 0)
    assert cli.main(["status"]) == 0
    assert calls == ["allocator", "command"]


def test_polars_own_defaults_are_the_strings_the_allocator_knows() -> None:
    # allocator.py tells polars' own defaults (inherited by a child process) from a
    # user's choice by their exact text, which is polars' private business: the day a
    # polars release writes other defaults, this fails and _POLARS_DEFAULTS is updated.
    from aeval.allocator import _POLARS_DEFAULTS, _users_own

    script = (
        "import json, os\n"
        "import polars\n"
        f"print(json.dumps(os.environ.get({POLARS_ALLOCATOR_ENV!r})))\n"
    )
    written = _fresh_python(script)
    assert written, "polars no longer writes its allocator defaults into the environment"
    assert not _users_own(written), (
        f"polars now writes {written!r} into {POLARS_ALLOCATOR_ENV}; allocator.py knows "
        f"{_POLARS_DEFAULTS!r}"
    )


def test_the_cli_process_has_the_setting_when_polars_loads() -> None:
    # Not only the order of the calls: the command's own process, started without the
    # variable, loads polars with freed pages returned at once (polars' defaults first,
    # ours after them: the later setting wins).
    script = (
        "import json, os, sys\n"
        "from aeval import cli\n"
        "cli.main(['status', sys.argv[1]])\n"
        "import polars\n"
        f"print(json.dumps(os.environ.get({POLARS_ALLOCATOR_ENV!r})))\n"
    )
    conf = _fresh_python(script, "/nonexistent-run-dir")
    assert conf.endswith(RETURN_FREED_PAGES), conf


def test_the_freed_heap_goes_back_to_the_system_where_glibc_can_trim_it() -> None:
    """On glibc (this machine's, CI's) the trim runs and gives back what Python freed:
    the process's resident size after freeing half of 190 MB of 64 KB strings (on glibc's
    heap: below its mmap threshold, above Python's small objects) and trimming is well below
    its size before the trim."""
    script = """
import json, resource
from aeval.allocator import return_freed_heap
def rss():
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * resource.getpagesize() >> 20
held = [bytes(65_536) + bytes([i % 256]) * 8 for i in range(3_000)]
before = rss()
del held[::2]
freed = rss()
ran = return_freed_heap()
print(json.dumps([ran, before, freed, rss()]))
"""
    ran, before, freed, after = _fresh_python(script)
    assert ran is True
    # every other string freed: glibc keeps the holes (between live strings) until trimmed
    assert freed > before - 20, (before, freed)
    assert after < freed - 60, (before, freed, after)
