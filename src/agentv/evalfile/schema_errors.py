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
from agentv.yaml.source import PathKey, YamlSource, format_key


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


def _data_path(entry: Any, loc: tuple[Any, ...]) -> tuple[PathKey, Any, Any]:
    """Map a pydantic ``loc`` onto the user's data, skipping union-branch labels.

    Returns (path, value at path or None, parent container).
    """
    node = entry
    parent = None
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
                parent, node = node, node[part]
                path.append(part)
            elif part in _UNION_LABELS or "[" in part:
                continue
            else:
                path.append(part)
                parent, node, missing = node, None, True
        elif isinstance(node, list) and isinstance(part, int):
            labelled = False
            parent, node = node, node[part] if 0 <= part < len(node) else None
            path.append(part)
        else:
            continue  # a union branch label such as 'str' or 'text'
    return tuple(path), node, parent


_UNION_LABELS = {"str", "constrained-str", "text", "file", "ExpectedCall", *sc.EVALUATOR_TYPES}


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
    elif isinstance(last, int) and before == "expected":
        model = sc.ExpectedCall
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
    "latency": sc.LatencySpec,
    "cost": sc.CostSpec,
    "tool_used": sc.ToolUsedSpec,
    "tool_not_used": sc.ToolNotUsedSpec,
    "tool_trajectory": sc.ToolTrajectorySpec,
    "tool_call_f1": sc.ToolCallF1Spec,
    "step_count": sc.StepCountSpec,
    "repeated_calls": sc.RepeatedCallsSpec,
}


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
        path, value, parent = _data_path(entry, err["loc"])
        field_name = next((p for p in reversed(path) if isinstance(p, str)), "value")
        etype = err["type"]
        if tuple(path[:-1]) in misnamed:
            continue  # said above, in one message
        loc = err["loc"]
        if "ExpectedCall" in loc and not isinstance(value, dict) and etype == "model_type":
            continue  # an expected call written as a name: its text form speaks for it
        if loc[-1] in ("str", "constrained-str") and isinstance(value, dict):
            continue  # an expected call written as a mapping: its keys speak for it
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
            if tuple(path) == ("grader",):
                out.append(grader_key(src, (*base, *path)))
                continue
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
        elif etype in _BOUND_WORDS:
            limit = next(iter(err.get("ctx", {}).values()), "")
            message = f"`{field_name}` must be {_BOUND_WORDS[etype]} {limit}"
            hint = _BOUND_HINTS.get(field_name)
            at_key = False
        elif etype == "finite_number":
            message, hint, at_key = f"`{field_name}` must be a finite number", None, False
        elif etype in _TYPE_WORDS:
            message = f"`{field_name}` must be {_TYPE_WORDS[etype]}"
            hint = _TYPE_HINTS.get((field_name, etype))
            if etype == "string_type" and isinstance(value, int | float | bool):
                hint = f'put the value in quotes: {field_name}: "{value}"'
            if etype == "string_type" and field_name == "expected":
                message = "an `expected` call is a tool's name or a mapping with `tool`"
                hint = "write `- search` or `- {tool: search, args: {query: ...}}`"
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
_BOUND_HINTS = {
    "weight": "a weight is 0 or more: how much the evaluator counts in the case's mean",
    "threshold": "a threshold is a score from 0 to 1",
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
    "script": "add `script:` with the command to run",
}
