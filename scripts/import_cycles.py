#!/usr/bin/env python3
"""Import circles in odradek: the strongly connected components of its import graph.

    /work/main/.venv/bin/python scripts/import_cycles.py    (from the repository root)

grimp builds the graph of every `import` statement in `odradek/`. Three graphs are
reported, from the widest to the one Python actually executes at import time:

- all imports, function-local ones included (an import moved into a function to
  dodge a circle still shows here),
- module-level imports including those under `if TYPE_CHECKING:`,
- module-level imports excluding `if TYPE_CHECKING:` (the runtime graph).

A component of more than one module is a circle: every module in it reaches every
other one. Each is printed with one shortest cycle through it, so the edge to cut
can be seen. The exit status is 1 when the widest graph has a circle: hiding an
import in a function or under TYPE_CHECKING does not break a circle, it only moves
it from import time to call time or to the type checker.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

import grimp

PACKAGE = "odradek"

Graph = dict[str, set[str]]


def _function_local_lines(path: Path) -> set[int]:
    """Line numbers of the import statements that sit inside a function body."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            for inner in ast.walk(node):
                if isinstance(inner, (ast.Import, ast.ImportFrom)):
                    lines.add(inner.lineno)
    return lines


def _module_path(module: str, root: Path) -> Path:
    base = root.joinpath(*module.split("."))
    return base / "__init__.py" if base.is_dir() else base.with_suffix(".py")


def build(*, exclude_type_checking: bool, module_level_only: bool, root: Path) -> Graph:
    """importer -> set of imported modules, within the package."""
    g = grimp.build_graph(
        PACKAGE, exclude_type_checking_imports=exclude_type_checking, cache_dir=None
    )
    local_lines: dict[str, set[int]] = {}
    edges: Graph = {m: set() for m in g.modules}
    for importer in g.modules:
        for imported in g.find_modules_directly_imported_by(importer):
            if module_level_only:
                if importer not in local_lines:
                    local_lines[importer] = _function_local_lines(_module_path(importer, root))
                details = g.get_import_details(importer=importer, imported=imported)
                if all(d["line_number"] in local_lines[importer] for d in details):
                    continue
            edges[importer].add(imported)
    return edges


def strongly_connected(edges: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative; components of two or more modules, largest first."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
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
    return sorted(found, key=lambda c: (-len(c), c))


def shortest_cycle(edges: Mapping[str, Iterable[str]], component: list[str]) -> list[str]:
    """A shortest cycle through the component's first module, by breadth-first search."""
    members = set(component)
    start = component[0]
    parents: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for node in frontier:
            for child in sorted(edges[node]):
                if child not in members:
                    continue
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(parents[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if child not in parents:
                    parents[child] = node
                    nxt.append(child)
        frontier = nxt
    return []


def short(module: str) -> str:
    return module.removeprefix(PACKAGE + ".")


def report(title: str, edges: Graph) -> int:
    components = strongly_connected(edges)
    print(f"== {title}: {len(components)} circle(s)")
    for component in components:
        print(f"  {len(component)} modules: " + ", ".join(short(m) for m in component))
        print("    e.g. " + " -> ".join(short(m) for m in shortest_cycle(edges, component)))
    return len(components)


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(description=__doc__.split("\n", 1)[0]).parse_args(argv)
    root = Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(root))
    circles = report(
        "all imports (function-local included)",
        build(exclude_type_checking=False, module_level_only=False, root=root),
    )
    report(
        "module-level imports, TYPE_CHECKING included",
        build(exclude_type_checking=False, module_level_only=True, root=root),
    )
    report(
        "module-level imports, TYPE_CHECKING excluded",
        build(exclude_type_checking=True, module_level_only=True, root=root),
    )
    return 1 if circles else 0


if __name__ == "__main__":
    sys.exit(main())
