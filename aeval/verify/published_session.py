"""One ``z3 -in`` kept across answers: the published reading's binary without a process per answer.

The study ran one ``z3 -in`` per answer (:func:`aeval.verify.published.check_published`
still does, for the audit and for the scripts below). Starting it costs more
than most answers' two checks (loading ``libz3``, ~15–45 ms, much of it system
time), so a verifier worker keeps one process and, after each script, sends
``(echo "<nonce>")`` then ``(reset)``:

* ``(reset)`` is Z3's ``cmd_context::reset`` (``src/cmd_context/cmd_context.cpp``):
  it drops every declaration, assertion, scope, the solver and the AST manager
  itself (the next script starts on a new manager, with term ids from zero).
  What it keeps is what the script cannot change here: the global parameters of
  the command line (``-memory:``, Z3's ``memory_max_size``; this process gets no
  ``-T:``, whose timer runs from the process's start, so the wall clock below
  stands in for it), and the context's options, which only ``set-option`` sets
  (refused in answers, and a row whose declarations or truth hold any command
  but ``declare-const``/``declare-fun``/``assert`` is read by a fresh process).
  The solvers' random seeds are parameters at their defaults, so a new solver
  starts from the same seed as in a fresh process.
* ``(echo "<nonce>")`` marks where this script's output ends. The nonce is
  random per process, so no answer can print it (``echo`` is refused anyway).

Z3's parser reads the script as a fresh process does up to the script's last
byte (the same bytes, the same deterministic parser); what differs is what comes
next: the fresh process meets the end of its input, this one meets the echo. At
the end of input a fresh process runs no command (Z3 runs a command at its
closing ``)``; inside a command it reports an error and stops), so its result
lines are those printed before the script's end. Two ways to find that end here:

* A script left at the top level (:func:`session_script`, checked on its text):
  the echo runs at once and everything before the nonce is the script's output.
  Z3's parser (``src/parsers/smt2/smt2parser.cpp``, ``sync_after_error``)
  recovers from an error by skipping to the next ``(`` at depth 0, counting
  parentheses with a floor at 0 (a surplus ``)`` between commands is an error
  it skips). So a script qualifies when its text holds nothing but what Z3's
  scanner reads without an error and without hiding a parenthesis (``_UNSAFE``:
  no string, quoted symbol, bit-vector literal, carriage return or rejected
  character; comments are ``;`` to the line's end, as Z3's scanner reads them)
  and its parentheses, counted with that floor, end at depth 0.
* Any other script without a ``"`` or ``|`` (:func:`probed_script`: gpt-4o's
  backtick fences, non-ASCII text, ``#``, unclosed forms) gets the *probe*:
  ``(echo "<nonce>")``, then more ``)`` than Z3's parenthesis count can be
  (``_closing_bound``: each ``(`` once, plus one per byte that may make the
  scanner throw, since a scanner error inside the error recovery counts the
  token before it again), then ``(echo "<nonce>-closed")`` and ``(reset)``.
  Without a ``"`` or ``|`` (a string, a quoted symbol, a ``#|`` block comment)
  the scanner is between tokens after the script's final line feed, so the
  probe is read as tokens. If the parser was at the top level (or skipping to
  a ``(`` at depth 0), the first echo runs and the output before it is the
  script's. If not, the first echo is swallowed into the open command (not a
  term Z3 knows: an error) or skipped, the parentheses close the command and
  the second echo runs; what ran in between printed errors only, because the
  only command an answer can leave open is ``assert`` (every other command is
  refused before any Z3 sees it, :func:`aeval.verify.published.forbidden_command`,
  and the row's text holds only declarations and asserts), so the result lines
  before the second echo are the fresh process's. A script that makes Z3 stop
  reading (a hundred scanner errors in one recovery) ends this process: that
  answer goes to a fresh process.

A ``"`` or ``|`` goes to a fresh process: the probe could be read as the inside
of a string, and nothing after it would bring the parser back. Which text Z3's
scanner reads as one string or quoted symbol is not modelled here: it changes
between Z3's versions (the z3-solver 5.4 this project is tested with reports
"invalid character '\\' in quoted symbol" where the scanner of Z3's repository,
read for this, takes ``\\`` as an escape), and a model that missed once would
hold the probe inside a token.

Where the probe does not come back within the budget, the answer goes to a fresh
process (not to the fresh process's reason for a script killed past its budget):
so a behaviour of some Z3 version that the argument above misses costs time,
never a reading.

The output read is the same bytes a fresh process writes before the end of its
input (after the probe's second echo: the same result lines), except for the
line numbers in Z3's ``(error "line N …")`` messages, which run
on across scripts; only lines that are exactly ``sat``, ``unsat`` or ``unknown``
count, and a line number never makes one. A script read on its text
(:func:`session_script`) that outlives the budget is killed with the fresh
process's reason (a probed one goes to a fresh process, above); a process that
ends by itself mid-script (out of memory, a crash) leaves the answer to a fresh
process, so a state this process accumulated can never decide an answer. Either way the next script
starts a new process, as does every ``_ANSWERS_PER_PROCESS``-th.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import secrets
import selectors
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import lru_cache
from itertools import accumulate
from pathlib import Path

from aeval.verify.sexpr import read_forms

__all__ = [
    "Z3Session",
    "answer_left_open",
    "die_with_parent",
    "open_to_the_end",
    "probed_script",
    "row_commands_only",
    "session_script",
    "z3_memory_mb",
]

# Anything but what Z3's scanner reads without an exception or a hidden parenthesis
# (src/parsers/smt2/smt2scanner.cpp, scanner::scan): blanks, line feeds, parentheses,
# comments, keywords, symbol characters and digits. Left out: '"' and '|' (a string or
# a quoted symbol, where a parenthesis is text), '#' (a bit-vector literal, an error
# when malformed), '\r' (a line break to Python's splitlines, a blank to Z3) and every
# character the scanner rejects ("unexpected character": '`', '[', '\'', non-ASCII …).
# A scanner error inside the parser's error recovery counts the parenthesis before
# it twice (smt2parser.cpp: scan() counts m_curr before scan_core() throws), so the
# depth below would no longer be Z3's.
_UNSAFE = re.compile(r"[^A-Za-z0-9 \t\n~!@$%^&*_\-+=<>.?/,();:]")
# Z3's scanner: a comment runs from ';' to the next line feed.
_COMMENT = re.compile(r";[^\n]*")
# Every byte but the parentheses (deleted by bytes.translate, at C speed: these run
# over every script that falls back, three copies of the answer in each).
_NOT_PARENS = bytes(b for b in range(256) if b not in b"()")
_STEP = {ord("("): 1, ord(")"): -1}
# What keeps Z3's scanner inside one token across a line feed (smt2scanner.cpp):
# a string ('"'), a quoted symbol ('|') and a block comment ('#|', needing '|'). A
# script holding one is never read by a kept process: the probe after it could be
# swallowed as text, and nothing after it would bring the parser back.
_OPAQUE = re.compile(r'["|]')
# The bytes Z3's scanner reads without an exception (scanner::scan's table); every
# other byte ('#', '`', '[', each byte of a non-ASCII character …) may raise one.
_CANNOT_RAISE = (
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789 \t\r\n~!@$%^&*_-+=<>.?/,();:"
)
# Commands a row's own text may hold for its script to be read here (an answer holds
# only asserts: every other command is refused before any Z3 sees it).
_ROW_COMMANDS = frozenset({"declare-const", "declare-fun", "assert"})
# A new process after this many scripts: what Z3 keeps across a reset (interned
# symbol names) stays small.
_ANSWERS_PER_PROCESS = 2_000
_READ_BYTES = 1 << 16
# How an exchange with the process stopped.
_MARKED, _ENDED, _PAST_BUDGET = "marked", "ended", "past budget"


def _depths(text: str) -> list[int]:
    """The parenthesis depth after each parenthesis of ``text`` (comments left out), no floor.

    ``text`` is lexically safe (no ``_UNSAFE`` character: ASCII).
    """
    if ";" in text:
        text = _COMMENT.sub("", text)
    parens = text.encode("ascii").translate(None, _NOT_PARENS)
    return list(accumulate(map(_STEP.__getitem__, parens)))


def _floored(depths: list[int], start: int = 0) -> int:
    """The depth at the end of ``depths``' walk from ``start``, with Z3's floor at 0."""
    if not depths:
        return start
    # A walk with a floor at 0 ends at (last - lowest) once it dips below 0.
    return start + depths[-1] - min(0, start + min(depths))


def session_script(script: str) -> bool:
    """Whether ``script`` leaves Z3's parser at the top level (see the module docstring)."""
    return _UNSAFE.search(script) is None and _floored(_depths(script)) == 0


