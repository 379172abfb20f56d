"""The command line a person expects (Issue 12 §3, §5): version, help, names, early errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from aeval import __version__
from aeval.cli import COMMANDS, EXAMPLES, build_parser, main
from aeval.local import LocalBatchServer

ROOT = Path(__file__).resolve().parents[1]
DEMO = str(ROOT / "aeval" / "data" / "demo-benchmark.jsonl")


def _env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("OPENAI_API_KEY", "OPENAI_KEY", "OPENAI_BASE_URL")
    }
    env["PYTHONPATH"] = str(ROOT)
    env.update(extra)
    return env


def _python(
    *args: str, cwd: Path, timeout: float = 120, **env: str
) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` in ``cwd`` with no OpenAI settings but ``env``, this checkout first."""
    return subprocess.run(
        [sys.executable, *args],
        env=_env(**env),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _aeval(
    *args: str, cwd: Path, timeout: float = 120, **env: str
) -> subprocess.CompletedProcess[str]:
    return _python("-m", "aeval", *args, cwd=cwd, timeout=timeout, **env)


@pytest.fixture
def no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"aeval {__version__}"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_help_shows_an_example_and_defaults(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main([name, "--help"])
    out = capsys.readouterr().out
    assert "example:" in out and EXAMPLES[name].split("\n")[0] in out
    if name == "run":
        assert "(default: results)" in out and "(default: 1)" in out  # --out, --trials
        assert "--sample-seed" in out and "--sample-id" in out
        assert "--seed " not in out  # one spelling: --sample-seed


@pytest.mark.parametrize(
    ("args", "hint"),
    [
        (["run", "--sampel", "3"], "did you mean --sample?"),
        (
            ["rescore", "--dataset", "d", "--out", "o", "--chek-timeout", "1", "f"],
            "--check-timeout",
        ),
        (["report", "r", "--fromat", "md"], "did you mean --format?"),
    ],
)
def test_a_mistyped_flag_gets_a_suggestion(
    args: list[str], hint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(args)
    assert exit_.value.code == 2
    assert hint in capsys.readouterr().err


@pytest.mark.parametrize(
    "args",
    [
        ["run", "--seed", "7"],
        ["rescore", "--dataset", "d", "--out", "o", "--timeout", "3", "f"],
        ["report", "r", "--output", "x.md"],
        ["view", "r", "--output", "x.html"],
    ],
)
def test_old_spellings_are_refused(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        build_parser(args[0]).parse_args(args)
    assert exit_.value.code == 2
    assert "unrecognized arguments" in capsys.readouterr().err


def test_one_spelling_per_option() -> None:
    # the one name per concept: --out writes, --check-timeout bounds each check
    assert build_parser("run").parse_args(["run", "--sample-seed", "7"]).sample_seed == 7
    assert build_parser("report").parse_args(["report", "r", "--out", "y"]).output == Path("y")
    rescore = ["rescore", "--dataset", "d", "--out", "o", "--check-timeout", "2", "f"]
    assert build_parser("rescore").parse_args(rescore).timeout == 2.0


INPUT_ERRORS = [
    (["--tier", "huge"], "no rows of tier 'huge'; its tiers are large, medium, small"),
    (["--sample-id", "5,900"], "no row with id 900"),
    (["--sample-id", "9-3"], "runs backwards"),
    (["--trials", "0"], "--trials: must be a positive integer, got '0'"),
    (["--check-timeout", "-1"], "--check-timeout: must be a positive number"),
    (["--max-tokens", "10", "--max-completion-tokens", "10"], "not allowed with argument"),
]


def _refused_early(code: object, stderr: str, message: str, tmp_path: Path) -> None:
    assert code == 2, stderr
    assert message in stderr
    errors = [line for line in stderr.splitlines() if "error" in line]
    assert len(errors) == 1, stderr  # said once
    assert "Traceback" not in stderr and "VerifyLimits" not in stderr
    assert not (tmp_path / "r").exists()  # no junk directory


@pytest.mark.parametrize(("args", "message"), INPUT_ERRORS)
def test_input_errors_come_before_any_run_directory(
    args: list[str], message: str, tmp_path: Path, no_key: None, capsys: pytest.CaptureFixture[str]
) -> None:
    # In this process: the same parser and checks as the command's (a process costs a
    # second of start-up each); the exit code of a real process is the test below.
    try:
        code: object = main(["run", *args, "--out", str(tmp_path / "r")])
    except SystemExit as exit_:  # argparse's own refusals
        code = exit_.code
    _refused_early(code, capsys.readouterr().err, message, tmp_path)


@pytest.mark.parametrize(
    ("args", "message"),
    [INPUT_ERRORS[0], INPUT_ERRORS[-1]],  # one refused by the run's checks, one by argparse
    ids=["check", "argparse"],
)
def test_an_input_error_exits_the_process_2_with_one_line(
    args: list[str], message: str, tmp_path: Path
) -> None:
    proc = _aeval("run", *args, "--out", str(tmp_path / "r"), cwd=tmp_path)
    _refused_early(proc.returncode, proc.stderr, message, tmp_path)


@pytest.mark.parametrize("command", ["resume", "cancel", "status"])
def test_a_missing_run_directory_is_named_not_blamed_on_the_key(
    command: str, tmp_path: Path, no_key: None, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "no-such-run"
    assert main([command, str(missing)]) == 2
    err = capsys.readouterr().err
    assert f"{missing} does not exist" in err and "API key" not in err


def test_no_key_says_so_once_for_a_real_run_directory(
    tmp_path: Path, no_key: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "--dry-run", "--limit", "2", "--out", str(tmp_path), "--run-id", "d"]) == 0
    capsys.readouterr()
    assert main(["cancel", str(tmp_path / "d")]) == 2
    err = capsys.readouterr().err
    assert err.count("no API key") == 1 and "offline demo" in err


def test_sample_id_selects_items_by_id(
    tmp_path: Path, no_key: None, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = "5,7,10-12"
    args = ["run", "--dry-run", "--model", "m", "--sample-id", spec, "--out", str(tmp_path)]
    assert main([*args, "--run-id", "ids"]) == 0
    assert "5 rows × 1 model(s)" in capsys.readouterr().out
    (requests,) = (tmp_path / "ids" / "requests").iterdir()
    ids = [json.loads(line)["custom_id"] for line in requests.read_text().splitlines()]
    assert [i.rsplit("-", 1)[-1] for i in ids] == ["5", "7", "10", "11", "12"]
    saved = json.loads((tmp_path / "ids" / "config.json").read_text())
    assert saved["sample_ids"] == spec  # so resume selects the same items


def test_dry_run_prints_the_estimated_cost(
    tmp_path: Path, no_key: None, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["run", "--dry-run", "--limit", "4", "--trials", "2", "--out", str(tmp_path)]
    assert main([*args, "--model", "gpt-4o-mini-2024-07-18,my-model", "--max-tokens", "100"]) == 0
    out = capsys.readouterr().out
    assert "estimated cost" in out
    line = next(x for x in out.splitlines() if x.strip().startswith("gpt-4o-mini-2024-07-18:"))
    assert "8 requests" in line and "800 output tokens (--max-tokens bound)" in line
    assert "$" in line and "at batch price" in line
    assert "my-model: 8 requests" in out and "unknown price" in out


def test_a_paid_run_prints_its_cost_before_it_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from aeval.dataset import load_dataset

    with LocalBatchServer(dataset=load_dataset(DEMO)) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-cli")
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        args = ["run", "--model", "gpt-4o-mini-2024-07-18", "--dataset", DEMO, "--limit", "3"]
        args += ["--out", str(tmp_path), "--display", "plain", "--poll-initial", "0.05"]
        assert main(args) == 0
    err = capsys.readouterr().err
    assert err.index("estimated cost") < err.index("run directory:")
    summary = json.loads(next(tmp_path.glob("*/summary.json")).read_text())
    (model,) = summary["models"]
    assert model["tokens"]["prompt"] > 0 and model["cost_usd"] is not None
    assert summary["overall"]["cost_usd"] == model["cost_usd"]


def test_quiet_prints_only_the_summary(tmp_path: Path) -> None:
    proc = _aeval("--limit", "3", "--trials", "1", "--out", str(tmp_path), "--quiet", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "progress" not in proc.stdout and "Accuracy" in proc.stdout
    assert "run directory:" not in proc.stderr


def test_the_demo_on_a_python_that_cannot_load_z3_names_why_in_one_line(tmp_path: Path) -> None:
    """README's first command where the verifier's Z3 fails on import (first on the
    workers' PYTHONPATH): exit 2 and one line with the worker's own reason."""
    (tmp_path / "site" / "z3").mkdir(parents=True)
    (tmp_path / "site" / "z3" / "__init__.py").write_text('raise ImportError("no z3 here")\n')
    path = os.pathsep.join([str(tmp_path / "site"), str(ROOT)])
    proc = _aeval(cwd=tmp_path, PYTHONPATH=path)
    assert proc.returncode == 2, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("aeval: error:")]
    assert errors == [
        "aeval: error: cannot start a Z3 verifier worker: ImportError: no z3 here "
        f"({sys.executable} -m aeval.verify.worker exited with code 1 before it was ready)"
    ], proc.stderr
    assert "Traceback" not in proc.stderr


def test_status_json_into_a_closed_pipe_is_quiet(tmp_path: Path, no_key: None) -> None:
    assert main(["run", "--dry-run", "--limit", "2", "--out", str(tmp_path), "--run-id", "d"]) == 0
    proc = subprocess.Popen(
        [sys.executable, "-m", "aeval", "status", "--json", "--local", str(tmp_path / "d")],
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader went away before a byte was written (`| head -0`)
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141
    assert "Traceback" not in err and "BrokenPipe" not in err


def test_py_typed_marker_ships() -> None:
    assert (ROOT / "aeval" / "py.typed").is_file()
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert '"py.typed"' in pyproject and 'trio = ["trio' in pyproject


def test_the_embedding_page_snippet_runs_as_written_without_a_key(tmp_path: Path) -> None:
    page = (ROOT / "docs" / "embedding.md").read_text()
    start = page.index("```python\n", page.index("## Offline or online, one switch")) + len(
        "```python\n"
    )
    snippet = page[start : page.index("```", start)]
    proc = _python("-c", snippet, cwd=tmp_path, timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert "equivalent" in proc.stdout and "shape: (100," in proc.stdout


def test_an_offline_run_id_in_use_is_refused_before_its_server_starts(tmp_path: Path) -> None:
    # The run already there is a dry run's (it started no server, so it left no server
    # state): a server the refused run started would leave some.
    first = _aeval(
        "--limit", "2", "--out", str(tmp_path), "--run-id", "x", "--dry-run", "-q", cwd=tmp_path
    )  # fmt: skip
    assert first.returncode == 0, first.stderr
    assert (tmp_path / "x" / "manifest.json").is_file()
    assert not (tmp_path / "x" / "local-server").exists()
    again = _aeval("--limit", "2", "--out", str(tmp_path), "--run-id", "x", "-q", cwd=tmp_path)
    assert again.returncode == 2 and "already holds a run" in again.stderr
    assert not (tmp_path / "x" / "local-server").exists()


def test_run_and_resume_do_not_import_each_other() -> None:
    import ast

    for name in ("resume", "cancel", "run"):
        tree = ast.parse((ROOT / "aeval" / "commands" / f"{name}.py").read_text())
        imported = {
            node.module
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module
        }
        others = {f"aeval.commands.{n}" for n in ("resume", "cancel", "run")} - {
            f"aeval.commands.{name}"
        }
        allowed = {"aeval.commands.resume"} if name == "run" else set()  # run --resume
        assert imported & others <= allowed, (name, imported & others)
        if name != "run":
            assert "aeval.commands.drive" in imported
