"""grade_case: evaluator lists, aggregation, the default evaluator, and loaded eval files."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from agentv.cases import EvaluatorConfig
from agentv.evalfile.loader import load_eval_file
from agentv.evaluators.base import EvaluationContext, EvaluatorScore
from agentv.evaluators.deterministic import ContainsSpec
from agentv.evaluators.grading import aggregate, grade_case
from agentv.prompts.builder import build_prompt
from agentv.providers.base import ProviderResponse, Usage
from support.evaluator_kit import FakeJudge, contains, judge, make_case, make_ctx, regex
from support.files import write


def entry(name: str, score: float, hits: list[str], misses: list[str], reasoning: str | None):
    return EvaluatorScore(
        name, "contains", score, hits, misses, reasoning, None, None, max(len(hits + misses), 1)
    )


def test_aggregate_mean_concatenation_and_reasoning() -> None:
    grade = aggregate(
        [
            entry("a", 1.0, ["a1"], [], "fine"),
            entry("b", 0.0, [], ["b1", "b2"], None),
            entry("c", 0.5, ["c1"], ["c2"], "  "),
            entry("d", 0.25, ["d1"], [], "partly"),
        ]
    )
    assert grade.score == (1.0 + 0.0 + 0.5 + 0.25) / 4
    assert grade.hits == ["a1", "c1", "d1"]
    assert grade.misses == ["b1", "b2", "c2"]
    assert grade.expected_aspect_count == 1 + 2 + 2 + 1
    assert grade.reasoning == "a: fine | d: partly"
    assert grade.evaluator_results is not None and len(grade.evaluator_results) == 4
    assert grade.evaluator_raw_request is None
    assert not grade.judge_failed and grade.error is None


def test_aggregate_of_nothing() -> None:
    grade = aggregate([])
    assert (grade.score, grade.hits, grade.misses, grade.reasoning) == (0.0, [], [], None)


async def test_list_runs_every_evaluator_in_order(tmp_path: Path) -> None:
    fake = FakeJudge('{"score": 0.5, "hits": ["judge hit"], "reasoning": "half right"}')
    configs = [contains("Paris", "has_paris"), judge("quality"), regex("(", name="broken")]
    case = make_case(tmp_path, evaluators=configs)
    grade = await grade_case(make_ctx(case, "Paris", judge=fake))
    assert grade.evaluator_results is not None
    assert [r.name for r in grade.evaluator_results] == ["has_paris", "quality", "broken"]
    assert [r.score for r in grade.evaluator_results] == [1.0, 0.5, 0.0]
    assert grade.score == 0.5
    assert grade.hits == ['answer contains "Paris"', "judge hit"]
    assert grade.misses[0].startswith("Evaluator 'broken' failed: invalid regular expression")
    assert grade.reasoning == "quality: half right"
    assert grade.expected_aspect_count == 3
    # a broken regex is not a judge failure; the judge answered
    assert grade.judge_failed is False
    assert grade.evaluator_raw_request is None
    assert grade.usage == Usage(10, 5, 15)

    dicts = [r.to_dict() for r in grade.evaluator_results]
    assert dicts[0] == {
        "name": "has_paris",
        "type": "contains",
        "score": 1.0,
        "hits": ['answer contains "Paris"'],
        "misses": [],
    }
    assert list(dicts[1]) == [
        "name",
        "type",
        "score",
        "hits",
        "misses",
        "reasoning",
        "evaluator_raw_request",
        "usage",
        "latency_ms",
    ]
    assert dicts[2]["error"].startswith("invalid regular expression")
    json.dumps(dicts)  # JSON-ready


async def test_failed_judge_in_a_list_is_flagged(tmp_path: Path) -> None:
    fake = FakeJudge("not a verdict")
    case = make_case(tmp_path, evaluators=[contains("Paris"), judge("quality")])
    grade = await grade_case(make_ctx(case, "Paris", judge=fake))
    assert grade.judge_failed
    assert grade.score == 0.5
    assert grade.error is None  # failures of listed evaluators stay on their entries
    assert grade.evaluator_results is not None
    assert grade.evaluator_results[1].error is not None


async def test_default_evaluator_reports_its_raw_request(tmp_path: Path) -> None:
    fake = FakeJudge(
        ProviderResponse(text='{"score": 0.9, "hits": ["h"], "reasoning": "good"}', usage=None)
    )
    grade = await grade_case(make_ctx(make_case(tmp_path), "Paris", judge=fake))
    assert (grade.score, grade.hits, grade.reasoning) == (0.9, ["h"], "good")
    assert grade.evaluator_results is None
    assert grade.evaluator_raw_request is not None
    assert grade.evaluator_raw_request["prompt"] == fake.requests[0].question
    assert grade.expected_aspect_count == 1
    assert not grade.judge_failed and grade.error is None


class _Exploding(ContainsSpec):
    """A ``contains`` whose grading has a bug."""

    async def evaluate(self, ctx: EvaluationContext, config: EvaluatorConfig) -> EvaluatorScore:
        raise KeyError("surprise")


async def test_an_evaluator_that_raises_is_recorded(tmp_path: Path) -> None:
    exploding = EvaluatorConfig("boom", _Exploding(type="contains", value="x"))
    case = make_case(tmp_path, evaluators=[exploding, regex("P")])
    grade = await grade_case(make_ctx(case, "Paris"))
    assert grade.evaluator_results is not None
    first = grade.evaluator_results[0]
    assert (first.score, first.error) == (0.0, "'surprise'")
    assert first.misses == ["Evaluator 'boom' failed: 'surprise'"]
    assert grade.evaluator_results[1].score == 1.0
    assert grade.score == 0.5


@pytest.mark.slow
async def test_loaded_eval_file_end_to_end(repo: Path) -> None:
    """Evaluators as the loader resolves them: code cwd, judge prompt file, schema path."""
    py = shlex.quote(sys.executable)
    write(
        repo,
        "evals/checks/grade.py",
        "import json, os, sys\n"
        "d = json.load(sys.stdin)\n"
        "ok = 'Paris' in d['candidate_answer']\n"
        "print(json.dumps({'score': 1 if ok else 0, 'hits': [os.path.basename(os.getcwd())]}))\n",
    )
    write(repo, "evals/prompts/judge.md", "Grade {{ candidate_answer }} for: ${expected_outcome}")
    write(repo, "evals/answer.schema.json", json.dumps({"type": "object", "required": ["city"]}))
    eval_file = write(
        repo,
        "evals/geo.yaml",
        f"""$schema: agentv-eval-v2
