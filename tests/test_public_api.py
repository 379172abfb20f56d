from __future__ import annotations

import ast
import inspect
import types

import pytest
from conftest import LoadedBy

import aeval
import aeval.batch
import aeval.batch.providers
import aeval.store
import aeval.verify


@pytest.mark.parametrize("name", aeval.__all__)
def test_every_public_name_resolves(name: str) -> None:
    assert getattr(aeval, name) is not None


def test_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_thing"):
        aeval.no_such_thing  # noqa: B018


def test_importing_the_package_stays_light(loaded_by: LoadedBy) -> None:
    # Verification workers import the package first; the heavy stacks must
    # load only when a name that needs them is used.
    assert loaded_by("import aeval", ("openai", "polars", "z3", "rich", "datasets")) == []


def test_all_lists_exactly_the_lazy_exports() -> None:
    assert sorted(aeval.__all__) == sorted(aeval._EXPORTS)


def _static_imports(package: types.ModuleType) -> dict[str, str]:
    """name -> module of the ``from M import name`` lines under ``if TYPE_CHECKING:``."""
    tree = ast.parse(inspect.getsource(package))
    blocks = [
        node
        for node in tree.body
        if isinstance(node, ast.If)
        and isinstance(node.test, ast.Name)
        and node.test.id == "TYPE_CHECKING"
    ]
    assert len(blocks) == 1, "one TYPE_CHECKING block, at the top level"
    seen: dict[str, str] = {}
    for node in blocks[0].body:
        assert isinstance(node, ast.ImportFrom), ast.unparse(node)
        for alias in node.names:
            assert alias.asname is None, ast.unparse(node)
            seen[alias.name] = str(node.module)
    return seen


def test_the_checkers_view_matches_the_lazy_table() -> None:
    # Type checkers and IDEs read the TYPE_CHECKING block; the interpreter
    # reads _EXPORTS: both must name the same things from the same modules.
    assert _static_imports(aeval) == aeval._EXPORTS


@pytest.mark.parametrize(
    "package", [aeval.verify, aeval.store, aeval.batch, aeval.batch.providers], ids=str
)
def test_a_subpackages_checkers_view_matches_its_lazy_table(package: types.ModuleType) -> None:
    lazy = package._LAZY
    assert _static_imports(package) == lazy
    eager = {n for n in package.__all__ if n not in lazy}
    assert eager <= set(vars(package)), "a name in __all__ neither lazy nor imported"
    for name in package.__all__:
        assert getattr(package, name) is not None


def test_reading_a_run_directory_or_a_models_provider_stays_light(loaded_by: LoadedBy) -> None:
    # A report needs the run directory's layout and a model's provider; the run
    # store's writers (anyio), the provider registry and the run configuration load
    # only for a run.
    heavy = ("anyio", "aeval.config", "aeval.batch.providers.registry", "aeval.store.run_store")
    assert loaded_by("import aeval.store.layout, aeval.model_names", heavy) == []
