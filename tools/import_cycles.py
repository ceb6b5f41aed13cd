"""Report the import cycles in retrace's own code, between modules and between packages.

    python tools/import_cycles.py [CHECKOUT]    # exit 1 when there is a cycle

Every import counts, wherever it is written: at module level, inside a function
(a lazy import only hides a cycle until that function runs) and under
``if TYPE_CHECKING:`` (the type checker follows it); each edge of a cycle says
which it is. Sources are read, not imported, so nothing runs and no driver is
needed. backends/ and writer/ are read as retrace.backends and retrace.writer,
where pyproject.toml installs them.

Modules are the nodes of the first graph. In the second, each subpackage of
retrace (retrace.replay with its retrace.replay.ws, retrace.profile,
retrace.backends, ...) is one node and each module directly in retrace/ its own:
a cycle there means two parts of the program that cannot be understood, or
changed, one without the other.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # or the checkout given
# where each top-level package's sources are (pyproject.toml's package-dir)
SOURCES = {"retrace": "retrace", "retrace.backends": "backends", "retrace.writer": "writer"}

Edges = dict[str, dict[str, str]]  # importer -> imported -> how ("", "lazy", "typing")


def modules(root: Path) -> dict[str, Path]:
    """Every module of the project by dotted name (a package by its __init__)."""
    found: dict[str, Path] = {}
    for package, folder in SOURCES.items():
        for path in sorted((root / folder).rglob("*.py")):
            parts = path.relative_to(root / folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join((package, *parts))] = path
    return found


def _imported(node: ast.AST, importer: str, is_package: bool) -> list[str]:
    """The dotted names one import statement names (modules, or names inside them)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    assert isinstance(node, ast.ImportFrom)
    base = node.module or ""
    if node.level:
        parent = importer.split(".")
        parent = parent[: len(parent) - node.level + (1 if is_package else 0)]
        base = ".".join(filter(None, (*parent, base)))
    return [f"{base}.{alias.name}" for alias in node.names] + [base]


def _how(stack: list[ast.AST]) -> str:
    """Whether an import runs with its module ("") or later: in a function, or only for
    the type checker."""
    for node in stack:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return "typing"
    if any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) for n in stack):
        return "lazy"
    return ""


def import_graph(found: dict[str, Path]) -> Edges:
    """importer -> the project modules it imports, and how."""
    edges: Edges = defaultdict(dict)
    for name, path in found.items():
        tree = ast.parse(path.read_text(), str(path))
        todo: list[tuple[ast.AST, list[ast.AST]]] = [(tree, [])]
        while todo:
            node, stack = todo.pop()
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in _imported(node, name, path.name == "__init__.py"):
                    # `from pkg import mod` names a module; `from mod import f` a function
                    while target and target not in found:
                        target = target.rpartition(".")[0]
                    if target and target != name:
                        how = _how(stack)
                        earlier = edges[name].get(target)
                        edges[name][target] = how if earlier is None else min(earlier, how)
            for child in ast.iter_child_nodes(node):
                todo.append((child, [*stack, node]))
    return edges


def package_of(module: str) -> str:
    """retrace.replay.ws.core -> retrace.replay; retrace.main -> retrace.main."""
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else module


def collapse(edges: Edges) -> Edges:
    """The graph between packages: an edge for every module edge that crosses two."""
    out: Edges = defaultdict(dict)
    for importer, targets in edges.items():
        for target, how in targets.items():
            a, b = package_of(importer), package_of(target)
            if a != b:
                out[a][b] = min(out[a].get(b, how), how)
    return out


def cycles(edges: Edges) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(edges.get(node, {})):
            if target not in index:
                visit(target)
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

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return sorted(found)


def report(title: str, edges: Edges) -> int:
    """Print each cycle with the edges inside it; the number of cycles."""
    found = cycles(edges)
    print(f"{title}: {len(found)} cycle{'s' if len(found) != 1 else ''}")
    for component in found:
        members = set(component)
        print(f"  {', '.join(component)}")
        for importer in component:
            for target, how in sorted(edges.get(importer, {}).items()):
                if target in members:
                    print(f"    {importer} -> {target}" + (f" ({how})" if how else ""))
    return len(found)


def main() -> int:
    sys.setrecursionlimit(10_000)
    edges = import_graph(modules(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT))
    total = report("modules", edges) + report("packages", collapse(edges))
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