evalcases:
  - id: capital
    outcome: Names Paris.
    input_messages:
      - role: user
        content: What is the capital of France? Answer in JSON.
    evaluators:
      - name: script
        type: code
        script: {py} grade.py
        cwd: checks
      - name: judge
        type: llm_judge
        prompt: prompts/judge.md
      - name: json
        type: is_json
        schema: answer.schema.json
      - type: icontains
        value: PARIS
""",
    )
    loaded = load_eval_file(eval_file)
    assert [d.format() for d in loaded.errors] == []
    (case,) = loaded.cases
    fake = FakeJudge('{"score": 1, "hits": ["judged"]}')
    ctx = EvaluationContext(
        case=case,
        prompt=build_prompt(case),
        candidate='{"city": "Paris"}',
        target_name="default",
        judge=fake,
        timeout=30,
    )
    grade = await grade_case(ctx)
    assert grade.evaluator_results is not None
    errors = {r.name: r.error for r in grade.evaluator_results if r.error}
    assert errors == {}
    assert grade.score == 1.0
    assert grade.hits == [
        "checks",
        "judged",
        "answer is valid JSON matching the schema",
        'answer contains "PARIS" (ignoring case)',
    ]
    assert fake.requests[0].question == 'Grade {"city": "Paris"} for: Names Paris.'


async def test_a_case_given_as_a_function_is_made_only_when_an_evaluator_reads_it(
    tmp_path: Path,
) -> None:
    """A live turn hands its view of the case as a function (``EvaluationContext``): checks
    of the answer alone never make it; a judge makes it once, and grades against it."""
    made: list[int] = []
    checks = (contains("Paris"), regex("P.ris"))
    base = make_case(tmp_path, evaluators=checks, outcome="Names the capital.")

    def view() -> object:
        made.append(1)
        return make_case(tmp_path, evaluators=checks, outcome="Names Paris, the turn's own.")

    prompt = build_prompt(base)
    plain = EvaluationContext(view, prompt, "Paris", "t", None)  # type: ignore[arg-type]
    grade = await grade_case(plain, checks)
    assert grade.score == 1.0 and made == []

    fake = FakeJudge('{"score": 1, "hits": ["judged"]}')
    judged = EvaluationContext(view, prompt, "Paris", "t", fake)  # type: ignore[arg-type]
    grade = await grade_case(judged, (*checks, judge()))
    assert grade.score == 1.0 and made == [1]  # made once, for the judge
    assert judged.case is judged.case and made == [1]
    assert "Names Paris, the turn's own." in fake.requests[0].question
