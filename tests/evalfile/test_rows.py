"""Cases from data (docs/eval-files.md, "Cases from data", "Variables"): rows of each
format filling a template, the problems of broken data located at their row and column,
variable matrices, and rows built as they are read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from agentv.cases import EvalCase, InvalidCase
from agentv.errors import InputError
from agentv.evalfile.loader import iter_entries, load_eval_file
from agentv.messages import chat_to_dicts
from agentv.prompts.builder import build_prompt
from support.files import write


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / ".git").mkdir()  # the repository root
    return tmp_path


def eval_file(project: Path, rows: str, template: str, top: str = "") -> Path:
    text = f"$schema: agentv-eval-v2\ndataset: d\n{top}rows:\n{rows}template:\n{template}"
    return write(project, "evals/e.yaml", text)


def sent(case: EvalCase) -> list[dict[str, Any]]:
    """The messages a model target gets, without the default system message."""
    messages = chat_to_dicts(build_prompt(case).messages)
    if messages[0] == {"role": "system", "content": "You are a careful assistant."}:
        messages = messages[1:]
    return messages


QUESTION = """\
  outcome: Answers.
  input_messages:
    - role: user
      content: "Q: {{ question }}"
"""


def _parquet(path: Path) -> None:
    table = pa.table(
        {
            "question": ["Name two colours", "Count"],
            "tags": [["red", "blue"], []],
            "n": [2, None],
        }
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)


DATA_FILES = [
    pytest.param(
        "q.csv",
        # a byte-order mark, CRLF line ends, a quoted comma, doubled quotes, a line break
        # inside quotes, a blank line
        b'\xef\xbb\xbfid,question\r\na,"Say ""hi"", then go"\r\n\r\nb,"two\r\nlines"\r\n',
        "  id: id\n",
        QUESTION,
        {
            "a": [{"role": "user", "content": 'Q: Say "hi", then go'}],
            "b": [{"role": "user", "content": "Q: two\nlines"}],
        },
        id="csv",
    ),
    pytest.param(
        "q.tsv",
        b'question\tanswer\nA, B\tc\n\nwith "quotes"\td\n',
        "",
        """\
  outcome: Answers {{ answer }}.
  input_messages:
    - role: user
      content: "{{ question }} -> {{ answer }}"
""",
        {
            "1": [{"role": "user", "content": "A, B -> c"}],
            "2": [{"role": "user", "content": 'with "quotes" -> d'}],
        },
        id="tsv",
    ),
    pytest.param(
        "q.jsonl",
        (
            b'{"id": "n1", "messages": [{"role": "system", "content": "Be brief."}, '
            b'{"role": "user", "content": "Hi"}], "meta": {"lang": "fr"}}\n'
            b"\n"
            b'{"id": "n2", "messages": [{"role": "user", "content": "Yo"}], '
            b'"meta": {"lang": "en"}, "flag": true}\n'
        ),
        "  id: id\n",
        """\
  outcome: Answers in {{ meta.lang }}.
  input_messages: "{{ messages + [{'role': 'user', 'content': 'lang=' ~ meta.lang ~ ' flag=' ~ (flag | default(none))}] }}"
""",
        {
            "n1": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Hi"},
                {"role": "user", "content": "lang=fr flag=None"},
            ],
            "n2": [
                {"role": "user", "content": "Yo"},
                {"role": "user", "content": "lang=en flag=True"},
            ],
        },
        id="jsonl-nested",
    ),
    pytest.param(
        "q.json",
        b'[\n  {"question": "one", "n": 3, "x": null, "ok": false},\n  {"question": "two", "n": 1.5, "x": [1, "a"], "ok": true}\n]\n',
        "",
        """\
  outcome: Answers.
  input_messages:
    - role: user
      content: "{{ question }} n={{ n }} x={{ x }} ok={{ ok }}"
""",
        {
            "1": [{"role": "user", "content": "one n=3 x= ok=false"}],
            "2": [{"role": "user", "content": 'two n=1.5 x=[1, "a"] ok=true'}],
        },
        id="json-list",
    ),
    pytest.param(
        "q.parquet",
        None,
        "",
        """\
  outcome: Answers.
  input_messages:
    - role: user
      content: "{{ question }}: {{ tags | join(' and ') }} ({{ n }})"
