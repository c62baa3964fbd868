"""The house's rules, checked on the source (docs/architecture.md): the command line goes
through the front door only, and no module of ``src/agentv`` takes part in an import cycle.
"""

from __future__ import annotations

import ast
import importlib
import re
import sys
from pathlib import Path
from typing import Any

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


def test_no_import_cycle_in_src_agentv() -> None:
    """No module of ``src/agentv`` takes part in an import cycle, counting imports inside
    functions and those made only for type checking (docs/architecture.md, "Layers"): the
    vocabulary (messages, cases) sits below the prompts and the providers, those below the
    evaluators, the evaluators below the eval files, and a case's run goes one way (plan ->
    sending -> pipeline / conversation / simulator)."""
    assert _cycles(_full_graph()) == []


def test_the_import_finder_sees_type_checking_imports() -> None:
    # providers/base imports pricing for type checking only: the strict check counts it
    assert "agentv.providers.pricing" in imports("agentv.providers.base", top_level_only=False)
    assert "agentv.providers.pricing" not in imports("agentv.providers.base", top_level_only=True)


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


def test_the_sender_is_shared_and_never_imports_who_uses_it() -> None:
    users = {"agentv.run.pipeline", "agentv.run.conversation", "agentv.run.simulator"}
    for module in users:
        assert "agentv.run.sending" in imports(module, top_level_only=False), module
    assert imports("agentv.run.sending", top_level_only=False) & users == set()
    assert "agentv.run.pipeline" not in imports("agentv.run.conversation", top_level_only=False)
    assert "agentv.run.pipeline" not in imports("agentv.run.simulator", top_level_only=False)
    assert "agentv.run.conversation" not in imports("agentv.run.plan", top_level_only=False)


def _calls_of(name: str, tree: ast.AST, where: str = "<module>") -> set[str]:
    """The functions of ``tree`` (``<module>``: outside any) that call ``name``."""
    found: set[str] = set()
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            found |= _calls_of(name, node, node.name)
            continue
        if isinstance(node, ast.Call):
            called = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
            if called == name:
                found.add(where)
        found |= _calls_of(name, node, where)
    return found


def test_an_evaluation_context_is_made_in_one_function() -> None:
    made = {
        (module, function)
        for module, path in MODULES.items()
        for function in _calls_of("EvaluationContext", ast.parse(path.read_text("utf-8")))
    }
    assert made == {("agentv.run.sending", "grading_context")}
    # the finder sees calls at module level and in nested functions alike
    code = "x = EvaluationContext()\ndef f():\n    def g():\n        return m.EvaluationContext()\n"
    assert _calls_of("EvaluationContext", ast.parse(code)) == {"<module>", "g"}


# --- libraries through their public API only ------------------------------------------------

#: the libraries whose private modules and names no module of agentv may import
SDKS = ("openai", "anthropic", "google.genai", "httpx", "httpx2", "aiohttp")
_SDK_PATH = re.compile(r"(?:openai|anthropic|google\.genai|httpx2?|aiohttp)(?:\.\w+)+")


def _private(name: str) -> bool:
    """A ``_name``, not a ``__dunder__``."""
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _from_sdk(module: str) -> bool:
    return any(module == sdk or module.startswith(f"{sdk}.") for sdk in SDKS)


def agentv_names(trees: list[ast.Module]) -> set[str]:
    """Every ``_name`` agentv binds itself: functions, classes, names assigned (at any
    level), attributes assigned (``x._name = ...``), ``__slots__`` entries and the names
    given to ``setattr`` / ``object.__setattr__``."""
    names: set[str] = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.Call) and ast.unparse(node.func) in (
                "setattr",
                "object.__setattr__",
            ):
                names.update(_strings(node.args[1:2]))
            elif isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__slots__" for t in node.targets
            ):
                names.update(_strings(list(ast.walk(node.value))))
    return {n for n in names if _private(n)}


