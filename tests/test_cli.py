from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import LoadedBy

from aeval.cli import COMMANDS, main


def test_top_level_help_lists_every_command_without_loading_them() -> None:
    code = (
        "import sys\n"
        "from aeval.cli import main\n"
        "try:\n"
        "    main(['--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "loaded = [m for m in ('polars', 'z3', 'openai', 'uvicorn', 'aeval.commands.run') "
        "if m in sys.modules]\n"
        "print('LOADED', ','.join(loaded))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    for name in COMMANDS:
        assert name in out.stdout
    assert out.stdout.strip().endswith("LOADED")  # nothing heavy imported


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_command_has_its_own_help(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([name, "--help"])
    assert exit_.value.code == 0
    assert f"python -m aeval {name}" in capsys.readouterr().out


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_commands_help_loads_nothing_heavy(name: str, loaded_by: LoadedBy) -> None:
    # A command whose main needs the engine, the server, polars or Z3 keeps its
    # arguments in a light module (cli.Command): its --help imports neither.
    command = COMMANDS[name]
    code = (  # the help text goes to a buffer: loaded_by reads stdout
        "import contextlib, io\nfrom aeval.cli import main\n"
        "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
        f"    main([{name!r}, '--help'])"
    )
    heavy = ["polars", "z3", "openai", "uvicorn", "datasets", "numpy"]
    if command.arguments is not None:
        heavy.append(command.main)
    assert loaded_by(code, heavy) == []


def test_an_unknown_command_is_an_argparse_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["bogus"])
    assert exit_.value.code == 2
    assert "invalid choice: 'bogus'" in capsys.readouterr().err
