"""The house's rules, checked on the source (docs/architecture.md): the command line goes
through the front door only, and no module of ``src/agentv`` takes part in an import cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src"
PACKAGE = SRC / "agentv"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def _resolve(module: str, node: ast.ImportFrom) -> str:
    """The absolute module an ``ImportFrom`` names (relative imports made absolute)."""
    if not node.level:
        return node.module or ""
    base = module.split(".")
    if MODULES[module].name != "__init__.py":
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def imports(module: str, *, top_level_only: bool) -> set[str]:
    """The agentv modules ``module`` imports: all of them, or only those imported when it is
    (module level, outside ``if TYPE_CHECKING:``), with ``from x import y`` naming the
    submodule ``x.y`` when there is one."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    found: set[str] = set()

    def visit(nodes: list[ast.stmt]) -> None:
        for node in nodes:
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name.split(".")[0] == "agentv")
            elif isinstance(node, ast.ImportFrom):
                source = _resolve(module, node)
                if source.split(".")[0] != "agentv":
                    continue
                for alias in node.names:
                    sub = f"{source}.{alias.name}"
                    found.add(sub if sub in MODULES else source)
            elif isinstance(node, ast.If) and top_level_only:
                test = node.test
                checking = isinstance(test, ast.Name) and test.id == "TYPE_CHECKING"
                if not checking:
                    visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try | ast.If | ast.With) and top_level_only:
                for block in ("body", "orelse", "finalbody", "handlers"):
                    for part in getattr(node, block, []):
                        visit(part.body if isinstance(part, ast.ExceptHandler) else [part])
            elif not top_level_only:
                visit(list(ast.iter_child_nodes(node)))  # type: ignore[arg-type]

    if top_level_only:
        visit(tree.body)
    else:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                visit([node])
    return found


def test_the_command_line_imports_only_the_front_door() -> None:
    allowed = {"agentv", "agentv.api", "agentv.errors"}
    cli = sorted(m for m in MODULES if m == "agentv.cli" or m.startswith("agentv.cli."))
    assert "agentv.cli.eval" in cli
    stray = {
        module: sorted(
            name
            for name in imports(module, top_level_only=False)
            if name not in allowed and not name.startswith("agentv.cli")
        )
        for module in cli
    }
    assert {m: names for m, names in stray.items() if names} == {}


def test_the_command_line_takes_only_the_version_from_the_package_root() -> None:
    for module in (m for m in MODULES if m.startswith("agentv.cli")):
        tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "agentv":
                assert [a.name for a in node.names] == ["__version__"], module


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module, or a module importing
    itself (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def connect(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph.get(v, ()):
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return found


def _parents(module: str) -> set[str]:
    """Packages whose ``__init__`` runs when ``module`` is imported."""
    parts = module.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts)) if ".".join(parts[:i]) in MODULES}


def test_no_import_cycle_in_src_agentv() -> None:
    graph: dict[str, set[str]] = {}
    for module in MODULES:
        targets = imports(module, top_level_only=True)
        # importing a.b.c runs a/__init__ and a/b/__init__ first
        targets |= {p for t in targets for p in _parents(t)}
        graph[module] = {t for t in targets if t in MODULES and t != module} - _parents(module)
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    # the check above could not fail if this did not
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


@pytest.mark.parametrize("module", ["agentv.cli.eval", "agentv.cli.report"])
def test_the_import_finder_sees_imports_inside_functions(module: str) -> None:
    assert "agentv.api" in imports(module, top_level_only=False)


def _full_graph() -> dict[str, set[str]]:
    """Every import between agentv's modules, those inside functions and under
    ``TYPE_CHECKING`` included, with the packages each import runs."""
    graph: dict[str, set[str]] = {}
    for module in MODULES:
        targets = imports(module, top_level_only=False)
        targets |= {p for t in targets for p in _parents(t)}
        graph[module] = {t for t in targets if t in MODULES and t != module} - _parents(module)
    return graph


def test_no_import_cycle_outside_the_run_counting_every_import() -> None:
    """No cycle leaves ``run/``, even through an import inside a function or one made only
    for type checking: the vocabulary (messages, cases) sits below the prompts and the
    providers, those below the evaluators, and the evaluators below the eval files."""
    cycles = _cycles(_full_graph())
    assert [c for c in cycles if not all(m.startswith("agentv.run.") for m in c)] == []


def test_grading_never_reaches_back_into_loading() -> None:
    """The evaluators know nothing of eval files: the loader asks each evaluator to check its
    own settings (``EvaluatorSpec.check``), never the other way round."""
    graph = _full_graph()
    grading = sorted(m for m in MODULES if m.startswith("agentv.evaluators"))
    assert "agentv.evaluators.registry" in grading
    stray = {m: sorted(t for t in graph[m] if t.startswith("agentv.evalfile")) for m in grading}
    assert {m: names for m, names in stray.items() if names} == {}


@pytest.mark.parametrize(
    ("module", "below"),
    [
        ("agentv.cases", ("agentv.evaluators", "agentv.prompts", "agentv.providers")),
        ("agentv.messages", ("agentv.cases", "agentv.evaluators", "agentv.providers")),
        ("agentv.providers.base", ("agentv.cases", "agentv.prompts", "agentv.evaluators")),
        ("agentv.providers.pricing", ("agentv.providers.base",)),
        ("agentv.system.masking", ("agentv.system.env", "agentv.providers")),
        ("agentv.system.env", ("agentv.system.masking",)),
    ],
)
def test_the_vocabulary_imports_nothing_above_it(module: str, below: tuple[str, ...]) -> None:
    """What others build on names them through Protocols, not imports
    (docs/architecture.md, "Layers")."""
    found = imports(module, top_level_only=False)
    assert sorted(t for t in found if t.startswith(below)) == []
