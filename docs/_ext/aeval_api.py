"""Sphinx extension: the API reference covers every public name, or the build fails.

autodoc documents what ``aeval.__all__`` and each public subpackage's ``__all__`` name
(docs/api.md lists the modules, never the names). ``automodule`` leaves out the
constants and type aliases that ``aeval`` re-exports (a value carries no module of its
own), so the ``aeval-public-values`` directive documents each name of ``aeval.__all__``
that is neither a class nor a function with ``autodata``, read from ``__all__`` at build
time. At ``env-check-consistency`` every name of ``aeval.__all__`` must have an entry
in the reference: a public name left out is an error, not a gap.
"""

from __future__ import annotations

from typing import Any

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment
from sphinx.errors import ExtensionError, PycodeError
from sphinx.pycode import ModuleAnalyzer
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import nested_parse_with_titles

import aeval


def public_values() -> list[str]:
    """The names of ``aeval.__all__`` that are neither classes nor functions."""
    return [n for n in aeval.__all__ if not callable(getattr(aeval, n)) or _is_alias(n)]


def _is_alias(name: str) -> bool:
    """A type alias such as a ``Union`` of event classes (callable on some Pythons)."""
    value = getattr(aeval, name)
    return not isinstance(value, type) and not hasattr(value, "__code__")


def _doc_lines(name: str) -> list[str]:
    """The ``#:`` comment or docstring beside ``name`` in the module that defines it."""
    module = aeval._EXPORTS[name]
    try:
        docs = ModuleAnalyzer.for_module(module).find_attr_docs()
    except PycodeError:
        docs = {}
    found = list(docs.get(("", name), []))
    return [*found, "", f"Defined in ``{module}``."]


class PublicValues(SphinxDirective):
    """A ``py:data`` entry for every value in ``aeval.__all__`` (used on a MyST page)."""

    def run(self) -> list[nodes.Node]:
        rst: list[str] = []
        for name in public_values():
            value = f"   :value: {getattr(aeval, name)!r}"
            rst += [f".. py:data:: {name}", "   :module: aeval", value, ""]
            rst += [f"   {line}" if line else "" for line in _doc_lines(name)]
            rst.append("")
        # The page is Markdown: hand the reST to MyST's own eval-rst block.
        lines = StringList()
        for line in ("```{eval-rst}", *rst, "```"):
            lines.append(line, "aeval_api")
        container = nodes.section()
        container.document = self.state.document
        nested_parse_with_titles(self.state, lines, container)
        return list(container.children)


def _check(app: Sphinx, env: BuildEnvironment) -> None:
    documented = set(env.get_domain("py").objects)  # type: ignore[attr-defined]
    missing = sorted(name for name in aeval.__all__ if f"aeval.{name}" not in documented)
    if missing:
        raise ExtensionError(
            f"the API reference (docs/api.md) has no entry for aeval.{', aeval.'.join(missing)}"
        )


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("aeval-public-values", PublicValues)
    app.connect("env-check-consistency", _check)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
