"""verdicts.jsonl read back as a frame (aeval.store.verdict_file, #44's memory target).

The frame is read by polars' NDJSON reader where the lines are as the run writes them,
and one record at a time through Python otherwise. The reference every test holds the
reader to is the frame the file gave before that reader existed: its records
(``read_verdict_records``) through ``verdicts_frame``, compared with polars'
``assert_frame_equal`` (dtypes and values).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from aeval.errors import RunDirError
from aeval.store import verdict_file
from aeval.store.verdict_file import read_verdict_frames, read_verdict_records
from aeval.study_reasons import STUDY_CATEGORIES
from aeval.verdicts import Status, Verdict, verdicts_frame

# Texts that JSON escapes, or that look like the JSON around them: a reader that
# finds keys or values by their bytes must not be misled by them.
TRICKY = [
    "",
    "plain",
    'a "quoted" word',
    "back\\slash",
    'x\\", "tier": "y',
    '}, "tier": 1',
    '": {',
    '": 5',
    "é ü 😀 \u2028",
    "\x00\x01\n\t\r\x1f\x7f",
    '(error "line 1 column 5: unknown constant x")',
    '"published_category": null}',
]


def line_of(record: dict[str, Any]) -> bytes:
    """A line as RunStore.append_verdict writes it."""
    return (json.dumps(record, ensure_ascii=False) + "\n").encode()


def reference(path: Path) -> pl.DataFrame:
    """The frame as the file was read before polars' reader: every record through Python."""
    return verdicts_frame([rec for _, rec in read_verdict_records(path)])


def read(path: Path, block_bytes: int = 1 << 20) -> pl.DataFrame:
    parts = list(read_verdict_frames(path, block_bytes))
    return pl.concat(parts) if parts else verdicts_frame([])


@pytest.fixture
def python_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail a test if any block goes through Python: it must be polars' read."""

    def refuse(path: Path, block: bytes, first_line: int) -> Iterator[pl.DataFrame]:
        raise AssertionError(f"{path}: a block from line {first_line} went through Python")

    monkeypatch.setattr(verdict_file, "_frames_through_records", refuse)


texts = st.one_of(st.sampled_from(TRICKY), st.text(max_size=12))
reasons = st.one_of(st.none(), st.sampled_from(sorted(STUDY_CATEGORIES)), texts)


@st.composite
def verdicts(draw: st.DrawFn) -> Verdict:
    return Verdict(
        model=draw(st.sampled_from(["m", "org/model-é"])),
        trial=draw(st.integers(0, 3)),
        custom_id=draw(texts),
        round=draw(st.integers(1, 3)),
        status=draw(st.sampled_from(list(Status))),
        reason=draw(texts),
        repaired=draw(st.one_of(st.none(), texts)),
        direction=draw(st.sampled_from([None, "too_strong", "too_weak", "both"])),
        counterexample=draw(st.one_of(st.none(), st.dictionaries(texts, texts, max_size=4))),
        tier=draw(st.one_of(st.none(), texts)),
        finish_reason=draw(st.sampled_from([None, "stop", "length"])),
        prompt_tokens=draw(st.one_of(st.none(), st.integers(0, 2**40))),
        completion_tokens=draw(st.one_of(st.none(), st.integers(0, 10**6))),
        reasoning_tokens=draw(st.one_of(st.none(), st.integers(0, 10**6))),
        elapsed_ms=draw(st.floats(0, 1e7, allow_nan=False)),
        correct_published=draw(st.one_of(st.none(), st.booleans())),
        published_reason=draw(reasons),
        program=draw(st.one_of(st.none(), texts)),
        examples=draw(st.one_of(st.none(), st.integers(-5, 50))),
        target_n=draw(st.one_of(st.none(), st.integers(0, 50))),
        distance=draw(st.one_of(st.none(), st.integers(-50, 50))),
        answer_chars=draw(st.one_of(st.none(), st.integers(0, 10**5))),
    )


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(verdicts(), max_size=40), st.sampled_from([64, 1 << 20]))
def test_written_lines_read_as_their_records_do(
    tmp_path: Path, drawn: list[Verdict], block_bytes: int
) -> None:
    """Any verdicts as the run writes them, multi-round, with texts that JSON escapes or
    that look like its syntax, in blocks smaller than a line or holding them all."""
    path = tmp_path / f"v{block_bytes}-{len(drawn)}.jsonl"
    path.write_bytes(b"".join(line_of(v.to_record()) for v in drawn))
    assert_frame_equal(read(path, block_bytes), reference(path))