""",
        {
            "1": [{"role": "user", "content": "Name two colours: red and blue (2)"}],
            "2": [{"role": "user", "content": "Count:  ()"}],
        },
        id="parquet",
    ),
]


@pytest.mark.parametrize(("name", "data", "rows_extra", "template", "expected"), DATA_FILES)
def test_each_format_renders_the_exact_messages(
    project: Path,
    name: str,
    data: bytes | None,
    rows_extra: str,
    template: str,
    expected: dict[str, list[dict[str, Any]]],
) -> None:
    target = project / "evals" / "data" / name
    if data is None:
        _parquet(target)
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    path = eval_file(project, f"  path: data/{name}\n{rows_extra}", template)
    loaded = load_eval_file(path)
    assert [d.format() for d in loaded.diagnostics] == []
    assert {case.id: sent(case) for case in loaded.cases} == expected
    rows = [(c.row.number, c.row.line is None) for c in loaded.cases if c.row is not None]
    assert rows == [(1, name.endswith(".parquet")), (2, name.endswith(".parquet"))]


# --- broken data ----------------------------------------------------------------------------

CAPITALS_TEMPLATE = """\
  outcome: Names {{ capital }}.
  input_messages:
    - role: user
      content: What is the capital of {{ country }}?
  evaluators:
    - type: contains
      value: "{{ capital }}"
"""

BROKEN = [
    pytest.param(
        "capitals.csv",
        b"country,capital\nFrance,Paris\nPeru,\nSpain,Madrid\n",
        CAPITALS_TEMPLATE,
        [("capitals.csv", 3, "column 'capital' is empty")],
        2,
        id="empty-column",
    ),
    pytest.param(
        "capitals.csv",
        b'country,capital\nFrance,Paris\n"Chile,Santiago\nSpain,Madrid\n',
        CAPITALS_TEMPLATE,
        [
            (
                "capitals.csv",
                3,
                "a quote opened in this row is never closed: unexpected end of data",
            )
        ],
        1,
        id="csv-quote-never-closed",
    ),
    pytest.param(
        "capitals.csv",
        b'country,capital\n"France"x,Paris\nSpain,Madrid\n',
        CAPITALS_TEMPLATE,
        [("capitals.csv", 2, "broken quoting: ',' expected after '\"'")],
        1,
        id="csv-text-after-quote",
    ),
    pytest.param(
        "capitals.csv",
        b"country,capital\nFrance,Paris,Europe\nSpain,Madrid\n",
        CAPITALS_TEMPLATE,
        [("capitals.csv", 2, "this row has 3 values, the header 2 (country, capital)")],
        1,
        id="csv-too-many-values",
    ),
    pytest.param(
        "capitals.csv",
        b"country,capital\nFrance,Par\xffis\nSpain,Madrid\n",
        CAPITALS_TEMPLATE,
        [("capitals.csv", 2, "not UTF-8 text (byte 0xff)")],
        1,
        id="csv-not-utf8",
    ),
    pytest.param(
        "capitals.jsonl",
        b'{"country": "France", "capital": "Paris"}\n{"country": "Peru" "capital": "Lima"}\n'
        b'["Spain"]\n{"country": "Chile"}\n{"country": "Italy", "capital": "Rome"}\n',
        CAPITALS_TEMPLATE,
        [
            (
                "capitals.jsonl",
                2,
                "not valid JSON: Expecting ',' delimiter at character 20",
            ),
            ("capitals.jsonl", 3, "a row must be a JSON object, not a list"),
            ("capitals.jsonl", 4, "no column 'capital' in this row"),
        ],
        2,
        id="jsonl-broken-lines",
    ),
    pytest.param(
        "chats.jsonl",
        b'{"messages": [{"role": "user", "content": "Hi"}]}\n{"messages": "Hi"}\n'
        b'{"messages": [{"role": "assitant", "content": "Hi"}]}\n',
        """\
  outcome: Greets.
  input_messages: "{{ messages }}"
