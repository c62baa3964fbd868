"""Properties of prompt building over random conversations (hypothesis)."""

from __future__ import annotations

from pathlib import Path

import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from agentv.errors import InputError
from agentv.evalfile.files import FileStore
from agentv.evalfile.loader import LoadContext, load_eval_file
from agentv.messages import (
    FileSegment,
    GuidelineFile,
    GuidelineRef,
    Message,
    Segment,
    TextSegment,
    ToolCall,
)
from agentv.prompts import (
    build_chat_prompt,
    build_guidelines,
    build_prompt_inputs,
    build_question,
    sent_messages,
    uses_role_markers,
)
from agentv.validation import validate_paths
from helpers import write

# Text that cannot spell a marker by itself ("@" left out), with blank and multi-line values.
text = st.text(alphabet=st.sampled_from("ab xy\n\t.:[]#=<>"), max_size=12)
paths = st.sampled_from(["a.py", "docs/b.md", "./c.txt", "/d/e.js"])

segments: st.SearchStrategy[Segment] = st.one_of(
    st.builds(TextSegment, value=text),
    st.builds(FileSegment, path=paths, resolved=st.just(Path("/r/f")), text=text),
    st.builds(GuidelineRef, path=paths, resolved=st.just(Path("/r/g"))),
)
tool_calls = st.lists(
    st.builds(
        ToolCall,
        id=st.sampled_from(["c1", "c2"]),
        name=st.sampled_from(["lookup", "add"]),
        arguments=st.dictionaries(st.sampled_from(["a", "b"]), st.integers(0, 9), max_size=2),
    ),
    max_size=2,
)


@st.composite
def messages(draw: st.DrawFn) -> Message:
    role = draw(st.sampled_from(["system", "user", "assistant", "tool"]))
    return Message(
        role=role,
        segments=tuple(draw(st.lists(segments, max_size=3))),
        tool_calls=tuple(draw(tool_calls)) if role == "assistant" else (),
        tool_call_id=draw(st.sampled_from([None, "c1", "c9"])) if role == "tool" else None,
    )


@st.composite
def named_conversations(draw: st.DrawFn) -> list[Message]:
    """Conversations whose messages carry their position as ``name`` (the chat prompt keeps
    it), so that a chat message can be traced back to the message it came from."""
    drawn = draw(st.lists(messages(), max_size=6))
    return [
        Message(m.role, m.segments, m.tool_calls, m.tool_call_id, name=str(i))
        for i, m in enumerate(drawn)
    ]


guideline_files = st.lists(
    st.builds(GuidelineFile, path=paths, resolved=st.just(Path("/r/g")), text=text), max_size=3
)


def renders_in_question(msg: Message) -> bool:
    """Whether a message contributes at least one part to the question (prompt-rules 4)."""
    return bool(msg.tool_calls) or any(
        not isinstance(seg, TextSegment) or seg.value.rstrip() for seg in msg.segments
    )


@settings(max_examples=300, deadline=None)
@given(named_conversations(), guideline_files, st.sampled_from(["lm", "agent"]), st.none() | text)
def test_prompt_building_properties(
    conversation: list[Message], files: list[GuidelineFile], mode: str, system_prompt: str | None
) -> None:
    guidelines = build_guidelines(files)
    question = build_question(conversation, mode)  # type: ignore[arg-type]
    chat = build_chat_prompt(conversation, guidelines, system_prompt)
    sent = sent_messages(chat, question=question, guidelines=guidelines)

    turns = [m for m in conversation if renders_in_question(m)]
    if uses_role_markers(conversation):
        # one marker per rendered turn, in order, so the last turn stays last
        assert question.count("@[") == len(turns)
        headers = [line for line in question.split("\n") if line.startswith("@[")]
        assert headers == [f"@[{m.role.capitalize()}]:" for m in turns]
        if turns:
            assert question.startswith(headers[0])
    else:
        assert "@[" not in question

    # no role marker ever reaches the chat prompt (the unpaired-tool fallback happens in
    # the provider adapters, after this point)
    assert all("@[" not in m.content for m in chat)

    # at most one system message, and it is first; what is sent always has exactly one
    roles = [m.role for m in chat]
    assert roles.count("system") <= 1
    assert "system" not in roles[1:]
    assert [m.role for m in sent].count("system") == 1 and sent[0].role == "system"

    # the other turns keep their written order, roles and tool fields
    kept = [m for m in chat if m.role != "system"]
    origins = [conversation[int(m.name)] for m in kept]  # type: ignore[arg-type]
    assert [int(m.name) for m in kept] == sorted(int(m.name) for m in kept)  # type: ignore[arg-type]
    for chat_msg, origin in zip(kept, origins, strict=True):
        assert chat_msg.role == origin.role != "system"
        assert chat_msg.tool_calls == origin.tool_calls
        assert chat_msg.tool_call_id == origin.tool_call_id
    # a turn with visible content or a tool call/result is never dropped, so the last such
    # turn is the last message sent
    must_keep = [
        m
        for m in conversation
        if m.role != "system" and (m.visible or m.tool_calls or m.tool_call_id is not None)
    ]
    assert set(map(id, must_keep)) <= set(map(id, origins))
    if must_keep and any(m.visible for m in conversation):
        assert origins[-1] is must_keep[-1]


