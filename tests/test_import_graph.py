"""The product's import graph, read from the source: no module imports itself back through
others, no two packages import each other, and the top-level packages are layered (``tiered`` is
what the daemons and tools share and imports none of them; the daemons and the tools import
``tiered`` only). Imports under ``TYPE_CHECKING`` are not run, so they do not count."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from tests.support.processes import REPO

ROOT = Path(REPO)
TOP_LEVEL = ("tiered", "controller", "broker", "cli")
ALLOWED = {"tiered": set(), "controller": {"tiered"}, "broker": {"tiered"}, "cli": {"tiered"}}


def _modules() -> dict[str, Path]:
    found = {}
    for top in TOP_LEVEL:
        for path in (ROOT / top).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            name = ".".join(parts)
            if not name.startswith("tiered.rpc.v1"):  # generated code
                found[name] = path
    return found


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imported(name: str, path: Path, modules: Mapping[str, Path]) -> set[str]:
    """The product modules ``name`` imports when it runs (function bodies included)."""
    is_package = path.name == "__init__.py"
    named: set[str] = set()

    def visit(body: Iterable[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.If) and _is_type_checking(node):
                visit(node.orelse)
                continue
            if isinstance(node, ast.Import):
                named.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = name.split(".") if is_package else name.split(".")[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    module = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    module = node.module or ""
                for alias in node.names:
                    # ``from package import submodule`` imports the submodule, and the package
                    # only as far as loading it needs (not the names it defines).
                    full = f"{module}.{alias.name}"
                    named.add(full if full in modules else module)
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.stmt):
                    visit([child])

    visit(ast.parse(path.read_text()).body)
    resolved = set()
    for imported in named:
        target = imported
        while target and target not in modules:
            target = target.rpartition(".")[0]
        if target and target != name:
            resolved.add(target)
    return resolved


def _cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(node: str) -> Iterator[None]:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                yield from connect(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))
        yield

    for node in sorted(graph):
        if node not in index:
            for _ in connect(node):
                pass
    return found


MODULES = _modules()
GRAPH = {name: _imported(name, path, MODULES) for name, path in MODULES.items()}


def _package(module: str) -> str:
    return module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]


def test_no_module_imports_itself_back() -> None:
    assert _cycles(GRAPH) == []


def test_no_two_packages_import_each_other() -> None:
    packages: dict[str, set[str]] = {}
    for module, targets in GRAPH.items():
        source = _package(module)
        for target in map(_package, targets):
            related = target.startswith(source + ".") or source.startswith(target + ".")
            if target != source and not related:  # a package and its own subpackages aside
                packages.setdefault(source, set()).add(target)
    assert _cycles(packages) == []


def test_the_top_level_packages_are_layered() -> None:
    crossings = sorted(
        f"{module} -> {target}"
        for module, targets in GRAPH.items()
        for target in targets
        if (source := module.split(".")[0]) != (dest := target.split(".")[0])
        and dest not in ALLOWED[source]
    )
    assert crossings == []


def test_the_graph_is_read() -> None:
    # The checks above pass on an empty graph too: make sure it holds what it should.
    assert len(MODULES) > 200
    assert "tiered.errors" in GRAPH["controller.controller"] | set().union(
        *(GRAPH[m] for m in GRAPH["controller.controller"])
    )
