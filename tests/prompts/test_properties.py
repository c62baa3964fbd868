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
    chat_to_dicts,
)
from agentv.prompts.builder import (
    Memo,
    build_guidelines,
    build_messages,
    build_prompt,
    build_question,
    uses_role_markers,
)
from agentv.run.validation import validate_paths
from support.files import write

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
    """Whether a message contributes at least one part to the question (docs/prompt-rules.md section 4)."""
    return bool(msg.tool_calls) or any(
        not isinstance(seg, TextSegment) or seg.value.rstrip() for seg in msg.segments
    )


def _answers_an_earlier_call(conversation: list[Message], index: int) -> bool:
    msg = conversation[index]
    called = {c.id for m in conversation[:index] for c in m.tool_calls}
    return msg.tool_call_id is not None and msg.tool_call_id in called


@settings(max_examples=300, deadline=None)
@given(
    named_conversations(),
    guideline_files,
    st.sampled_from(["lm", "agent"]),
    st.none() | text,
    st.booleans(),
)
def test_prompt_building_properties(
    conversation: list[Message],
    files: list[GuidelineFile],
    mode: str,
    system_prompt: str | None,
    needs_user_turn: bool,
) -> None:
    guidelines = build_guidelines(files)
    question = build_question(conversation, mode)  # type: ignore[arg-type]
    sent, added = build_messages(
        conversation,
        guidelines,
        system_prompt=system_prompt,
        question=question,
        needs_user_turn=needs_user_turn,
    )

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

    # exactly one system message, first; every part right-stripped
    assert [m.role for m in sent].count("system") == 1 and sent[0].role == "system"
    assert all(m.content == m.content.rstrip() or m.content.startswith("@[Tool]:") for m in sent)

    # a user turn holding the question is added exactly when the API needs one and none exists
    kept = sent[1:]
    if added:
        assert needs_user_turn and kept[0].role == "user" and kept[0].content == question
        kept = kept[1:]
    assert added == (needs_user_turn and not any(m.role in ("user", "tool") for m in kept))

    # the other turns keep their written order, roles and tool fields; the only role marker
    # is that of a tool result answering no earlier call, sent as a user turn
    position = -1
    origins: list[int] = []
    for msg in kept:
        if msg.name is not None:
            index = int(msg.name)
            origin = conversation[index]
            assert msg.role == origin.role != "system"
            assert msg.tool_calls == origin.tool_calls
            assert msg.tool_call_id == origin.tool_call_id
            assert origin.role != "tool" or _answers_an_earlier_call(conversation, index)
            assert "@[" not in msg.content
        else:
            assert msg.role == "user" and msg.content.startswith("@[Tool]:\n")
            assert msg.content.count("@[") == 1
            index = next(
                i
                for i in range(position + 1, len(conversation))
                if conversation[i].role == "tool" and not _answers_an_earlier_call(conversation, i)
            )
        assert index > position
        position = index
        origins.append(index)

    # a turn with visible content or a tool call/result is never dropped, so the last such
    # turn is the last message sent
    must_keep = [
        i
        for i, m in enumerate(conversation)
        if m.role != "system" and (m.visible or m.tool_calls or m.tool_call_id is not None)
    ]
    unpaired = [
        i
        for i in must_keep
        if conversation[i].role == "tool" and not _answers_an_earlier_call(conversation, i)
    ]
    assert set(must_keep) - set(unpaired) <= set(origins)
    assert sum(1 for m in kept if m.name is None) >= len(unpaired)
    if must_keep and any(m.visible for m in conversation) and must_keep[-1] not in unpaired:
        assert origins[-1] == must_keep[-1]


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


@settings(max_examples=300, deadline=None)
@given(
    st.lists(messages(), max_size=9),
    st.lists(st.integers(0, 9), max_size=4),
    st.sampled_from(["lm", "agent"]),
    st.none() | text,
    st.booleans(),
)
def test_a_growing_conversation_built_with_a_memo_is_built_as_from_scratch(
    conversation: list[Message],
    lengths: list[int],
    mode: str,
    system_prompt: str | None,
    needs_user_turn: bool,
) -> None:
    """A live conversation's ``Memo`` grows the question and the message list by the new
    messages only: at every length (growing, and any length asked again or shorter, which
    must be built whole) the result is the one built from scratch."""
    memo = Memo()
    history: list[Message] = []
    asked = [*range(1, len(conversation) + 1), *lengths]
    for n in asked:
        history[:] = conversation[:n]
        for use in (memo, None):
            question = build_question(history, mode, use)  # type: ignore[arg-type]
            sent, added = build_messages(
                history,
                "guide",
                system_prompt=system_prompt,
                question=question,
                needs_user_turn=needs_user_turn,
                memo=use,
            )
            if use is memo:
                remembered = (question, chat_to_dicts(sent), added)
        assert remembered == (question, chat_to_dicts(sent), added)


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
        prompt = build_prompt(case)
        assert isinstance(prompt.question, str)
    for diag in loaded.diagnostics:
        assert diag.message and diag.file is not None