def _strings(nodes: list[ast.AST]) -> list[str]:
    return [n.value for n in nodes if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def _resolve_base(expression: ast.expr, namespace: dict[str, Any]) -> type | None:
    """The class a base expression names in the module's namespace (None: it cannot be
    named there, as a class made from a function's argument)."""
    if isinstance(expression, ast.Subscript):  # Generic[T]
        expression = expression.value
    parts: list[str] = []
    while isinstance(expression, ast.Attribute):
        parts.insert(0, expression.attr)
        expression = expression.value
    if not isinstance(expression, ast.Name) or expression.id not in namespace:
        return None
    found: Any = namespace[expression.id]
    for part in parts:
        found = getattr(found, part, None)
    return found if isinstance(found, type) else None


def _foreign(cls: type) -> list[type]:
    """The classes of ``cls``'s MRO that are not agentv's (``object`` aside)."""
    return [c for c in cls.__mro__ if c.__module__.split(".")[0] != "agentv" and c is not object]


#: bases that hold no state of their own: a class on them alone reads only its own
_STATELESS = {"builtins", "abc", "typing", "typing_extensions"}


def private_uses(
    module: str, tree: ast.Module, namespace: dict[str, Any], ours: set[str]
) -> list[str]:
    """What ``tree`` (the module ``module``, its namespace once imported) uses of other
    libraries' private parts; ``ours``: the ``_names`` agentv binds (``agentv_names``)."""
    found: list[str] = []
    where = f"{module}:{{}}"
    stdlib_modules: set[str] = set()  # names bound to a standard library module
    for node in ast.walk(tree):
        line = where.format(getattr(node, "lineno", "?"))
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _from_sdk(alias.name) and any(map(_private, alias.name.split("."))):
                    found.append(f"{line}: imports {alias.name}")
                if alias.name.split(".")[0] in sys.stdlib_module_names:
                    stdlib_modules.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and not node.level:
            source = node.module or ""
            names = [a.name for a in node.names]
            if _from_sdk(source) and any(map(_private, [*source.split("."), *names])):
                found.append(f"{line}: imports {', '.join(names)} from {source}")
            if source.split(".")[0] in sys.stdlib_module_names:
                stdlib_modules.update(a.asname or a.name for a in node.names)
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and _SDK_PATH.fullmatch(node.value)  # a module named by its path (importlib)
            and any(map(_private, node.value.split(".")))
        ):
            found.append(f"{line}: names the module {node.value}")
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            found += _class_uses(module, node, namespace, ours)
    for node in ast.walk(tree):
        line = where.format(getattr(node, "lineno", "?"))
        attribute = _read_attribute(node)
        if attribute is None:
            continue
        receiver, name = attribute
        if isinstance(receiver, ast.Name) and receiver.id in ("self", "cls"):
            continue  # checked for each class (_class_uses)
        if _is_super(receiver):
            continue  # likewise
        if isinstance(receiver, ast.Name) and receiver.id in stdlib_modules:
            continue  # os._exit and the like: the standard library documents them
        if name not in ours:
            found.append(f"{line}: reads {ast.unparse(receiver)}.{name}")
    return found


def _read_attribute(node: ast.AST) -> tuple[ast.expr, str] | None:
    """``(receiver, name)`` when ``node`` reads a ``_name`` attribute: ``x._name`` or
    ``getattr(x, "_name")`` / ``hasattr(x, "_name")``."""
    if isinstance(node, ast.Attribute) and _private(node.attr):
        if isinstance(node.ctx, ast.Load):
            return node.value, node.attr
    elif (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("getattr", "hasattr")
        and len(node.args) >= 2
    ):
        name = _strings(node.args[1:2])
        if name and _private(name[0]):
            return node.args[0], name[0]
    return None


def _is_super(node: ast.expr) -> bool:
    return isinstance(node, ast.Call) and ast.unparse(node.func) == "super"


def _class_uses(
    module: str, node: ast.ClassDef, namespace: dict[str, Any], ours: set[str]
) -> list[str]:
    """A class's overrides of another library's ``_names`` (any ``_`` member when a base
    cannot be named), and its reads of ``self._name`` / ``super()._name`` that it does not
    bind itself while a base is another library's."""
    found: list[str] = []
    where = f"{module}:{node.lineno}: class {node.name}"
    bases = [_resolve_base(b, namespace) for b in node.bases]
    members = {
        n.name
        for n in node.body
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and _private(n.name)
    } | {
        t.id
        for n in node.body
        if isinstance(n, ast.Assign | ast.AnnAssign)
        for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
        if isinstance(t, ast.Name) and _private(t.id)
    }
    unnamed = [ast.unparse(b) for b, cls in zip(node.bases, bases, strict=True) if cls is None]
    foreign = [c for cls in bases if cls is not None for c in _foreign(cls)]
    for name in sorted(members):
        if unnamed:
            found.append(f"{where} (on {', '.join(unnamed)}) defines {name}")
        for cls in foreign:
            if name in vars(cls):
                found.append(f"{where} overrides {cls.__module__}.{cls.__qualname__}.{name}")
    if not unnamed and all(c.__module__ in _STATELESS for c in foreign):
        return found
    # its own: what the class binds anywhere in its body, and what agentv's bases define
    own = agentv_names([ast.Module(body=node.body, type_ignores=[])])
    for cls in bases:
        if cls is not None and cls.__module__.split(".")[0] == "agentv":
            own |= {n for c in cls.__mro__ for n in vars(c) if _private(n)} & ours
    for inner in ast.walk(node):
        attribute = _read_attribute(inner)
        if attribute is None:
            continue
        receiver, name = attribute
        is_self = isinstance(receiver, ast.Name) and receiver.id in ("self", "cls")
        if (is_self and name not in own) or (_is_super(receiver) and name not in own - members):
            found.append(f"{where} reads {ast.unparse(receiver)}.{name} of another library")
    return found


