"""The import structure: the layer contracts of ``.importlinter`` hold (``lint-imports``), and no module of the
stack imports, directly or through others, a module that imports it back (a file-level import circle).

Imports under ``if TYPE_CHECKING:`` are annotations, not imports at run time, and are not counted; imports inside
functions are.
"""
from __future__ import annotations

from pathlib import Path

import grimp
from importlinter.cli import lint_imports

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("isa", "simulator", "jit_runtime", "compiler", "hw", "fpga", "vta")


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        circles.append(sorted(comp))
    return circles


def test_import_circles_found():
    """The circle finder itself: a three-module circle and a two-module one, beside modules outside any circle."""
    g = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"f"}, "f": {"e", "d"}, "g": {"a"}}
    assert sorted(import_circles(g)) == [["a", "b", "c"], ["e", "f"]]
    assert import_circles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_no_file_import_circle():
    graph = grimp.build_graph(*PACKAGES, cache_dir=None, exclude_type_checking_imports=True)
    edges = {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    circles = import_circles(edges)
    report = []
    for comp in circles:
        for m in comp:
            for i in sorted(edges[m] & set(comp)):
                lines = [d["line_number"] for d in graph.get_import_details(importer=m, imported=i)]
                report.append(f"  {m} -> {i} (line {', '.join(map(str, lines))})")
    assert not circles, "import circles between files:\n" + "\n".join(report)


def test_layer_contracts(capsys):
    """``lint-imports`` on ``.importlinter``: the stack's package order and compiler's own layers."""
    code = lint_imports(config_filename=str(ROOT / ".importlinter"), no_cache=True, no_logo=True)
    assert code == 0, capsys.readouterr().out
