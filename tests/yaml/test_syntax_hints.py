"""A YAML syntax error gets the hint that fits the mistake, not the parser's words: a table
of broken eval files, each with the line, column and hint a user is shown."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentv.errors import InputError
from agentv.evalfile.loader import load_eval_file

HEAD = "$schema: agentv-eval-v2\nevalcases:\n"
CASE = "  - id: a\n    outcome: says hello\n"

BROKEN = [
    (
        "one space too many before a key",
        HEAD + CASE + "     input_messages:\n      - {role: user, content: hi}\n",
        (5, 20),
        "this line is indented 5 spaces, more than `outcome:` (line 4, 4 spaces), so it reads "
        "as part of that value: line it up with `outcome:`",
    ),
    (
        "a value holding ': '",
        HEAD + CASE + "    input_messages:\n      - role: user\n        content: Note: this\n",
        (7, 22),
        "quote a value that contains ': ' (for example value: \"a: b\")",
    ),
    (
        "a key indented more than the one before",
        HEAD + "  - id: a\n      outcome: x\n    input_messages: []\n",
        (4, 14),
        "this line is indented 6 spaces, more than `id:` (line 3, 4 spaces), so it reads as "
        "part of that value: line it up with `id:`",
    ),
    (
        "a key between two levels",
        HEAD + CASE + "    input_messages:\n      - role: user\n        content: hi\n"
        "     evaluators: []\n",
        (8, 6),
        "this line is indented 5 spaces, between `input_messages:` (line 5, 4 spaces) and "
        "`content:` (line 7, 8 spaces): the keys of one mapping line up, so indent it as the key "
        "it goes with",
    ),
    (
        "a key of the item at the list's column",
        HEAD + CASE + "  input_messages: []\n",
        (5, 3),
        "this line is at the column of the list's `-` (line 3) but is no item: indent it as "
        "the keys of the item above, or start it with `- `",
    ),
    (
        "a key missing its colon",
        HEAD + "  - id a\n    outcome: x\n",
        (4, 12),
        "line 3 has no `:` after its key: write `key: value` (text that goes on over several "
        "lines goes under `key: |`)",
    ),
    (
        "a list item with no space after its dash",
        HEAD + "  -id: a\n  - outcome: x\n",
        (4, 3),
        "put a space after the `-` of the list item on line 3",
    ),
    (
        "list items out of line",
        HEAD + CASE + "    input_messages:\n      - {role: user, content: hi}\n"
        "     - {role: user, content: again}\n",
        (7, 6),
        "this list item is indented 5 spaces, the one on line 6 6 spaces: the items of one "
        "list line up",
    ),
    (
        "a quote never closed",
        HEAD + '  - id: "a\n    outcome: x\n',
        (3, 9),
        "the quote opened at line 3 is never closed: end the value with the same quote",
    ),
    (
        "text after a closing quote",
        HEAD + '  - id: "a" b\n    outcome: x\n',
        (3, 13),
        "text follows a closing quote: quote the whole value, or remove what follows",
    ),
    (
        "a [ never closed",
        HEAD + CASE + "    input_messages: [{role: user, content: hi}\n    note: x\n",
        (6, 5),
        "the [ opened at line 5 is not closed before this line: end the list with ], or "
        "quote a value that starts with [",
    ),
    (
        "a template value unquoted",
        HEAD + CASE + "    note: {{ column }}\n",
        (5, 12),
        'a value that starts with { is read as a mapping: quote it (for example "{{ column }}")',
    ),
    (
        "a tab for indentation",
        HEAD + CASE + "\tnote: x\n",
        (5, 1),
        "YAML does not allow tabs for indentation; use spaces",
    ),
    (
        "a value starting with @",
        HEAD + CASE + "    note: @someone\n",
        (5, 11),
        "a value cannot start with @: quote it",
    ),
    (
        "a value starting with *",
        HEAD + CASE + "    note: *important*\n",
        (5, 21),
        "a value that starts with * or & is read as an alias or anchor: quote it",
    ),
]


@pytest.mark.parametrize(
    ("text", "where", "hint"), [b[1:] for b in BROKEN], ids=[b[0] for b in BROKEN]
)
def test_a_syntax_error_gets_the_hint_that_fits(
    tmp_path: Path, text: str, where: tuple[int, int], hint: str
) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as info:
        load_eval_file(path)
    (diag,) = info.value.diagnostics
    assert ((diag.line, diag.column), diag.hint) == (where, hint), diag.message
