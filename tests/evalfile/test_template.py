"""Case templates (docs/eval-files.md, "The template"): the sandbox, undefined names,
values as text or as themselves, and the spool keeping where a case came from."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentv.cases import EvalCase, InvalidCase, RowRef
from agentv.evalfile.spool import CaseSpool
from agentv.evalfile.template import RenderError, TemplateError, compile_leaf, compile_tree
from agentv.evalfile.variables import VarsError, case_id, combinations, combine, parse_vars
from agentv.messages import Message, TextSegment


@pytest.mark.parametrize(
    ("source", "context", "expected"),
    [
        ("Q: {{ q }}?", {"q": "why"}, "Q: why?"),
        ("{{ items }}", {"items": ["a", {"b": 1}]}, ["a", {"b": 1}]),  # a list fills a list
        ("{{ n }}", {"n": 3}, "3"),  # any other value is text
        ("{{ items | map('upper') | list }}", {"items": ["a", "b"]}, ["A", "B"]),
        (
            "x={{ flag }} y={{ nothing }} z={{ items }}",
            {"flag": True, "nothing": None, "items": [1, "é"]},
            'x=true y= z=[1, "é"]',
        ),
        ("{{ raw | from_json }}", {"raw": '[{"role": "user"}]'}, [{"role": "user"}]),
        ("{% if hint %}Hint: {{ hint }}{% endif %}", {"hint": ""}, ""),
        ("{{ x | default('none') }}", {}, "none"),
        ("line\n", {}, "line\n"),
        ("{{ row['Question text'] }}", {"row": {"Question text": "hi"}}, "hi"),
    ],
)
def test_strings_are_filled(source: str, context: dict, expected: object) -> None:
    assert compile_leaf(source).render(context) == expected


def test_undefined_names_and_the_sandbox_are_errors() -> None:
    with pytest.raises(TemplateError) as caught:
        compile_leaf("Q: {{ question }}").render({"q": "x"})
    assert (caught.value.message, caught.value.names) == ("'question' is undefined", ("question",))
    with pytest.raises(TemplateError) as caught:
        compile_leaf("{{ q.__class__.__mro__ }}").render({"q": "x"})
    assert "__class__" in caught.value.message
    with pytest.raises(TemplateError) as caught:
        compile_leaf("{{ items.append(1) }}").render({"items": []})
    assert caught.value.message.startswith("not allowed in a template")
    with pytest.raises(TemplateError) as caught:
        compile_leaf("{{ q ")
    assert caught.value.message.startswith("template syntax error")


def test_a_tree_shares_what_it_does_not_fill_and_names_the_failing_string() -> None:
    constant = {"type": "contains", "value": "fixed"}
    tree = compile_tree(
        {
            "outcome": "Names {{ capital }}.",
            "evaluators": [
                constant,
                {"type": "llm_judge", "prompt": "{{ candidate_answer }} vs {{ rubric }}"},
            ],
        }
    )
    filled = tree.render({"capital": "Paris", "rubric": "R"})
    assert filled == {
        "outcome": "Names Paris.",
        "evaluators": [constant, {"type": "llm_judge", "prompt": "{{ candidate_answer }} vs R"}],
    }
    assert filled["evaluators"][0] is constant  # shared, not copied per row
    assert tree.required == {"capital", "rubric"}  # the judge's own variables are its own
    with pytest.raises(RenderError) as caught:
        tree.render({"rubric": "R"})
    assert caught.value.leaf.path == ("outcome",)


def test_variables() -> None:
    file_vars = parse_vars({"tone": ["formal", "casual"], "lang": "en"})
    case_vars = parse_vars({"lang": ["fr", "de"], "n": [1]})
    merged = combine(file_vars, case_vars)
    assert merged == [("tone", ["formal", "casual"]), ("lang", ["fr", "de"]), ("n", [1])]
    chosen = combinations(merged)
    assert [case_id("c", c) for c in chosen] == [
        "c[tone=formal,lang=fr,n=1]",
        "c[tone=formal,lang=de,n=1]",
        "c[tone=casual,lang=fr,n=1]",
        "c[tone=casual,lang=de,n=1]",
    ]
    with pytest.raises(VarsError) as caught:
        parse_vars({"bad name": [1]})
    assert caught.value.key == "bad name"
    with pytest.raises(VarsError):
        combinations([("a", list(range(200))), ("b", list(range(200)))])


def test_the_spool_keeps_the_row_the_vars_and_cases_that_cannot_run(tmp_path: Path) -> None:
    row = RowRef(str(tmp_path / "d.csv"), 7, 8)
    case = EvalCase(
        id="x[tone=formal]",
        dataset="d",
        eval_file=tmp_path / "e.yaml",
        outcome="o",
        input_messages=(Message("user", (TextSegment("hi"),)),),
        row=row,
        vars={"tone": "formal", "n": [1, 2]},
    )
    invalid = InvalidCase(tmp_path / "e.yaml", "d", 8, None, 4, (), row=RowRef("hf:a/b", 9))
    spool = CaseSpool()
    spool.add(case)
    spool.add_invalid(invalid)
    reader = spool.reader()
    assert reader.next() == (case, ())
    assert reader.next() == (invalid, ())
    assert reader.next() is None
    spool.add(case)  # a reader goes on with what is written after it caught up
    assert reader.next() == (case, ())
    spool.close()
