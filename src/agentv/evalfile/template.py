"""Templates of cases: ``{{ column }}`` placeholders filled from a data row and variables
(docs/eval-files.md, "Cases from data").

A template is any YAML value; each string in it holding ``{{``, ``{%`` or ``{#`` is a Jinja
template, rendered in a sandbox (no access to Python internals) where a name that is
neither a column nor a variable is an error, never an empty string. Everything else is
kept as written, shared by every case made from it. A string that is exactly one
``{{ expression }}`` whose value is a list or a mapping (a JSONL or Parquet column holding
messages, turns, facts) gives that value itself, so it can fill a list; any other value is
written as text (``null`` as nothing, ``true``/``false`` in lower case, lists and mappings
inside text as JSON).

Each string is compiled once; the common ones (text with bare ``{{ name }}`` placeholders)
are filled without Jinja's machinery, with the same result.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from jinja2 import StrictUndefined, TemplateSyntaxError, Undefined, UndefinedError, meta, nodes
from jinja2.exceptions import SecurityError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from agentv.evalfile.variables import text_of
from agentv.yaml.source import PathKey

_MARKERS = ("{{", "{%", "{#")
#: the names a judge prompt fills itself (docs/eval-files.md, "llm_judge"): inside a
#: template they are kept for the judge, unless a column or variable has the name
JUDGE_VARIABLES = (
    "question",
    "expected_outcome",
    "reference_answer",
    "candidate_answer",
    "input_messages",
    "output_messages",
)


def _finalize(value: Any) -> Any:
    """How a value is written into text (``variables.text_of``); numbers stay numbers
    until Jinja writes them."""
    if value is None or isinstance(value, bool | list | dict | tuple):
        return text_of(value)
    return value


def _from_json(text: Any) -> Any:
    """The ``from_json`` filter: a column holding JSON text, as its value."""
    if not isinstance(text, str):
        return text
    return json.loads(text)


def make_environment() -> ImmutableSandboxedEnvironment:
    """The sandbox templates are rendered in: undefined names are errors."""
    env = ImmutableSandboxedEnvironment(
        undefined=StrictUndefined,
        keep_trailing_newline=True,  # a `content: |` block keeps its final line break
        autoescape=False,
        finalize=_finalize,
    )
    env.filters["from_json"] = _from_json
    return env


ENV = make_environment()


class TemplateError(Exception):
    """A string of a template that cannot be used or rendered, in the user's words."""

    def __init__(self, message: str, hint: str | None = None, names: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.names = names  # the columns or variables it is about


def is_template(value: Any) -> bool:
    """Whether a string holds Jinja syntax (and so is rendered)."""
    return isinstance(value, str) and any(m in value for m in _MARKERS)


@dataclass(slots=True)
class Leaf:
    """One string of a template, compiled: where it stands, the names it reads, and how
    it is rendered."""

    path: PathKey
    source: str
    names: frozenset[str]  # every name it reads
    required: frozenset[str]  # ... those not guarded by `is defined` or `default`
    render: Callable[[Mapping[str, Any]], Any]
    bare: str | None = None  # the one name of a string that is just `{{ name }}`


def compile_leaf(source: str, path: PathKey = (), *, native: bool = True) -> Leaf:
    """Compile one string; ``TemplateError`` on a syntax error. With ``native``, a string
    that is exactly one expression gives a list or mapping value as it is."""
    try:
        ast = ENV.parse(source)
    except TemplateSyntaxError as exc:
        raise TemplateError(
            f"template syntax error: {exc.message}",
            hint="placeholders are written {{ column }}; a literal {{ is written "
            "{{ '{{' }} (or wrap the text in {% raw %}...{% endraw %})",
        ) from None
    names = frozenset(meta.find_undeclared_variables(ast))
    required = names - _guarded(ast)
    body = ast.body
    outputs = body[0].nodes if len(body) == 1 and isinstance(body[0], nodes.Output) else None
    if outputs is not None and all(_simple(n) for n in outputs):
        parts = [n.data if isinstance(n, nodes.TemplateData) else n for n in outputs]
        if native and len(parts) == 1 and isinstance(parts[0], nodes.Name):
            name = parts[0].name
            return Leaf(path, source, names, required, _bare(name, source), bare=name)
        return Leaf(path, source, names, required, _joined(parts, source))
    template = ENV.from_string(ast)  # type: ignore[arg-type]
    expression = None
    if native and outputs is not None and len(outputs) == 1:
        expression = ENV.compile_expression(_expression_text(source), undefined_to_none=False)
    return Leaf(path, source, names, required, _general(template, expression))


def _simple(node: nodes.Node) -> bool:
    return isinstance(node, nodes.TemplateData) or (
        isinstance(node, nodes.Name) and node.ctx == "load"
    )


def _expression_text(source: str) -> str:
    text = source.strip()
    inner = text[2:-2]
    return inner.strip("-+ \t\n")


def _guarded(ast: nodes.Template) -> set[str]:
    """Names only tested (``x is defined``) or given a default (``x | default(...)``)."""
    guarded: set[str] = set()
    for test in ast.find_all(nodes.Test):
        if test.name in ("defined", "undefined") and isinstance(test.node, nodes.Name):
            guarded.add(test.node.name)
    for filt in ast.find_all(nodes.Filter):
        if filt.name in ("default", "d") and isinstance(filt.node, nodes.Name):
            guarded.add(filt.node.name)
    return guarded


def _missing(name: str) -> TemplateError:
    return TemplateError(f"{name!r} is undefined", names=(name,))


def _bare(name: str, source: str) -> Callable[[Mapping[str, Any]], Any]:
    def render(context: Mapping[str, Any]) -> Any:
        try:
            value = context[name]
        except KeyError:
            return _slow(source, context)
        return value if isinstance(value, list | dict) else text_of(value)

    return render


def _joined(parts: list[Any], source: str) -> Callable[[Mapping[str, Any]], Any]:
    def render(context: Mapping[str, Any]) -> Any:
        out = []
        for part in parts:
            if isinstance(part, str):
                out.append(part)
                continue
            try:
                value = context[part.name]
            except KeyError:
                return _slow(source, context)
            out.append(text_of(value))
        return "".join(out)

    return render


def _slow(source: str, context: Mapping[str, Any]) -> Any:
    """Jinja's own rendering (a name missing from ``context``: a global, or an error)."""
    template = _COMPILED.get(source)
    if template is None:
        if len(_COMPILED) >= 1024:  # many files in one process: start again
            _COMPILED.clear()
        template = _COMPILED[source] = ENV.from_string(source)
    return _run(lambda: template.render(context))


#: the strings Jinja rendered itself, compiled once (a template is a few strings)
_COMPILED: dict[str, Any] = {}


def _general(template: Any, expression: Any) -> Callable[[Mapping[str, Any]], Any]:
    def render(context: Mapping[str, Any]) -> Any:
        if expression is not None:
            value = _run(lambda: expression(context))
            if isinstance(value, Undefined):
                _run(lambda: str(value))  # raises: the name is not defined
            if isinstance(value, list | dict):
                return value
            if isinstance(value, tuple):
                return list(value)
            return text_of(value)
        return _run(lambda: template.render(context))

    return render


def _run(call: Callable[[], Any]) -> Any:
    """Run a rendering; its failures as ``TemplateError``."""
    try:
        return call()
    except UndefinedError as exc:
        name = _undefined_name(str(exc.message or exc))
        if name is not None:
            raise _missing(name) from None
        raise TemplateError(f"{exc.message or exc}") from None
    except SecurityError as exc:
        raise TemplateError(
            f"not allowed in a template: {exc}",
            hint="templates may read columns and variables, not Python's internals",
        ) from None
    except TemplateError:
        raise
    except Exception as exc:  # a filter given the wrong kind of value, a bad JSON text...
        raise TemplateError(f"{type(exc).__name__}: {exc}") from None


def _undefined_name(message: str) -> str | None:
    """The name in Jinja's ``'x' is undefined``."""
    if message.endswith(" is undefined") and message.startswith("'"):
        return message[1 : message.index("'", 1)]
    return None


@dataclass(slots=True)
class Tree:
    """A compiled template: its value with the strings to fill, and those strings."""

    value: Any
    leaves: dict[PathKey, Leaf] = field(default_factory=dict)
    errors: list[tuple[PathKey, TemplateError]] = field(default_factory=list)
    #: the paths of the lists and mappings that hold strings to fill (the rest is shared)
    inner: set[PathKey] = field(default_factory=set)
    _fill: Callable[[Mapping[str, Any]], Any] | None = field(default=None, repr=False)

    @property
    def names(self) -> frozenset[str]:
        """Every name some string reads."""
        return frozenset().union(*(leaf.names for leaf in self.leaves.values()))

    @property
    def required(self) -> frozenset[str]:
        """The names read without a guard."""
        return frozenset().union(*(leaf.required for leaf in self.leaves.values()))

    def render(self, context: Mapping[str, Any]) -> Any:
        """The value with every string filled from ``context``; ``RenderError`` names the
        string that failed."""
        if self._fill is None:
            if not self.leaves:
                return self.value
            self._fill = _filler(self.value, (), self.leaves, self.inner | self.leaves.keys())
        return self._fill(context)

    def leaf_for(self, path: PathKey) -> Leaf | None:
        """The string that made the value at ``path`` of a rendered value (or a value
        around it, when a list or mapping came from one), if any."""
        for end in range(len(path), -1, -1):
            leaf = self.leaves.get(path[:end])
            if leaf is not None:
                return leaf
        return None


class RenderError(Exception):
    """A string of a template failed to render: ``leaf`` is which, ``error`` why."""

    def __init__(self, leaf: Leaf, error: TemplateError) -> None:
        super().__init__(error.message)
        self.leaf = leaf
        self.error = error


def compile_tree(value: Any, *, judge_prompts: bool = True) -> Tree:
    """Compile every string of ``value`` that holds Jinja syntax. Syntax errors are kept
    in ``errors`` (each with its path), not raised, so that every one is reported."""
    tree = Tree(value)
    for path, text in _strings(value, ()):
        try:
            leaf = compile_leaf(text, path)
        except TemplateError as exc:
            tree.errors.append((path, exc))
            continue
        if judge_prompts and _is_judge_prompt(value, path):
            leaf.render = _with_judge_variables(leaf.render)
            leaf.names = leaf.names - set(JUDGE_VARIABLES)
            leaf.required = leaf.required - set(JUDGE_VARIABLES)
        tree.leaves[path] = leaf
        tree.inner.update(path[:end] for end in range(len(path)))
    return tree


def _strings(value: Any, path: PathKey) -> Iterator[tuple[PathKey, str]]:
    stack: list[tuple[PathKey, Any]] = [(path, value)]
    while stack:
        where, node = stack.pop()
        if isinstance(node, dict):
            stack.extend(((*where, k), v) for k, v in reversed(list(node.items())))
        elif isinstance(node, list):
            stack.extend(((*where, i), v) for i, v in reversed(list(enumerate(node))))
        elif is_template(node):
            yield where, node


def _is_judge_prompt(value: Any, path: PathKey) -> bool:
    """Whether ``path`` is the ``prompt`` of an ``llm_judge`` evaluator."""
    if not path or path[-1] != "prompt":
        return False
    node = value
    for part in path[:-1]:
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return False
    return isinstance(node, dict) and node.get("type", "llm_judge") == "llm_judge"


def _with_judge_variables(
    render: Callable[[Mapping[str, Any]], Any],
) -> Callable[[Mapping[str, Any]], Any]:
    """A judge prompt's own ``{{ candidate_answer }}``... are left for the judge."""

    def fill(context: Mapping[str, Any]) -> Any:
        kept = {name: f"{{{{ {name} }}}}" for name in JUDGE_VARIABLES if name not in context}
        return render({**context, **kept} if kept else context)

    return fill


Fill = Callable[[Mapping[str, Any]], Any]


def _filler(value: Any, path: PathKey, leaves: dict[PathKey, Leaf], reach: set[PathKey]) -> Fill:
    """A function filling ``value`` (at ``path``) from a context: compiled once, so that
    each row costs only its strings; what holds none (not in ``reach``) is shared as
    written."""
    leaf = leaves.get(path)
    if leaf is not None:
        render = leaf.render

        def fill_leaf(context: Mapping[str, Any]) -> Any:
            try:
                return render(context)
            except TemplateError as exc:
                raise RenderError(leaf, exc) from None

        return fill_leaf
    if isinstance(value, dict):
        items = [
            (k, _filler(v, (*path, k), leaves, reach) if (*path, k) in reach else None, v)
            for k, v in value.items()
        ]
        return lambda context: {k: v if f is None else f(context) for k, f, v in items}
    parts = [
        (_filler(v, (*path, i), leaves, reach) if (*path, i) in reach else None, v)
        for i, v in enumerate(value)
    ]
    return lambda context: [v if f is None else f(context) for f, v in parts]