""",
        [
            ("chats.jsonl", 2, "column 'messages': `input_messages` must be a list"),
            ("chats.jsonl", 3, "column 'messages': invalid role 'assitant'"),
        ],
        1,
        id="jsonl-wrong-types",
    ),
    pytest.param(
        "capitals.csv",
        b"country,capital\nFrance,Paris\nfrance,Paris2\n",
        CAPITALS_TEMPLATE,
        [("capitals.csv", 3, "id 'france' is also the id of row 1")],
        1,
        id="duplicate-id",
    ),
]


@pytest.mark.parametrize(("name", "data", "template", "expected", "usable"), BROKEN)
def test_broken_data_is_said_at_its_row_and_column(
    project: Path,
    name: str,
    data: bytes,
    template: str,
    expected: list[tuple[str, int, str]],
    usable: int,
) -> None:
    target = project / "evals" / "data" / name
    target.parent.mkdir(parents=True)
    target.write_bytes(data)
    id_line = '  id: "{{ country | lower }}"\n' if "also the id" in str(expected) else ""
    path = eval_file(project, f"  path: data/{name}\n{id_line}", template)
    loaded = load_eval_file(path)
    found = [(Path(d.file or "").name, d.line, d.message) for d in loaded.errors]
    assert found == expected
    assert all(d.hint for d in loaded.errors)
    assert len(loaded.cases) == usable
    # each problem row has an invalid case saying where, for its `invalid` result
    reasons = [bad.reason for bad in loaded.invalid]
    assert reasons == [f"{file}:{line}: {message}" for file, line, message in expected]
    # `validate` checks the rows without keeping their cases, and finds the same
    checked = load_eval_file(path, check_only=True)
    assert [d.format() for d in checked.diagnostics] == [d.format() for d in loaded.diagnostics]
    assert (checked.total_cases, checked.invalid_rows) == (usable + len(expected), len(expected))


def test_parquet_problems_are_located_by_row_number(project: Path) -> None:
    target = project / "evals" / "data" / "c.parquet"
    target.parent.mkdir(parents=True)
    pq.write_table(pa.table({"country": ["France", "Peru"], "capital": ["Paris", None]}), target)
    loaded = load_eval_file(eval_file(project, "  path: data/c.parquet\n", CAPITALS_TEMPLATE))
    (problem,) = loaded.errors
    assert (problem.file, problem.line, problem.location, problem.message) == (
        target,
        None,
        "row 2",
        "column 'capital' is empty",
    )
    assert loaded.invalid[0].reason == "c.parquet, row 2: column 'capital' is empty"


def test_the_same_problem_in_many_rows_is_said_once(project: Path) -> None:
    write(project, "evals/data/c.csv", "country,capital\n" + "X,\n" * 8 + "France,Paris\n")
    loaded = load_eval_file(eval_file(project, "  path: data/c.csv\n", CAPITALS_TEMPLATE))
    (problem,) = loaded.errors
    assert problem.line == 2
    assert problem.message == (
        "column 'capital' is empty (and in 7 more rows: lines 3, 4, 5, 6, 7, ...)"
    )
    assert len(loaded.invalid) == 8 and len(loaded.cases) == 1


@pytest.mark.parametrize(
    ("rows", "template", "data", "where", "message"),
    [
        pytest.param(
            "  path: data/c.csv\n",
            CAPITALS_TEMPLATE.replace("{{ country }}", "{{ contry }}"),
            "country,capital\nFrance,Paris\n",
            ("e.yaml", 9),
            "'contry' is not a column of c.csv",
            id="not-a-column",
        ),
        pytest.param(
            "  path: data/c.csv\n",
            CAPITALS_TEMPLATE.replace("  outcome:", "  outcom:"),
            "country,capital\nFrance,Paris\n",
            ("e.yaml", 6),
            "unknown key 'outcom'",
            id="template-typo",
        ),
        pytest.param(
            "  path: data/missing.csv\n",
            CAPITALS_TEMPLATE,
            "country,capital\n",
            ("e.yaml", 4),
            "data file not found: data/missing.csv",
            id="no-data-file",
        ),
        pytest.param(
            "  path: data/c.csv\n",
            CAPITALS_TEMPLATE,
            "country,country\nFrance,Paris\n",
            ("c.csv", 1),
            "the header names column 'country' twice",
            id="header-twice",
        ),
        pytest.param(
            "  path: data/c.json\n",
            CAPITALS_TEMPLATE,
            '[\n {"country": "France", "capital": "Paris"},\n {"country": "Peru",}\n]\n',
            ("c.json", 3),
            "not valid JSON: Expecting property name enclosed in double quotes",
            id="json-syntax",
        ),
        pytest.param(
            "  path: data/c.csv\n",
            CAPITALS_TEMPLATE.replace("  outcome:", "  repeat: '{{ n }}'\n  outcome:"),
            "country,capital\nFrance,Paris\n",
            ("e.yaml", 6),
            "`repeat` cannot change from row to row",
            id="planned-key-templated",
        ),
    ],
)
def test_problems_of_the_whole_file_make_it_unusable(
    project: Path, rows: str, template: str, data: str, where: tuple[str, int], message: str
) -> None:
    write(project, f"evals/data/{'c.json' if 'json' in rows else 'c.csv'}", data)
    path = eval_file(project, rows, template)
    with pytest.raises(InputError) as caught:
        load_eval_file(path)
    found = [(Path(d.file or "").name, d.line, d.message) for d in caught.value.diagnostics]
    assert (*where, message) in found, found


# --- variables ------------------------------------------------------------------------------


def test_vars_times_rows_make_every_combination(project: Path) -> None:
    write(project, "evals/data/c.csv", "country,capital\nFrance,Paris\nJapan,Tokyo\n")
    template = """\
  vars: {lang: [en, fr]}
  outcome: Names {{ capital }}.
  input_messages:
    - role: user
      content: "({{ tone }}, {{ lang }}) capital of {{ country }}?"
