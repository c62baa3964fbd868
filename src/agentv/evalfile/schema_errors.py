"""Pydantic's validation errors on an eval case, told the user's way.

Pydantic reports locations such as ``('input_messages', 0, 'content', 'list[...]', 1,
'text', 'valu')``; users think in their YAML. ``translate`` maps each error back onto the
data the user wrote, drops the noise of union branches that were not meant, and words it as
one diagnostic with a hint: the valid choices, a "did you mean", the key that is missing.

What each block may hold is read from the models themselves (``_model_at``): the keys of the
block an unknown key is in, and, for an evaluator, its own hints (``EvaluatorSpec.key_hints``,
``item_errors``), so that a new evaluator's errors need nothing here.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from agentv.errors import Diagnostic
from agentv.evalfile import schema as sc
from agentv.evaluators.registry import EVALUATOR_TYPES
from agentv.yaml.source import PathKey, YamlSource, format_key


def unknown_key(
    src: YamlSource,
    key: PathKey,
    name: str,
    allowed: tuple[str, ...] | list[str],
    message: str | None = None,
    *,
    shown: tuple[str, ...] | list[str] | None = None,
    severity: str = "error",
) -> Diagnostic:
    """``unknown key 'x'`` (or ``message``) at the key itself; its hint is the closest valid
    key ("did you mean"), when one is close, and the valid keys of the block. Shared by eval
    files, targets files and the config file, so all say it alike.

    Args:
        src: The file.
        key: Where the unknown key is.
        name: The key as written.
        allowed: Every spelling the block accepts (aliases too): the "did you mean" is
            chosen among them.
        message: The message, instead of ``unknown key 'x'``.
        shown: The keys listed as valid (default: ``allowed``), one spelling each.
        severity: ``error``, or ``warning`` for a key that is ignored.
    """
    hint = key_hint(name, allowed, shown)
    return src.diagnostic(
        key, message or f"unknown key {name!r}", hint=hint, at_key=True, severity=severity
    )


def closest_key(name: str, allowed: tuple[str, ...] | list[str]) -> str | None:
    """The valid key ``name`` is most likely a typo of, or None when none is close."""
    close = difflib.get_close_matches(str(name), list(dict.fromkeys(allowed)), n=1)
    return close[0] if close else None


def key_hint(
    name: str,
    allowed: tuple[str, ...] | list[str],
    shown: tuple[str, ...] | list[str] | None = None,
) -> str:
    """``did you mean 'x'? valid keys here: a, b, c`` (the question only when a key is
    close)."""
    close = closest_key(name, allowed)
    listed = ", ".join(dict.fromkeys(shown if shown is not None else allowed))
    return (f"did you mean {close!r}? " if close else "") + f"valid keys here: {listed}"


def grader_key(src: YamlSource, key: PathKey) -> Diagnostic:
    """``grader:`` is not a key of agentv's: the evaluator kind is ``evaluator``."""
    return src.diagnostic(
        key, f"unknown key {key[-1]!r}", hint="did you mean `evaluator`?", at_key=True
    )


_TYPE_WORDS = {
    "string_type": "text (a string)",
    "list_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
    "int_type": "a whole number",
    "float_type": "a number",
    "bool_type": "true or false",
}


def _data_path(entry: Any, loc: tuple[Any, ...]) -> tuple[PathKey, Any]:
    """Map a pydantic ``loc`` onto the user's data, skipping union-branch labels.

    Returns (path, value at path or None).
    """
    node = entry
    path: list[str | int] = []
    missing = False
    labelled = False  # the union label of the current node was skipped
    for part in loc:
        if missing:
            path.append(part)
            continue
        if isinstance(node, dict) and isinstance(part, str):
            if part in _UNION_LABELS and node.get("type") == part and not labelled:
                # the branch label of a `type:`-tagged union (`{type: text, text: hi}` has
                # a key `text` too: the label comes first, then the key)
                labelled = True
                continue
            if part in node:
                labelled = False
                node = node[part]
                path.append(part)
            elif part in _UNION_LABELS or "[" in part:
                continue
            else:
                path.append(part)
                node, missing = None, True
        elif isinstance(node, list) and isinstance(part, int):
            labelled = False
            node = node[part] if 0 <= part < len(node) else None
            path.append(part)
        else:
            continue  # a union branch label such as 'str' or 'text'
    return tuple(path), node


# --- what the models say -------------------------------------------------------------------