def test_other_libraries_are_used_through_their_public_api_only() -> None:
    """No module of ``src/agentv`` uses the private parts of another library (the SDKs,
    httpx2, aiohttp above all; docs/architecture.md, "Providers"). The rules, by source:

    - no import of a ``_module`` or a ``_name`` from openai, anthropic, google.genai,
      httpx, httpx2 or aiohttp, nor such a module named in a string (``importlib``);
    - no class overrides a ``_name`` that a base of another library defines (the bases are
      looked up in the imported module); a class on a base that cannot be named there (a
      class made in a function from its argument) defines no ``_name`` at all;
    - a class with a base of another library reads ``self._name`` / ``super()._name`` only
      for names it binds itself or an agentv base defines (the library's instance
      attributes are not visible on its class);
    - elsewhere, in every module (asyncio's and subprocess's objects are libraries' too),
      ``x._name`` (and ``getattr(x, "_name")``) reads only names agentv binds somewhere (``agentv_names``), or those of a standard
      library module (``os._exit``). A library's private attribute that happens to share
      its name with one of agentv's passes this conservative rule; the rules above catch
      the subclasses that read them.
    """
    trees = {
        module: ast.parse(path.read_text(encoding="utf-8")) for module, path in MODULES.items()
    }
    ours = agentv_names(list(trees.values()))
    found = []
    for module, tree in sorted(trees.items()):
        # a ``__main__`` runs when imported: its classes are looked up in nothing
        main = module.endswith("__main__")
        namespace = {} if main else vars(importlib.import_module(module))
        found += private_uses(module, tree, namespace, ours)
    assert found == []


PRIVATE_USES = """
import httpx2
from openai._models import FinalRequestOptions
from httpx2 import _client
import openai._types

def lean(client_class):
    class Client(client_class):
        def _prepare_url(self, url):
            return super()._prepare_url(url)

    return Client

class Client(httpx2.AsyncClient):
    def _send_single_request(self, request):
        return self._transport

class Transport(httpx2.AsyncBaseTransport):
    def __init__(self):
        self._mine = 1

    def _own(self):
        return self._mine

def header(client):
    module = importlib.import_module("openai._models")
    return client._idempotency_header, getattr(client, "_auth_headers")
"""


def test_the_public_api_check_finds_private_uses() -> None:
    # the check above could not fail if this did not
    tree = ast.parse(PRIVATE_USES)
    namespace: dict[str, Any] = {}
    exec(compile("import httpx2", "<sample>", "exec"), namespace)
    found = private_uses("sample", tree, namespace, agentv_names([tree]))
    assert found == [
        "sample:3: imports FinalRequestOptions from openai._models",
        "sample:4: imports _client from httpx2",
        "sample:5: imports openai._types",
        "sample:26: names the module openai._models",
        "sample:14: class Client overrides httpx2.AsyncClient._send_single_request",
        "sample:14: class Client reads self._transport of another library",
        "sample:8: class Client (on client_class) defines _prepare_url",
        "sample:8: class Client reads super()._prepare_url of another library",
        "sample:27: reads client._idempotency_header",
        "sample:27: reads client._auth_headers",
    ]


def test_source_comments_cite_the_manual_not_the_benchmarks_notes() -> None:
    # benchmarks/README.md holds the current figures and moves with every measurement; what
    # the code relies on is said in docs/ (speed.md, architecture.md)
    citing = sorted(
        module
        for module, path in MODULES.items()
        if "benchmarks/README" in path.read_text(encoding="utf-8")
    )
    assert citing == []