def probed_script(script: str) -> bool:
    """Whether a kept process can read ``script`` with the probe (see the module
    docstring): nothing in it keeps Z3's scanner inside one token across a line feed."""
    return _OPAQUE.search(script) is None


def _closing_bound(body: bytes) -> int:
    """More than Z3's parenthesis count can be after ``body`` (see the module docstring)."""
    return body.count(b"(") + len(body.translate(None, _CANNOT_RAISE)) + 2


def open_to_the_end(script: str, answer_end: int) -> bool:
    """Whether Z3's parser, once past ``script[:answer_end]``, stays inside one command to
    the end of ``script``: then no command after that point runs.

    Z3 ends a command only at depth 0 (after an error, ``sync_after_error`` skips to
    the next ``(`` at depth 0), and at the end of input inside a command it stops
    reading. So when the depth (floor at 0) is above 0 at ``answer_end`` and every
    later parenthesis keeps it above 0, nothing after ``answer_end`` runs as a command.
    Lexically plain scripts only (as :func:`session_script`).
    """
    if _UNSAFE.search(script):
        return False
    start = _floored(_depths(script[:answer_end]))
    rest = _depths(script[answer_end:])
    return start > 0 and start + min(rest, default=0) > 0


def answer_left_open(answer: str) -> bool:
    """Whether ``answer`` alone, read from depth 0 with Z3's floor, ends inside a form;
    False for an answer that is not lexically plain (as :func:`session_script`).

    After a row whose text is balanced forms (:func:`row_commands_only`), the study's
    script is at depth 0 where the answer starts, so :func:`open_to_the_end` of the
    script is False for every answer this is False for (without building the script).
    """
    return _UNSAFE.search(answer) is None and _floored(_depths(answer)) > 0