def _branches(annotation: Any) -> tuple[list[Any], bool]:
    """The members of a union (``Annotated`` and ``None`` left out; the annotation itself
    when it is no union), and whether the union is told apart by a discriminator."""
    discriminated = False
    while typing.get_origin(annotation) is typing.Annotated:
        annotation, *meta = typing.get_args(annotation)
        discriminated = discriminated or any(
            isinstance(m, FieldInfo) and m.discriminator is not None for m in meta
        )
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        members = []
        for arg in typing.get_args(annotation):
            inner, inner_discriminated = _branches(arg)
            members += [m for m in inner if m is not type(None)]
            discriminated = discriminated or inner_discriminated
        return members, discriminated
    return [annotation], discriminated


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _tags(model: type[BaseModel]) -> tuple[str, ...]:
    """The ``type`` values a model takes (its ``Literal``), if it has a ``type``."""
    field = model.model_fields.get("type")
    if field is None or typing.get_origin(field.annotation) is not typing.Literal:
        return ()
    return tuple(str(a) for a in typing.get_args(field.annotation))


def _union_labels(root: type[BaseModel]) -> tuple[set[str], set[str]]:
    """How pydantic names the branches of the unions in ``root``'s blocks in an error's
    location: (``type`` tags of the discriminated unions' branches, names of the models
    that are a branch of another union)."""
    tags: set[str] = set()
    names: set[str] = set()
    seen: set[type[BaseModel]] = set()

    def visit(annotation: Any) -> None:
        members, discriminated = _branches(annotation)
        for member in members:
            if _is_model(member):
                if len(members) > 1:
                    if discriminated:
                        tags.update(_tags(member))
                    else:
                        names.add(member.__name__)
                if member not in seen:
                    seen.add(member)
                    for field in member.model_fields.values():
                        visit(field.annotation)
            else:
                for arg in typing.get_args(member):  # list[...], dict[...]
                    visit(arg)

    visit(root)
    return tags, names


_UNION_TAGS, _MODEL_BRANCHES = _union_labels(sc.RawEvalCase)
#: the labels pydantic puts in a location for the branch of a union it tried
_UNION_LABELS = {"str", "constrained-str", *_UNION_TAGS, *_MODEL_BRANCHES}


def _model_of(annotation: Any, node: Any) -> type[BaseModel] | None:
    """The model ``node`` (a mapping) is read as under ``annotation``: the one whose
    ``type`` it names among a union's, else the first."""
    models = [m for m in _branches(annotation)[0] if _is_model(m)]
    if not models:
        return None
    kind = node.get("type") if isinstance(node, dict) else None
    return next((m for m in models if kind in _tags(m)), models[0])


def _item_of(annotation: Any) -> Any:
    """The items' annotation of the list among ``annotation``'s branches (None: none)."""
    for member in _branches(annotation)[0]:
        if typing.get_origin(member) in (list, tuple):  # list[X], tuple[X, ...]
            return typing.get_args(member)[0]
    return None


def _model_at(
    path: PathKey, entry: Any, root: type[BaseModel] = sc.RawEvalCase
) -> type[BaseModel] | None:
    """The model of the block at ``path`` in ``entry`` (a case, or data of ``root``;
    ``()``: ``entry`` itself)."""
    annotation: Any = root
    node = entry
    for part in path:
        if isinstance(part, int):
            annotation = _item_of(annotation)
            node = node[part] if isinstance(node, list) and 0 <= part < len(node) else None
        else:
            model = _model_of(annotation, node)
            field = _field(model, part) if model is not None else None
            if field is None:
                return None
            annotation = field.annotation
            node = node.get(part) if isinstance(node, dict) else None
        if annotation is None:
            return None
    return _model_of(annotation, node)


def block_model(root: type[BaseModel], loc: tuple[Any, ...], data: Any) -> tuple[PathKey, Any]:
    """Where a pydantic error's ``loc`` (on ``data``, validated as ``root``) points in the
    data, and the model of the block holding its last key: ``(path, model or None)``. The
    labels pydantic puts in a location for union branches are left out of the path.

    Args:
        root: The model ``data`` was validated as (a target's settings, say).
        loc: The error's location.
        data: The data as written.
    """
    node, path = data, []
    for part in loc:
        in_list = isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)
        if in_list or (isinstance(node, dict) and part in node):
            node = node[part]
        elif part == loc[-1]:
            pass  # the key the error is about (absent from the data when it is missing)
        else:
            continue  # a union branch's label
        path.append(part)
    return tuple(path), _model_at(tuple(path[:-1]), data, root)


def block_keys(model: type[BaseModel]) -> tuple[str, ...]:
    """The keys a block of ``model`` may hold, one spelling each, in the model's order."""
    return _keys(model)


def _field(model: type[BaseModel], key: str) -> FieldInfo | None:
    """``model``'s field written as ``key`` (its alias, else its name)."""
    for name, field in model.model_fields.items():
        if (field.alias or name) == key:
            return field
    return None


