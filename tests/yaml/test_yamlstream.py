"""The event-driven YAML reader must read exactly what PyYAML's safe loader reads.

And the loader built on it reads a file once, reporting every problem from what it kept.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from agentv.errors import InputError
from agentv.evalfile.loader import iter_cases, load_eval_file
from agentv.yaml.stream import StreamResult, iter_stream, stream_yaml
from support.files import write

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**40), max_value=2**40)
    | st.floats(allow_nan=False)
    | st.text(max_size=30)
    | st.sampled_from(["yes", "No", "on", "OFF", "~", "null", "0x1F", "1_000", "2024-01-01", ""])
)
documents = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=25,
)


@settings(max_examples=300, deadline=None)
@given(documents, st.sampled_from([None, True, False]))
def test_same_values_as_pyyaml(doc: object, flow: bool | None) -> None:
    text = yaml.safe_dump(doc, default_flow_style=flow, allow_unicode=True)
    assert stream_yaml(text).data == yaml.safe_load(text)


@pytest.mark.parametrize("key", ["\0none", "evalcases", None])
def test_no_top_level_key_is_taken_for_a_streamed_list_when_nothing_is_streamed(
    key: str | None,
) -> None:
    # found by the property above: a key spelled like the reader's old "no list" marker
    text = yaml.safe_dump({key: [1, 2], "other": []})
    result = stream_yaml(text)
    assert result.data == {key: [1, 2], "other": []}
    assert result.items is None


def test_plain_words_typed_as_pyyaml_types_them() -> None:
    # The reader decides most plain words without PyYAML's resolver: check every bool and
    # null spelling, and words that only look like them, against it.
    words = [
        spell(w)
        for w in ("yes", "no", "true", "false", "on", "off", "null", "y", "n", "t", "f", "o")
        for spell in (str.lower, str.capitalize, str.upper, str.swapcase)
    ]
    words += ["onward", "nothing", "Yes!", "offline", "type", "value", "tRUE", "nULL"]
    text = "".join(f"k{i}: {w}\n" for i, w in enumerate(words))
    ours, theirs = stream_yaml(text).data, yaml.safe_load(text)
    assert ours == theirs
    assert [type(v) for v in ours.values()] == [type(v) for v in theirs.values()]


TRICKY = """\
base: &b
  a: 1
  b: [yes, no, ~, 1.5, 0x1F, 2024-01-01, "quoted 1", '', .inf]
  c:
merged:
  <<: *b
  a: 2
many:
  <<: [*b, {z: 26}]
seq: &s
  - x
  - {k: v, n: null}
again: *s
multi: |
  line1
  line2
folded: >
  a
  b
dup: 1
dup: 2
evalcases:
  - id: a
    nested: {deep: {er: [1, {two: 2}]}}
  - *b
tail: after
"""


def test_anchors_merges_block_scalars_and_duplicates(tmp_path: Path) -> None:
    path = write(tmp_path, "t.yaml", TRICKY)
    result = stream_yaml(path)
    assert result.data == yaml.safe_load(TRICKY)
    assert result.duplicate_keys == [("dup", 21, 1)]


def test_list_items_are_streamed_one_at_a_time(tmp_path: Path) -> None:
    path = write(tmp_path, "t.yaml", TRICKY)
    result = StreamResult(data=None)
    seen = []
    for index, item, line in iter_stream(path, "evalcases", result):
        # keys written before the list are there already; later ones not yet
        assert "base" in result.data and "tail" not in result.data
        seen.append((index, item, line))
    assert [(i, line) for i, _, line in seen] == [(0, 23), (1, 25)]
    assert seen[0][1] == {"id": "a", "nested": {"deep": {"er": [1, {"two": 2}]}}}
    assert result.data["evalcases"] == 2 and result.data["tail"] == "after"


def _suite(root: Path, n: int) -> Path:
    write(root, "ctx.md", "context\n")
    cases = "".join(
        f"  - id: c{i}\n    outcome: o\n    input_messages:\n"
        f"      - role: user\n        content:\n          - {{type: text, value: 'q{i}'}}\n"
        f"          - {{type: file, value: ctx.md}}\n"
        for i in range(n)
    )
    return write(root, "e.yaml", f"$schema: agentv-eval-v2\nevalcases:\n{cases}")


def test_large_files_are_checked_then_streamed_again(repo: Path) -> None:
    path = _suite(repo, 30)
    kept = load_eval_file(path)
    streamed = load_eval_file(path, keep_limit=10)
    assert not kept.streamed and len(kept.cases) == 30
    assert streamed.streamed and streamed.cases == [] and streamed.case_count == 30
    again = list(iter_cases(streamed))
    assert [c.id for c in again] == [f"c{i}" for i in range(30)]
    assert again == kept.cases  # the same cases, built again


def test_header_keys_after_the_cases_are_honoured(repo: Path) -> None:
    path = _suite(repo, 2)
    path.write_text(path.read_text() + "dataset: late-name\n")
    loaded = load_eval_file(path, keep_limit=1)
    assert loaded.dataset == "late-name"
    assert {c.dataset for c in iter_cases(loaded)} == {"late-name"}


def test_header_keys_after_kept_cases_are_honoured(repo: Path) -> None:
    path = _suite(repo, 3)
    text = path.read_text().replace("  - id: c1\n", "  - id: c1\n    evaluator: llm_judge\n")
    path.write_text(text + "dataset: late-name\nevaluator: code\n")
    loaded = load_eval_file(path)
    assert not loaded.streamed and loaded.dataset == "late-name"
    assert [(c.dataset, c.default_evaluator) for c in loaded.cases] == [
        ("late-name", "code"),
        ("late-name", "llm_judge"),  # its own evaluator wins over the file's
        ("late-name", "code"),
    ]
    assert loaded.cases == list(iter_cases(load_eval_file(path, keep_limit=1)))


def test_a_file_is_read_once_even_when_it_is_wrong(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Diagnostics come from what the stream reader kept, never from reading the file again."""
    import agentv.yaml.source

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("the file was read again")

    monkeypatch.setattr(agentv.yaml.source, "read_text", refuse)
    monkeypatch.setattr(yaml, "compose", refuse)
    bad_case = "  - id: b\n    outcome: x\n    input_messages: [{role: usr, content: hi}]\n"
    path = write(repo, "e.yaml", f"evalcases:\n{bad_case}dataset: d\nextra: 1\n")
    with pytest.raises(InputError) as info:
        load_eval_file(path)
    assert [(d.message, d.line, d.column) for d in info.value.diagnostics] == [
        ("missing `$schema`", 1, 1),
        ("unknown key 'extra'", 6, 1),
        ("case 'b': invalid role 'usr'", 4, 29),
    ]
    path.write_bytes(b'$schema: agentv-eval-v2\nevalcases:\n  - id: "open\n')
    with pytest.raises(InputError) as info:
        load_eval_file(path)
    (diag,) = info.value.diagnostics
    assert (diag.line, diag.column) == (3, 9)
    assert (
        diag.hint == "the quote opened at line 3 is never closed: end the value with the same quote"
    )