def test_a_multi_round_file_is_read_by_polars_alone(tmp_path: Path, python_refused: None) -> None:
    """The run's own lines never go through Python (the point of the reader), and give
    the frame their records give: counterexamples sorted as json.dumps sorts them."""
    rows = [
        Verdict(
            model="m",
            trial=t,
            custom_id=f"q{i}" if r == 1 else f"q{i}_r{r}",
            round=r,
            status=Status.EQUIVALENT if r == 3 else Status.NOT_EQUIVALENT,
            reason="too weak",
            direction="too_weak",
            counterexample={"y": "(- 3)", "x": "#x0f", "é": 'a\\"b'} if r < 3 else None,
            prompt_tokens=100 + i,
            completion_tokens=7,
            elapsed_ms=1.5,
            correct_published=r == 3,
            published_reason="Constraints are logically equivalent." if r == 3 else None,
            examples=i,
        )
        for t in (0, 1)
        for i in range(300)
        for r in (1, 2, 3)
    ]
    path = tmp_path / "verdicts.jsonl"
    path.write_bytes(b"".join(line_of(v.to_record()) for v in rows))
    frame = read(path, block_bytes=16_384)
    assert frame["counterexample"][0] == '{"x": "#x0f", "y": "(- 3)", "\\u00e9": "a\\\\\\"b"}'
    assert sorted(frame["round"].unique()) == [1, 2, 3]
    assert_frame_equal(frame, reference(path))


def test_lines_of_an_older_version_read_as_before(tmp_path: Path, python_refused: None) -> None:
    """Written before ``round`` and ``published_category`` (and the token columns):
    round 1, the category from the published reason."""
    path = tmp_path / "verdicts.jsonl"
    lines = []
    for i, reason in enumerate([*STUDY_CATEGORIES, None, "z3 was killed"]):
        rec = Verdict(
            model="m", trial=1, custom_id=str(i), status=Status.NOT_EQUIVALENT
        ).to_record()
        for key in ("round", "published_category", "reasoning_tokens", "program"):
            del rec[key]
        rec["published_reason"] = reason
        lines.append(line_of(rec))
    path.write_bytes(b"".join(lines))
    frame = read(path)
    assert frame["round"].to_list() == [1] * len(lines)
    assert frame["published_category"].to_list()[:5] == list(STUDY_CATEGORIES.values())
    assert frame["published_category"].to_list()[5:] == [None, None]
    assert_frame_equal(frame, reference(path))


def test_a_torn_last_line_is_passed_over(tmp_path: Path) -> None:
    """A kill mid-write: the line without its newline never was a verdict, whichever block
    it ends in."""
    path = tmp_path / "verdicts.jsonl"
    whole = b"".join(
        line_of(Verdict(model="m", trial=1, custom_id=str(i), status=Status.EQUIVALENT).to_record())
        for i in range(50)
    )
    path.write_bytes(whole + whole[:70])
    for block_bytes in (10, 333, 1 << 20):
        frame = read(path, block_bytes)
        assert frame.height == 50
        assert_frame_equal(frame, reference(path))
    path.write_bytes(whole[:70])
    assert read(path).height == 0