def z3_memory_mb(memory_mb: int) -> int:
    """Z3's ``-memory:`` under a worker's cap of ``memory_mb``: room for the worker itself."""
    return max(64, memory_mb * 3 // 4)


@lru_cache(maxsize=1024)
def row_commands_only(truth: str, constants: str) -> bool:
    """Whether a row's declarations and truth hold no command but declare-const,
    declare-fun and assert (so they print nothing and set nothing a reset keeps)."""
    return _row_commands_only(constants) and _row_commands_only(truth)


def _row_commands_only(text: str) -> bool:
    """Whether a row's text holds no command but declare-const, declare-fun and assert."""
    try:
        forms = read_forms(text)
    except ValueError:
        return False
    return all(isinstance(form, tuple) and form[:1] and form[0] in _ROW_COMMANDS for form in forms)


def die_with_parent() -> None:  # pragma: no cover (runs in the forked child)
    # If the worker is SIGKILLed (pool timeout), Z3 must not outlive it.
    ctypes.CDLL(None).prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL


class Z3Session:
    """A ``z3 -in`` process reused across scripts, started on first use.

    :param binary: finds the z3 executable (called when a process starts);
    :param timeout_s: the wall-clock budget of one script;
    :param memory_mb: the worker's memory cap (Z3's ``-memory:`` is
        :func:`z3_memory_mb` of it, as for a fresh process).
    """

    def __init__(
        self,
        binary: Callable[[], Path],
        timeout_s: float,
        memory_mb: int,
        *,
        answers_per_process: int = _ANSWERS_PER_PROCESS,
    ) -> None:
        self._binary = binary
        self._memory_mb = memory_mb
        self._timeout_s = timeout_s
        self._answers_per_process = answers_per_process
        self._process: subprocess.Popen[bytes] | None = None
        self._cwd: tempfile.TemporaryDirectory[str] | None = None
        self._nonce = b""
        self._answers = 0
        self.started = 0  # processes started so far (for tests and benches)
        self.left = 0  # scripts left to a fresh process (read returned None)

    def reads(self, script: str, truth: str, constants: str) -> bool:
        """Whether this session reads ``script`` (the study's, for this row) as a fresh
        process does, or finds out that it cannot: :func:`probed_script`, and a row
        whose declarations and truth hold no command but declare-const, declare-fun
        and assert (so nothing a reset keeps is set)."""
        return row_commands_only(truth, constants) and probed_script(script)

    def read(self, script: str) -> str | None:
        """Z3's stdout for ``script`` (a :func:`session_script`, or a
        :func:`probed_script`) as a fresh process writes it (its result lines, where
        the probe finds the parser inside a command at the script's end), or None
        when only a fresh process can say (this one ended by itself first).

        :raises TimeoutError: a :func:`session_script` ran out of its budget (the
            process is killed; a probed script's answer then goes to a fresh process).
        :raises OSError: the process could not be started.
        """
        try:
            body = script.encode("utf-8")
        except UnicodeEncodeError:
            self.left += 1
            return None  # a fresh process says why
        process = self._running()
        nonce = self._nonce
        end = b"\n" + nonce + b"\n"
        probed = not session_script(script)
        if not probed:
            payload = body + b'\n(echo "' + nonce + b'")\n(reset)\n'
            out, how = self._exchange(process, payload, end)
            mark = len(out) - len(end) if how == _MARKED else -1
        else:
            # The probe: the first echo runs only where the parser is ready for a
            # command; the parentheses then close whatever the script left open, so
            # that the second echo runs in every case.
            back = b"\n" + nonce + b"-closed\n"
            closing = b")" * _closing_bound(body)
            payload = body + b'\n(echo "' + nonce + b'")\n' + closing
            payload += b'\n(echo "' + back.strip() + b'")\n(reset)\n'
            out, how = self._exchange(process, payload, back)
            mark = out.find(end)
            if mark < 0 and how == _MARKED:
                # Left inside a command: what followed the script printed only
                # errors (see the module docstring), so its result lines are all
                # before the second echo.
                mark = len(out) - len(back)
        if how != _MARKED:
            self.close()  # killed past the budget, or ended by itself
        if mark < 0:
            if how == _PAST_BUDGET and not probed:
                raise TimeoutError(f"z3 ran past {self._timeout_s:g} s")
            # Ended by itself before the script's output was whole, or the probe did
            # not come back (a slow script, or a Z3 that read it otherwise).
            self.left += 1
            return None
        self._answers += 1
        if self._answers >= self._answers_per_process:
            self.close()
        # The output as the study read it: everything before the nonce's line.
        return out[1:mark].decode("utf-8", "replace")

    def close(self) -> None:
        """Kill the process (if any) and remove its working directory."""
        process, self._process = self._process, None
        if process is not None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            process.wait()
            for stream in (process.stdin, process.stdout):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()
        if self._cwd is not None:
            self._cwd.cleanup()
            self._cwd = None

    def _running(self) -> subprocess.Popen[bytes]:
        if self._process is not None and self._process.poll() is None:
            return self._process
        self.close()
        self._cwd = tempfile.TemporaryDirectory(prefix="aeval-z3-")
        # A fresh process's safety, kept: argv (never a shell), an empty environment,
        # an empty working directory, and death with the worker.
        argv = [str(self._binary()), "-in", f"-memory:{z3_memory_mb(self._memory_mb)}"]
        self._process = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=self._cwd.name,
            env={},
            preexec_fn=die_with_parent if sys.platform == "linux" else None,
        )
        self._nonce = f"aeval-{secrets.token_hex(16)}".encode()
        self._answers = 0
        self.started += 1
        return self._process

    def _exchange(
        self, process: subprocess.Popen[bytes], payload: bytes, end: bytes
    ) -> tuple[bytes, str]:
        """Write ``payload`` while reading stdout up to ``end``: what was read (after a
        line feed of its own), and how it stopped (``_MARKED``: at ``end``; ``_ENDED``:
        the process ended; ``_PAST_BUDGET``: the budget ran out first)."""
        assert process.stdin is not None and process.stdout is not None
        deadline = time.monotonic() + self._timeout_s
        stdin, stdout = process.stdin.fileno(), process.stdout.fileno()
        os.set_blocking(stdin, False)
        # A leading line feed: the nonce is found at the start of a line even when it
        # is the first line of the output.
        out = bytearray(b"\n")
        view = memoryview(payload)
        with selectors.DefaultSelector() as selector:
            selector.register(stdout, selectors.EVENT_READ)
            if view:
                selector.register(stdin, selectors.EVENT_WRITE)
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return bytes(out), _PAST_BUDGET
                for key, _ in selector.select(remaining):
                    if key.fd == stdin:
                        try:
                            view = view[os.write(stdin, view[:_READ_BYTES]) :]
                        except BrokenPipeError:
                            view = view[:0]
                        if not view:
                            selector.unregister(stdin)
                    else:
                        chunk = os.read(stdout, _READ_BYTES)
                        if not chunk:
                            return bytes(out), _ENDED
                        out += chunk
                        if out.endswith(end):
                            return bytes(out), _MARKED
