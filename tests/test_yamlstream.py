"""The event-driven YAML reader must read exactly what PyYAML's safe loader reads."""

from __future__ import annotations

from pathlib import Path

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from agentv.evalfile.loader import iter_cases, load_eval_file
from agentv.yamlstream import StreamResult, iter_stream, stream_yaml
from helpers import write

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
