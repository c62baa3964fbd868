"""JSON Schemas that refer to themselves without end (docs/eval-files.md, "Tools that
answer").

A schema may refer to itself (``$ref``): a tree's ``children`` are trees. Checking a value
against it then goes one level deeper into the value at each turn, and ends with the value.
A ``$ref`` that comes back to where it started without looking any deeper into the value
(``{$ref: "#"}``, or ``anyOf: [{$ref: "#"}]``) never ends: ``jsonschema`` recurses until
Python's stack runs out, whatever the value. ``endless_ref`` finds such a loop before the
run, so that the schema is refused where it is written.

Only references inside the schema's own document (``#`` and ``#/...`` JSON pointers) are
followed: nothing else can be resolved offline.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote

#: keywords whose schemas apply to the value itself (a loop through these never ends)
_IN_PLACE_ONE = ("not", "if", "then", "else")
_IN_PLACE_LIST = ("allOf", "anyOf", "oneOf")
_IN_PLACE_MAP = ("dependentSchemas", "dependencies")
#: keywords whose schemas apply to parts of the value (one level deeper)
_DEEPER_ONE = (
    "items",
    "additionalItems",
    "additionalProperties",
    "unevaluatedItems",
    "unevaluatedProperties",
    "contains",
    "propertyNames",
)
_DEEPER_LIST = ("prefixItems", "items")
_DEEPER_MAP = ("properties", "patternProperties")
#: keywords holding schemas that apply only where a ``$ref`` leads
_DEFINITIONS = ("$defs", "definitions")


def endless_ref(schema: Any) -> tuple[str, str] | None:
    """Where ``schema`` refers to itself without end: ``(the pointer of the $ref that
    closes the loop, the pointer it leads back to)``, or None."""
    if not isinstance(schema, dict):
        return None
    reachable = _reachable(schema)
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for start in reachable:
        if start in state:
            continue
        # iterative depth-first search over in-place edges only
        stack: list[tuple[str, Iterator[tuple[str, str]]]] = [
            (start, _in_place(reachable[start], start, schema))
        ]
        state[start] = 1
        while stack:
            node, edges = stack[-1]
            step = next(edges, None)
            if step is None:
                state[node] = 2
                stack.pop()
                continue
            via, target = step
            seen = state.get(target)
            if seen == 1:
                return via, target
            if seen is None and target in reachable:
                state[target] = 1
                stack.append((target, _in_place(reachable[target], target, schema)))
    return None


def _reachable(root: dict[str, Any]) -> dict[str, Any]:
    """Every subschema reachable from the root by any keyword or local ``$ref``, by its
    JSON pointer, in the order found."""
    found: dict[str, Any] = {}
    todo = deque([("#", root)])
    while todo:
        pointer, node = todo.popleft()
        if pointer in found or not isinstance(node, dict):
            continue
        found[pointer] = node
        for child, value in _children(node, pointer):
            todo.append((child, value))
        for _, target in _in_place(node, pointer, root):
            value = _resolve(root, target)
            if value is not None:
                todo.append((target, value))
    return found


def _children(node: dict[str, Any], pointer: str) -> Iterator[tuple[str, Any]]:
    """The subschemas ``node`` holds, each with its pointer (``$ref`` targets aside)."""
    for key in (*_IN_PLACE_ONE, *_DEEPER_ONE):
        if isinstance(node.get(key), dict):
            yield f"{pointer}/{_escape(key)}", node[key]
    for key in (*_IN_PLACE_LIST, *_DEEPER_LIST):
        if isinstance(node.get(key), list):
            for i, item in enumerate(node[key]):
                yield f"{pointer}/{_escape(key)}/{i}", item
    for key in (*_IN_PLACE_MAP, *_DEEPER_MAP, *_DEFINITIONS):
        if isinstance(node.get(key), dict):
            for name, item in node[key].items():
                yield f"{pointer}/{_escape(key)}/{_escape(str(name))}", item


def _in_place(node: Any, pointer: str, root: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """``(where, target)`` of each schema that applies to the same value as ``node``: its
    local ``$ref`` and the schemas of its in-place keywords."""
    if not isinstance(node, dict):
        return
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#"):
        target = _normal(ref)
        if _resolve(root, target) is not None:
            yield pointer, target
    for key in _IN_PLACE_ONE:
        if isinstance(node.get(key), dict):
            child = f"{pointer}/{_escape(key)}"
            yield child, child
    for key in _IN_PLACE_LIST:
        if isinstance(node.get(key), list):
            for i in range(len(node[key])):
                child = f"{pointer}/{_escape(key)}/{i}"
                yield child, child
    for key in _IN_PLACE_MAP:
        if isinstance(node.get(key), dict):
            for name in node[key]:
                child = f"{pointer}/{_escape(key)}/{_escape(str(name))}"
                yield child, child


def _normal(ref: str) -> str:
    """A local reference as a pointer: ``#`` for the root, ``#/a/b`` otherwise."""
    fragment = unquote(ref[1:])
    return f"#{fragment}" if fragment else "#"


def _resolve(root: dict[str, Any], pointer: str) -> Any:
    """The value at ``pointer`` (``#/a/0``) in ``root``, or None (an anchor, or nothing
    there)."""
    if pointer == "#":
        return root
    if not pointer.startswith("#/"):
        return None  # an anchor (`#name`): not followed
    node: Any = root
    for token in pointer[2:].split("/"):
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return None
    return node if isinstance(node, dict) else None


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")