"""
    path = eval_file(
        project,
        '  path: data/c.csv\n  id: "{{ country | lower }}"\n',
        template,
        top="vars:\n  tone: [formal, casual]\n",
    )
    loaded = load_eval_file(path)
    assert [(c.id, c.vars, sent(c)[0]["content"]) for c in loaded.cases] == [
        (
            f"{country.lower()}[tone={tone},lang={lang}]",
            {"tone": tone, "lang": lang},
            f"({tone}, {lang}) capital of {country}?",
        )
        for country in ("France", "Japan")
        for tone in ("formal", "casual")
        for lang in ("en", "fr")
    ]
    picked = load_eval_file(path, eval_id="japan")
    assert [c.id for c in picked.cases] == [
        "japan[tone=formal,lang=en]",
        "japan[tone=formal,lang=fr]",
        "japan[tone=casual,lang=en]",
        "japan[tone=casual,lang=fr]",
    ]


def test_vars_on_written_cases(project: Path) -> None:
    path = write(
        project,
        "evals/v.yaml",
        """\
$schema: agentv-eval-v2
vars:
  tone: [formal, casual]
evalcases:
  - id: greet
    vars: {who: [Ada]}
    outcome: Greets {{ who }}.
    input_messages:
      - role: user
        content: Greet {{ who }} in a {{ tone }} tone.
  - id: plain
    vars: {tone: [dry]}
    outcome: Answers.
    input_messages:
      - role: user
        content: "{{ tone }}"
  - id: broken
    outcome: Answers.
    input_messages:
      - role: user
        content: "{{ mood }}"