def _keys(model: type[BaseModel] | None) -> tuple[str, ...]:
    """The keys a block of ``model`` may hold, as written (aliases), in the model's order."""
    if model is None:
        return ()
    return tuple((f.alias or n) for n, f in model.model_fields.items())


def _owner(path: PathKey, entry: Any) -> type[BaseModel] | None:
    """The model of the block holding the key an error is about (the last key of
    ``path``; list items are their list key's)."""
    keys = [i for i, part in enumerate(path) if isinstance(part, str)]
    return _model_at(path[: keys[-1]], entry) if keys else None


def _key_hint(model: type[BaseModel] | None, key: str) -> str | None:
    """The hint a model gives for its ``key`` when it is missing or out of bounds (an
    evaluator's ``key_hints``), or None."""
    hints: Mapping[str, str] = getattr(model, "key_hints", {})
    return hints.get(key)


def _item_error(model: type[BaseModel] | None, key: str) -> tuple[str, str] | None:
    """What a model says of an item of its list ``key`` that is neither of the forms the
    key takes, ``(message, hint)`` (an evaluator's ``item_errors``), or None."""
    errors: Mapping[str, tuple[str, str]] = getattr(model, "item_errors", {})
    return errors.get(key)


def _misnamed_value_blocks(entry: dict[str, Any]) -> dict[PathKey, str]:
    """Content blocks that hold their text or path under another key than ``value``
    (``{type: text, text: hi}``): block path -> the key used."""
    out: dict[PathKey, str] = {}
    for field_name in ("input_messages", "expected_messages"):
        messages = entry.get(field_name)
        for i, msg in enumerate(messages if isinstance(messages, list) else []):
            content = msg.get("content") if isinstance(msg, dict) else None
            for j, block in enumerate(content if isinstance(content, list) else []):
                if not isinstance(block, dict) or "value" in block:
                    continue
                if block.get("type") not in ("text", "file"):
                    continue
                extra = [k for k in block if k != "type"]
                if len(extra) == 1 and isinstance(extra[0], str):
                    out[(field_name, i, "content", j)] = extra[0]
    return out


