"""The package's import graph: no circle, no arrow back up, one reader of the run directory.

What counts as an arrow ``a -> b``: every ``import``/``from ... import`` of an aeval
module written in ``a``, at module level *and* inside functions (a deferred import
is still a dependency: it only moves when it is paid), *and* under
``if TYPE_CHECKING:`` (a type is part of what a module means). A ``from p import n``
where ``p.n`` is a module is an arrow to that module, else to ``p``. Not counted:
the parent packages Python runs on the way (``__init__`` of ``p`` for ``p.m``) and
names resolved at run time from strings (the lazy ``__getattr__`` maps,
``importlib.import_module``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "aeval"

# Circles not cut yet, each named (none today: a new circle fails the test).
KNOWN_CIRCLES: set[frozenset[str]] = set()

# Layers, lowest first, as docs/design.md orders them: a module imports only its
# own layer and those below. Packages not named here are not checked.
LAYERS: list[set[str]] = [
    # the vocabulary
    {"errors", "api_settings", "json_values", "reasoning", "prompts", "config", "cost", "events"}
    | {"verdicts"},
    {"store"},  # the run directory
    {"batch"},  # the batch lifecycle and the providers
    {"engine"},  # the run: planning, scoring, drivers
    {"commands", "cli", "__main__"},  # the command line, above everything
]

# Arrows back up that exist today, each named; the list only shrinks.
KNOWN_UPWARD: set[tuple[str, str]] = {
    # RunConfig refuses a setting a provider would reject when it is made (public
    # behaviour): the check is the batch layer's, deferred inside the method. To cut:
    # the run (or the CLI) asks the registry, and RunConfig stops knowing providers.
    ("aeval.config", "aeval.batch.providers.registry"),
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def import_graph() -> dict[str, set[str]]:
    """Every aeval module and the aeval modules it imports (as the docstring counts)."""
    paths = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in paths}

    def target(name: str) -> str | None:
        while name not in paths and "." in name:
            name = name.rsplit(".", 1)[0]
        return name if name in paths else None

    for name, path in paths.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            found: list[str] = []
            if isinstance(node, ast.Import):
                found = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package[: len(package) - node.level + 1]
                    base = ".".join([*up, *([node.module] if node.module else [])])
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    found.append(full if full in paths else base)
            for imported in found:
                module = target(imported) if imported.startswith("aeval") else None
                if module is not None and module != name:
                    graph[name].add(module)
    return graph


def circles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def layer_of(module: str) -> int | None:
    top = module.split(".")[1] if "." in module else module
    for level, members in enumerate(LAYERS):
        if top in members:
            return level
    return None


def test_the_graph_sees_the_imports_it_says_it_counts() -> None:
    graph = import_graph()
    assert "aeval.engine.driver_context" in graph["aeval.engine.batch_driver"]  # TYPE_CHECKING
    assert "aeval.batch.providers.registry" in graph["aeval.config"]  # inside a method
    assert "aeval.verdicts" in graph["aeval.store.run_store"]  # module level


def test_no_import_circle() -> None:
    found = set(circles(import_graph()))
    new = found - KNOWN_CIRCLES
    assert not new, "import circles: " + "; ".join(" <-> ".join(sorted(c)) for c in new)
    gone = KNOWN_CIRCLES - found
    assert not gone, f"cut, so take them off KNOWN_CIRCLES: {gone}"


def test_a_circle_is_found_where_there_is_one() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [frozenset({"a", "b", "c"})]


def test_no_import_runs_back_up() -> None:
    upward = set()
    for module, imported in import_graph().items():
        here = layer_of(module)
        for target in imported:
            there = layer_of(target)
            if here is not None and there is not None and there > here:
                upward.add((module, target))
    assert upward - KNOWN_UPWARD == set()
    assert KNOWN_UPWARD - upward == set()


FILE_NAMES = (
    "verdicts.jsonl",
    "verdicts.parquet",
    "summary.json",
    "config.json",
    "manifest.json",
    "verdict-cache.jsonl",
    "run.lock",
    "submit-hold.json",
)


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: module_name(p))
def test_only_the_store_names_a_run_directory_file(path: Path) -> None:
    # Every run-directory file is reached through aeval.store (RunLayout and its
    # readers): a file name or a glob of the directory elsewhere is a second reader.
    if path.relative_to(PACKAGE).parts[0] == "store":
        return
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    named = [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
        and any(node.value == n or node.value.endswith("/" + n) for n in FILE_NAMES)
    ]
    globs = [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("glob", "rglob")
        and any(
            isinstance(a, ast.Constant) and isinstance(a.value, str) and "summary" in a.value
            for a in node.args
        )
    ]
    assert named == [] and globs == []