""",
    )
    loaded = load_eval_file(path)
    assert [(c.id, sent(c)[0]["content"]) for c in loaded.cases] == [
        ("greet[tone=formal,who=Ada]", "Greet Ada in a formal tone."),
        ("greet[tone=casual,who=Ada]", "Greet Ada in a casual tone."),
        ("plain[tone=dry]", "dry"),
    ]
    assert [(bad.id, bad.line, bad.reason) for bad in loaded.invalid] == [
        ("broken[tone=formal]", 17, "case 'broken[tone=formal]': 'mood' is undefined"),
        ("broken[tone=casual]", 17, "case 'broken[tone=casual]': 'mood' is undefined"),
    ]


def test_a_file_without_rows_or_vars_loads_as_before(project: Path) -> None:
    path = write(
        project,
        "evals/p.yaml",
        "$schema: agentv-eval-v2\nevalcases:\n  - id: a\n    outcome: x\n"
        "    input_messages:\n      - {role: user, content: 'keep {{ this }} as written'}\n",
    )
    (case,) = load_eval_file(path).cases
    assert sent(case) == [{"role": "user", "content": "keep {{ this }} as written"}]
    assert (case.row, case.vars) == (None, None)


# --- reading as the run goes ----------------------------------------------------------------


def test_a_run_builds_rows_as_they_are_asked_for(project: Path) -> None:
    lines = [json.dumps({"q": f"question {i}"}) for i in range(1, 61)]
    write(project, "evals/data/q.jsonl", "\n".join(lines) + "\n")
    template = "  outcome: Answers.\n  input_messages:\n    - {role: user, content: '{{ q }}'}\n"
    path = eval_file(project, "  path: data/q.jsonl\n", template)
    loaded = load_eval_file(path, keep_limit=10)
    stream = loaded.rows
    assert stream is not None and loaded.cases == []
    assert loaded.case_repeats == {None: 60}  # counted from the lines, no value read
    assert stream.count == 1  # only the first row, to check the template on it
    first, second = iter_entries(loaded), iter_entries(loaded)
    head = [next(first).id for _ in range(5)]
    assert head == ["1", "2", "3", "4", "5"] and stream.count == 5
    # a second reader (another target) gets the same cases, built once; beyond
    # keep_limit they wait on disk
    everything = [entry.id for entry in second]
    assert everything == [str(i) for i in range(1, 61)] and stream.count == 60
    assert [entry.id for entry in first] == [str(i) for i in range(6, 61)]
    assert stream.count == 60
    assert all(isinstance(e, EvalCase) for e in iter_entries(loaded))


def test_invalid_rows_come_with_the_run(project: Path) -> None:
    write(project, "evals/data/c.csv", "country,capital\nFrance,Paris\nPeru,\nSpain,Madrid\n")
    path = eval_file(project, "  path: data/c.csv\n", CAPITALS_TEMPLATE)
    loaded = load_eval_file(path, keep_limit=1)
    entries = list(iter_entries(loaded))
    assert [(type(e).__name__, e.id) for e in entries] == [
        ("EvalCase", "1"),
        ("InvalidCase", "2"),
        ("EvalCase", "3"),
    ]
    bad = entries[1]
    assert isinstance(bad, InvalidCase) and bad.row is not None
    assert (bad.row.number, bad.row.line, bad.reason) == (
        2,
        3,
        "c.csv:3: column 'capital' is empty",
    )


def test_filter_limit_and_sample(project: Path) -> None:
    rows = "".join(f"{i},{'hard' if i % 2 else 'easy'}\n" for i in range(1, 21))
    write(project, "evals/data/q.csv", "n,level\n" + rows)
    template = "  outcome: Answers.\n  input_messages:\n    - {role: user, content: 'n={{ n }}'}\n"

    def ids(extra: str) -> list[str]:
        path = eval_file(project, f"  path: data/q.csv\n  id: n\n{extra}", template)
        return [c.id for c in load_eval_file(path).cases]

    assert ids("  filter: \"{{ level == 'hard' }}\"\n") == [str(i) for i in range(1, 21, 2)]
    assert ids("  filter: level == 'easy'\n  limit: 3\n") == ["2", "4", "6"]
    sampled = ids("  sample: {n: 4, seed: 3}\n")
    assert len(sampled) == 4 and sampled == sorted(sampled, key=int)
    assert ids("  sample: {n: 4, seed: 3}\n") == sampled  # the same rows for the same seed
    assert ids("  sample: {n: 4, seed: 4}\n") != sampled


@pytest.mark.parametrize(
    "text",
    [
        'a,b\n1,2\n\n3,"x\ny"\n4,"q""r"\n',
        'a\n"x\n\n"\n',
        'a,b\n"1,2\n',
        "a\r\n1\r\n\r\n2\r\n",
        'a,b\n"x"y,1\n2,3\n',
    ],
)
def test_counting_csv_rows_without_reading_them_agrees_with_reading(
    project: Path, text: str
) -> None:
    from agentv.evalfile.rows import CsvSource

    path = write(project, "t.csv", text)
    source = CsvSource(path, "t.csv", ",")
    assert source.count() == sum(1 for _ in source.rows())