# --- the loader never crashes, whatever the YAML holds ------------------------------------

KEYS = [
    "id",
    "outcome",
    "input_messages",
    "expected_messages",
    "role",
    "content",
    "type",
    "value",
    "tool_calls",
    "tool_call_id",
    "name",
    "arguments",
    "execution",
    "evaluators",
    "script",
    "cwd",
    "prompt",
    "target",
    "schema",
    "flags",
]
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.floats(allow_nan=False, allow_infinity=False, width=16),
    st.sampled_from(
        ["user", "assistant", "tool", "system", "text", "file", "llm_judge", "code", "regex"]
    ),
    st.sampled_from(["", " ", "a.md", "../x", "/etc/hostname", "{", "@[User]: hi", "(["]),
)
yaml_values = st.recursive(
    SCALARS,
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.sampled_from(KEYS), children, max_size=4)
    ),
    max_leaves=12,
)


# Mostly well-formed pieces with a few wrong ones, so that deep paths are reached too.
words = st.sampled_from(["hello", "", " ", "a.md", "../x", "@[User]: hi", "c1"])
block = st.fixed_dictionaries(
    {"type": st.sampled_from(["text", "file", "text", "txt"]), "value": st.one_of(words, SCALARS)}
)
message = st.fixed_dictionaries(
    {
        "role": st.sampled_from(["user", "assistant", "tool", "system", "usr"]),
        "content": st.one_of(words, words, st.lists(block, max_size=3), SCALARS),
    },
    optional={
        "tool_calls": st.lists(
            st.fixed_dictionaries(
                {
                    "id": st.sampled_from(["c1", "c2"]),
                    "name": words,
                    "arguments": st.one_of(st.just({"a": 1}), st.just('{"a": 1}'), SCALARS),
                }
            ),
            max_size=2,
        ),
        "tool_call_id": st.sampled_from(["c1", "c9"]),
    },
)
near_valid_case = st.fixed_dictionaries(
    {
        "id": st.sampled_from(["a", "b", "a"]),
        "outcome": st.sampled_from(["ok", " "]),
        "input_messages": st.lists(message, max_size=3),
    },
    optional={
        "expected_messages": st.lists(message, max_size=2),
        "evaluators": st.lists(
            st.fixed_dictionaries(
                {"type": st.sampled_from(["llm_judge", "code", "regex", "is_json", "x"])},
                optional={"value": SCALARS, "script": SCALARS, "prompt": SCALARS, "cwd": SCALARS},
            ),
            max_size=2,
        ),
    },
)


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(st.one_of(yaml_values, near_valid_case), max_size=3),
    st.sampled_from(["agentv-eval-v2", None, 3]),
)
def test_loader_never_crashes(tmp_path: Path, cases: list[object], schema: object) -> None:
    (tmp_path / ".git").mkdir(exist_ok=True)
    write(tmp_path, "a.md", "attached")
    data: dict[str, object] = {"evalcases": cases}
    if schema is not None:
        data["$schema"] = schema
    path = tmp_path / "fuzz.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    context = LoadContext(store=FileStore(cwd=tmp_path))
    (report,) = validate_paths([path])
    assert report.path == path.resolve()
    try:
        loaded = load_eval_file(path, context=context)
    except InputError as exc:
        assert exc.diagnostics and all(d.message for d in exc.diagnostics)
        event("file refused")
        return
    event(f"usable cases: {min(len(loaded.cases), 2)}")
    for case in loaded.cases:
        inputs = build_prompt_inputs(case)
        assert isinstance(inputs.question, str)
    for diag in loaded.diagnostics:
        assert diag.message and diag.file is not None
