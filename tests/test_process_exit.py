"""The command line's quick exit: atexit handlers still run, output is flushed, the
exit code is kept, and a non-daemon thread still working is waited for."""

from __future__ import annotations

import subprocess
import sys


def run(script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )


def test_exit_process_runs_atexit_flushes_and_keeps_the_code() -> None:
    done = run(
        "import atexit, sys\n"
        "from aeval.process_exit import exit_process\n"
        "atexit.register(lambda: print('handler ran'))\n"
        "print('buffered', end=' ')\n"  # a pipe: stdout is block-buffered
        "sys.stderr.write('to stderr')\n"
        "exit_process(3)\n"
    )
    assert done.returncode == 3
    assert done.stdout == "buffered handler ran\n"
    assert done.stderr == "to stderr"


def test_exit_process_waits_for_a_non_daemon_thread() -> None:
    done = run(
        "import threading, time\n"
        "from aeval.process_exit import exit_process\n"
        "def work():\n"
        "    time.sleep(0.3)\n"
        "    print('thread finished', flush=True)\n"
        "threading.Thread(target=work).start()\n"
        "exit_process(0)\n"
    )
    assert done.returncode == 0 and done.stdout == "thread finished\n"


def test_the_module_entry_point_exits_with_the_commands_code() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "aeval", "report", "/nonexistent/run"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2 and "aeval: error:" in done.stderr
