from __future__ import annotations

import subprocess
import sys

import pytest

import aeval


@pytest.mark.parametrize("name", aeval.__all__)
def test_every_public_name_resolves(name: str) -> None:
    assert getattr(aeval, name) is not None


def test_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_thing"):
        aeval.no_such_thing  # noqa: B018


def test_importing_the_package_stays_light() -> None:
    # Verification workers import the package first; the heavy stacks must
    # load only when a name that needs them is used.
    code = (
        "import sys, aeval; "
        "heavy = [m for m in ('openai', 'polars', 'z3', 'rich', 'datasets') if m in sys.modules]; "
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_all_lists_exactly_the_lazy_exports() -> None:
    assert sorted(aeval.__all__) == sorted(aeval._EXPORTS)
