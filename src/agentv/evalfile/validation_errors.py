"""Pydantic's validation errors on an eval case, told the user's way.

Pydantic reports locations such as ``('input_messages', 0, 'content', 'list[...]', 1,
'text', 'valu')``; users think in their YAML. ``translate`` maps each error back onto the
data the user wrote, drops the noise of union branches that were not meant, and words it as
one diagnostic with a hint: the valid choices, a "did you mean", the key that is missing.
"""

from __future__ import annotations

import difflib
from typing import Any

from pydantic import ValidationError

from agentv.errors import Diagnostic
from agentv.evalfile import schema as sc
from agentv.yamlio import PathKey, YamlSource, format_key


def unknown_key(
    src: YamlSource,
    key: PathKey,
    name: str,
    allowed: tuple[str, ...] | list[str],
    message: str | None = None,
) -> Diagnostic:
    """``unknown key 'x'`` (or ``message``) at the key itself, with a "did you mean" or the
    valid keys as hint. Shared by eval files and targets files, so both say it alike."""
    allowed = list(dict.fromkeys(allowed))
    close = difflib.get_close_matches(str(name), allowed, n=1)
    hint = f"did you mean {close[0]!r}?" if close else f"valid keys here: {', '.join(allowed)}"
    return src.diagnostic(key, message or f"unknown key {name!r}", hint=hint, at_key=True)


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


def _data_path(entry: Any, loc: tuple[Any, ...]) -> tuple[PathKey, Any, Any]:
    """Map a pydantic ``loc`` onto the user's data, skipping union-branch labels.

    Returns (path, value at path or None, parent container).
    """
    node = entry
    parent = None
    path: list[str | int] = []
    missing = False
    for part in loc:
        if missing:
            path.append(part)
            continue
        if isinstance(node, dict) and isinstance(part, str):
            if part in node:
                parent, node = node, node[part]
                path.append(part)
            elif part in _UNION_LABELS or "[" in part:
                continue
            else:
                path.append(part)
                parent, node, missing = node, None, True
        elif isinstance(node, list) and isinstance(part, int):
            parent, node = node, node[part] if 0 <= part < len(node) else None
            path.append(part)
        else:
            continue  # a union branch label such as 'str' or 'text'
    return tuple(path), node, parent


_UNION_LABELS = {"str", "text", "file", *sc.EVALUATOR_TYPES}


def _allowed_keys(path: PathKey, parent: Any) -> tuple[str, ...]:
    names: list[str | int] = list(path[:-1])
    if len(names) == 0:
        return sc.CASE_KEYS
    last = names[-1]
    before = names[-2] if len(names) >= 2 else None
    kind = parent.get("type") if isinstance(parent, dict) else None
    if isinstance(last, int) and before in ("input_messages", "expected_messages"):
        model = sc.RawMessage
    elif isinstance(last, int) and before == "content":
        model = sc.FileBlock if kind == "file" else sc.TextBlock
    elif isinstance(last, int) and before == "tool_calls":
        model = sc.RawToolCall
    elif isinstance(last, int) and before == "evaluators":
        model = _SPEC_BY_TYPE.get(kind, sc.LlmJudgeSpec)
    elif last == "execution":
        model = sc.RawExecution
    else:
        return ()
    return tuple((f.alias or n) for n, f in model.model_fields.items())


_SPEC_BY_TYPE: dict[Any, type] = {
    "llm_judge": sc.LlmJudgeSpec,
    "code": sc.CodeSpec,
    "contains": sc.ContainsSpec,
    "icontains": sc.ContainsSpec,
    "equals": sc.EqualsSpec,
    "regex": sc.RegexSpec,
    "is_json": sc.IsJsonSpec,
}


def translate(
    src: YamlSource, exc: ValidationError, entry: dict[str, Any], base: PathKey
) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    seen: set[tuple[PathKey, str]] = set()
    # A misspelt required key gives both "unknown key" and "missing key": keep the first.
    suggested: set[tuple[PathKey, str]] = set()
    missing: list[tuple[PathKey, str, str]] = []
    for err in exc.errors():
        path, value, parent = _data_path(entry, err["loc"])
        field_name = next((p for p in reversed(path) if isinstance(p, str)), "value")
        etype = err["type"]
        loc = err["loc"]
        if "content" in loc:
            ci = loc.index("content")
            cpath, cval, _ = _data_path(entry, loc[: ci + 1])
            branch = loc[ci + 1] if len(loc) > ci + 1 else None
            if isinstance(cval, list) and branch == "str":
                continue  # the string form was not meant; the list's own errors follow
        if "content" in loc and not isinstance(cval, (str, list)):
            # one message, not one per accepted form
            message = "`content` must be a string or a list of {type: text|file, value: ...} blocks"
            hint = (
                "write `content: some text`, or blocks such as `- {type: file, value: src/app.py}`"
            )
            at_key = False
            path = cpath
        elif etype == "extra_forbidden":
            allowed = _allowed_keys(path, parent)
            d = unknown_key(src, (*base, *path), str(path[-1]), allowed)
            close = difflib.get_close_matches(str(path[-1]), list(allowed), n=1)
            if close:
                suggested.add((tuple(path[:-1]), close[0]))
            if (tuple(path), d.message) not in seen:
                seen.add((tuple(path), d.message))
                out.append(d)
            continue
        elif etype == "missing":
            message, hint, at_key = (
                f"missing required key `{field_name}`",
                _MISSING_HINTS.get(field_name),
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
                hint = f"add `type:` with one of: {', '.join(sc.EVALUATOR_TYPES)}"
        elif etype in ("string_too_short", "value_error", "too_short"):
            message, hint, at_key = f"`{field_name}` must not be empty", None, False
        elif etype in _TYPE_WORDS:
            message = f"`{field_name}` must be {_TYPE_WORDS[etype]}"
            hint = _TYPE_HINTS.get((field_name, etype))
            if etype == "string_type" and isinstance(value, int | float | bool):
                hint = f'put the value in quotes: {field_name}: "{value}"'
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
    "script": "add `script:` with the command to run",
}
