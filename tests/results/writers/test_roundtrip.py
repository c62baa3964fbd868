"""Any result-shaped record reads back as written (property tests)."""

from __future__ import annotations

import json
from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from agentv.results.writers import dumps_document, dumps_line

_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)
_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | _text
)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4),
    max_leaves=12,
)
_records = st.dictionaries(_text, _values, max_size=6)


def _crlf_normalised(value: Any) -> Any:
    """What the YAML writer promises: CRLF becomes LF in multi-line text values; keys are
    kept exactly (two keys must never merge)."""
    if isinstance(value, str):
        if any(ch in value for ch in ("\x85", "\u2028", "\u2029")):
            return value  # written double-quoted, every character escaped as it is
        return value.replace("\r\n", "\n")
    if isinstance(value, list):
        return [_crlf_normalised(v) for v in value]
    if isinstance(value, dict):
        return {k: _crlf_normalised(v) for k, v in value.items()}
    return value


@settings(max_examples=150, deadline=None)
@given(_records)
def test_jsonl_line_round_trips(record: dict[str, Any]) -> None:
    line = dumps_line(record)
    assert line.endswith(b"\n") and b"\n" not in line[:-1]
    assert json.loads(line) == record


def test_yaml_keys_with_carriage_returns_stay_distinct() -> None:
    record = {"a\r\nb": 1, "a\nb": 2, "x": {"\r\n": "line\r\nnext\r\n"}}
    assert yaml.safe_load(dumps_document(record)) == {
        "a\r\nb": 1,
        "a\nb": 2,
        "x": {"\r\n": "line\nnext\n"},
    }


@settings(max_examples=150, deadline=None)
@given(_records)
def test_yaml_document_round_trips(record: dict[str, Any]) -> None:
    assert yaml.safe_load(dumps_document(record)) == _crlf_normalised(record)