def test_syntax_errors_far_into_a_large_file(repo: Path) -> None:
    path = _suite(repo, 3000)
    lines = path.read_text().splitlines(keepends=True)
    tabbed = lines.copy()
    tabbed[15001] = "\t" + tabbed[15001].lstrip()
    path.write_text("".join(tabbed))
    with pytest.raises(InputError) as info:
        load_eval_file(path)
    (diag,) = info.value.diagnostics
    assert diag.line == 15002
    assert diag.hint == "YAML does not allow tabs for indentation; use spaces"
    # A quote opened early and never closed: the parser stops at the end, far away.
    unclosed = lines.copy()
    unclosed[3] = unclosed[3].replace("outcome: o", 'outcome: "o')
    path.write_text("".join(unclosed))
    with pytest.raises(InputError) as info:
        load_eval_file(path)
    (diag,) = info.value.diagnostics
    assert (diag.line, diag.column) == (4, 14)
    assert (
        diag.hint == "the quote opened at line 4 is never closed: end the value with the same quote"
    )


def test_bytes_that_are_not_utf8_anywhere_are_reported_first(repo: Path) -> None:
    path = _suite(repo, 2000)
    good = path.read_bytes()
    for data, line in [
        (good + b"...\n# \xe9\n", good.count(b"\n") + 2),  # after the document
        (good.replace(b"- id: c1500\n", b"- id: c1500\n\t") + b"# \xff\n", good.count(b"\n") + 1),
        (good[:50_000] + b"\xc3(" + good[50_000:], good[:50_000].count(b"\n") + 1),
    ]:
        path.write_bytes(data)
        with pytest.raises(InputError) as info:
            load_eval_file(path)
        (diag,) = info.value.diagnostics
        assert diag.message.startswith("not UTF-8 text (byte 0x")
        assert (diag.line, diag.column) == (line, None)


def test_crlf_and_byte_order_mark_read_as_the_text(repo: Path) -> None:
    path = _suite(repo, 600)  # larger than a read: a CRLF falls across pieces
    lf = load_eval_file(path)
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes().replace(b"\n", b"\r\n"))
    crlf = load_eval_file(path)
    assert crlf.cases == lf.cases
    assert stream_yaml(path).data == stream_yaml(path.read_text(encoding="utf-8-sig")).data


def test_problems_in_a_case_are_located_inside_it(repo: Path) -> None:
    text = """$schema: agentv-eval-v2
evalcases:
  - &first
    id: a
    outcome: shared
    input_messages: [{role: user, content: hi}]
  - <<: *first
    id: b
    input_messages:
      - {role: user, content: hi}
      - role: usr
        content: &c hi
      - {role: user, content: *c}
    extra: 1
"""
    loaded = load_eval_file(write(repo, "e.yaml", text))
    assert [c.id for c in loaded.cases] == ["a"]
    assert [(d.message, d.line, d.column) for d in loaded.diagnostics] == [
        ("case 'b': invalid role 'usr'", 11, 15),
        ("case 'b': unknown key 'extra'", 14, 5),
    ]


def test_a_mapping_as_a_key_is_a_yaml_error() -> None:
    with pytest.raises(yaml.YAMLError, match="found unhashable key"):
        stream_yaml("a:\n  {k: v}: 1\n")