def translate(
    src: YamlSource, exc: ValidationError, entry: dict[str, Any], base: PathKey
) -> list[Diagnostic]:
    """Pydantic's errors on ``entry`` (the data at ``base`` in ``src``) as diagnostics."""
    out: list[Diagnostic] = []
    # `{type: text, text: hi}` would get "missing `value`" and "unknown key 'text'": one
    # message says what to write instead.
    misnamed = _misnamed_value_blocks(entry)
    for block, name in misnamed.items():
        kind = entry_block_type(entry, block)
        out.append(
            src.diagnostic(
                (*base, *block, name),
                f"{kind} block needs `value`, not `{name}`",
                hint=f"write `{{type: {kind}, value: ...}}`",
                at_key=True,
            )
        )
    seen: set[tuple[PathKey, str]] = set()
    # A misspelt required key gives both "unknown key" and "missing key": keep the first.
    suggested: set[tuple[PathKey, str]] = set()
    missing: list[tuple[PathKey, str, str]] = []
    for err in exc.errors():
        path, value = _data_path(entry, err["loc"])
        field_name = next((p for p in reversed(path) if isinstance(p, str)), "value")
        etype = err["type"]
        if tuple(path[:-1]) in misnamed:
            continue  # said above, in one message
        loc = err["loc"]
        if (
            etype == "model_type"
            and not isinstance(value, dict)
            and any(part in _MODEL_BRANCHES for part in loc)
        ):
            continue  # a mapping's branch of a value written otherwise: the other speaks
        if loc[-1] in ("str", "constrained-str") and isinstance(value, dict):
            continue  # an expected call written as a mapping: its keys speak for it
        if "content" in loc:
            ci = loc.index("content")
            cpath, cval = _data_path(entry, loc[: ci + 1])
            branch = loc[ci + 1] if len(loc) > ci + 1 else None
            if isinstance(cval, list) and branch == "str":
                continue  # the string form was not meant; the list's own errors follow
        if "content" in loc and etype != "missing" and not isinstance(cval, (str, list)):
            # one message, not one per accepted form
            message = "`content` must be a string or a list of {type: text|file, value: ...} blocks"
            hint = (
                "write `content: some text`, or blocks such as `- {type: file, value: src/app.py}`"
            )
            at_key = False
            path = cpath
        elif etype == "extra_forbidden":
            allowed = _keys(_model_at(path[:-1], entry))
            if tuple(path) == ("grader",):
                out.append(grader_key(src, (*base, *path)))
                continue
            d = unknown_key(src, (*base, *path), str(path[-1]), allowed)
            close = closest_key(str(path[-1]), allowed)
            if close:
                suggested.add((tuple(path[:-1]), close))
            if (tuple(path), d.message) not in seen:
                seen.add((tuple(path), d.message))
                out.append(d)
            continue
        elif etype == "missing":
            hint = _key_hint(_owner(path, entry), field_name)
            message, hint, at_key = (
                f"missing required key `{field_name}`",
                hint or _MISSING_HINTS.get(field_name),
                False,
            )
            path = path[:-1]
            missing.append((tuple(path), field_name, message))
        elif etype == "literal_error":
            choices = [
                c.strip(" '") for c in err["ctx"]["expected"].replace(" or ", ", ").split(",")
            ]
            close = difflib.get_close_matches(str(value), choices, n=1)
            what = "role" if field_name == "role" else f"`{field_name}` value"
            message = f"invalid {what} {value!r}"
            hint = (
                f"did you mean {close[0]!r}? " if close else ""
            ) + f"valid choices: {', '.join(choices)}"
            at_key = False
        elif etype == "union_tag_invalid":
            tag = err["ctx"]["tag"]
            choices = [c.strip(" '") for c in err["ctx"]["expected_tags"].split(",")]
            close = difflib.get_close_matches(str(tag), choices, n=1)
            kind = "evaluator type" if "evaluators" in path else "content block type"
            message = f"unknown {kind} {tag!r}"
            hint = (
                f"did you mean {close[0]!r}? " if close else ""
            ) + f"valid choices: {', '.join(choices)}"
            path = (*path, "type")
            at_key = False
        elif etype == "union_tag_not_found":
            message, hint, at_key = (
                "this block has no `type`",
                "add `type: text` or `type: file`",
                False,
            )
            if "evaluators" in path:
                hint = f"add `type:` with one of: {', '.join(EVALUATOR_TYPES)}"
        elif etype in ("string_too_short", "value_error", "too_short"):
            message, hint, at_key = f"`{field_name}` must not be empty", None, False
        elif etype in _BOUND_WORDS:
            limit = next(iter(err.get("ctx", {}).values()), "")
            message = f"`{field_name}` must be {_BOUND_WORDS[etype]} {limit}"
            hint = _key_hint(_owner(path, entry), field_name)
            at_key = False
        elif etype == "finite_number":
            message, hint, at_key = f"`{field_name}` must be a finite number", None, False
        elif etype in _TYPE_WORDS:
            message = f"`{field_name}` must be {_TYPE_WORDS[etype]}"
            hint = _TYPE_HINTS.get((field_name, etype))
            if etype == "string_type" and isinstance(value, int | float | bool):
                hint = f'put the value in quotes: {field_name}: "{value}"'
            item = _item_error(_owner(path, entry), field_name)
            if etype == "string_type" and item is not None and isinstance(path[-1], int):
                message, hint = item
            if "content" in path and isinstance(value, str):
                message = "content list items must be mappings like {type: text, value: ...}"
                hint = "write `- {type: text, value: your text}` instead of a bare string"
            at_key = False
        else:
            message, hint, at_key = f"`{field_name}`: {err['msg']}", None, False
        key = (*base, *path)
        if (key, message) in seen:
            continue
        seen.add((key, message))
        out.append(src.diagnostic(key, message, hint=hint, at_key=at_key))
    redundant = {
        (format_key((*base, *where)), msg)
        for where, name, msg in missing
        if (where, name) in suggested
    }
    return [d for d in out if (d.location, d.message) not in redundant]


def entry_block_type(entry: dict[str, Any], block: PathKey) -> str:
    """The ``type`` of the content block at ``block`` in ``entry``."""
    node: Any = entry
    for part in block:
        node = node[part]
    return str(node.get("type"))


_BOUND_WORDS = {
    "greater_than_equal": "at least",
    "less_than_equal": "at most",
    "greater_than": "more than",
    "less_than": "less than",
}

_TYPE_HINTS = {
    ("input_messages", "list_type"): "list the turns: `- role: user` then `content: ...`",
    ("expected_messages", "list_type"): "list the turns: `- role: assistant` then `content: ...`",
    ("tool_calls", "list_type"): "list the calls: `- {id: call_1, name: tool, arguments: {}}`",
    ("evaluators", "list_type"): "list the evaluators: `- {type: contains, value: ...}`",
}

_MISSING_HINTS = {
    "id": "give every case a unique `id: some-name`",
    "outcome": "describe what a good answer achieves in `outcome:`",
    "input_messages": "add `input_messages:` with at least one `- role: user` turn",
    "role": "add `role:` (system, user, assistant or tool)",
    "value": "add `value:` (the text, or the file path)",
}