# Lines an old version, a hand edit or a damaged disk could leave: each reads as its
# records did (through Python), or is refused as it was.
ODD: dict[str, list[dict[str, Any] | str]] = {
    "mixed old and new": [{"published_category": None}, {}],
    "a blank line between": [{}, "", {}],
    "a CRLF line end": ["CRLF"],
    "a number as a reason": [{"reason": 1.0}],
    "an integer as a reason": [{"reason": 12}],
    "a boolean as a tier": [{"tier": True}],
    "a float count": [{"prompt_tokens": 5.0}],
    "a text count": [{"prompt_tokens": "5"}],
    "an integer as time": [{"elapsed_ms": 3}],
    "a counterexample as text": [{"counterexample": '{"b": "1", "a": "2"}'}],
    "a counterexample with a number": [{"counterexample": {"x": 1.0}}],
    "a nested counterexample": [{"counterexample": {"x": {"y": "1"}}}],
    "a lone surrogate": ["SURROGATE"],
    "a key twice": ["TWICE"],
    "a key of a later version": [{"cost_usd": 0.25}],
    "a number as a model": [{"model": 7}],
    "an integer no column holds as a reason": [{"reason": 12345678901234567890}],
    "no round at all, null": [{"round": None}],
}


def odd_line(change: dict[str, Any] | str, i: int) -> bytes:
    rec = Verdict(
        model="m",
        trial=1,
        custom_id=f"q{i}",
        status=Status.NOT_EQUIVALENT,
        counterexample={"x": "1"},
        published_reason="Generated does not imply original.",
    ).to_record()
    if change == "":
        return b"\n"
    if change == "CRLF":
        return line_of(rec)[:-1] + b"\r\n"
    if change == "SURROGATE":
        return line_of(rec).replace(b'"reason": ""', b'"reason": "\\ud800"')
    if change == "TWICE":
        return line_of(rec).replace(b'"reason": ""', b'"reason": "a", "reason": "b"')
    assert isinstance(change, dict)
    if "published_category" in change:
        del rec["published_category"]
        change = {}
    return line_of({**rec, **change})


@pytest.mark.parametrize("case", sorted(ODD))
def test_odd_lines_read_as_their_records_or_are_refused_as_before(
    tmp_path: Path, case: str
) -> None:
    path = tmp_path / "verdicts.jsonl"
    good = [
        line_of(Verdict(model="m", trial=0, custom_id=str(i), status=Status.EQUIVALENT).to_record())
        for i in range(3)
    ]
    path.write_bytes(b"".join([*good, *(odd_line(c, i) for i, c in enumerate(ODD[case]))]))
    try:
        expected = reference(path)
    except Exception as err:  # refused before (as a RunDirError saying why): refused now
        with pytest.raises(RunDirError) as refused:
            read(path)
        assert str(err) in str(refused.value)
        return
    assert_frame_equal(read(path), expected)
    assert_frame_equal(read(path, block_bytes=50), expected)


@pytest.mark.parametrize(
    ("bad", "said"),
    [
        (b"[1, 2]\n", "line 5 is not a verdict record (not a JSON object)"),
        (b'{"model": 5, "trial": 1, "custom_id": "x", "status": "timeout"}\n', "line 5"),
        (b'{"model": "m", "trial": 1, "custom_id": "x", "status": "great"}\n', "line 5"),
        (b'{"model": "m", "trial": true, "custom_id": "x", "status": "timeout"}\n', "line 5"),
        (
            b'{"model": "m", "trial": 1, "custom_id": "x"}\n',
            "line 5 is not a verdict record (no 'status')",
        ),
        (b"{not json\n", "line 5"),
        (
            b'{"model": "m", "trial": 1, "custom_id": "x", "status": "timeout", '
            b'"reason": {"a": 1}}\n',
            "verdict records of an unexpected shape",
        ),
    ],
)
def test_a_damaged_line_is_named_with_its_number_in_the_file(
    tmp_path: Path, bad: bytes, said: str
) -> None:
    """The line's number counts the lines of the blocks before it."""
    path = tmp_path / "verdicts.jsonl"
    good = [
        line_of(Verdict(model="m", trial=0, custom_id=str(i), status=Status.EQUIVALENT).to_record())
        for i in range(4)
    ]
    path.write_bytes(b"".join([*good, bad, good[0]]))
    for block_bytes in (100, 1 << 20):
        with pytest.raises(
            RunDirError, match=rf"verdicts\.jsonl.*{said.replace('(', '.').replace(')', '.')}"
        ):
            read(path, block_bytes)
