"""What a judge change did: regrade lists, per evaluator, the verdicts that flipped, and
whether each moved towards or away from the people who reviewed that run; compare of two
regrades says the same, finding the reviews through the file both regraded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import agentv
from agentv.api import import_runs, open_store
from support.cli import invoke_cli
from support.fakes.llm_server import FakeLLMServer, RecordedRequest
from support.files import write

#: each case's answer, and whether the two judges pass it
ANSWERS = {
    "a": "yes",  # the first judge passes it, the second does not
    "b": "sure",  # the second passes it, the first does not
    "c": "yes, sure",  # both pass it
    "d": "nope",  # neither does
}


class Judge:
    """A judge behind the fake API that passes answers holding ``word`` (1.0), and fails
    the others (0.2): changed between runs to stand for a judge that was changed."""

    def __init__(self, word: str) -> None:
        self.word = word

    def __call__(self, rec: RecordedRequest) -> str:
        prompt = (rec.body or {})["messages"][-1]["content"]
        answer = prompt.rsplit("[[ ## candidate_answer ## ]]\n", 1)[1]
        score = 1.0 if self.word in answer else 0.2
        return json.dumps({"score": score, "hits": [], "misses": [], "reasoning": self.word})


def _project(root: Path, url: str) -> None:
    write(root, ".git/HEAD", "ref: refs/heads/main\n")
    lines = ["$schema: agentv-targets-v2.2", "targets:"]
    for case, answer in ANSWERS.items():
        lines.append(f"  - {{name: {case}, provider: mock, response: '{answer}', judge_target: j}}")
    lines += [
        "  - name: j",
        "    provider: openai",
        f"    base_url: {url}/v1",
        "    api_key: sk-test-0123456789",
        "    model: judge-model",
        "    max_retries: 0",
    ]
    write(root, ".agentv/targets.yaml", "\n".join(lines) + "\n")
    cases = "".join(
        f"  - id: {case}\n    outcome: Agrees.\n"
        f"    input_messages: [{{role: user, content: 'Do you agree, {case}?'}}]\n"
        f"    execution:\n      target: {case}\n"
        "      evaluators: [{name: judge, type: llm_judge}]\n"
        for case in ANSWERS
    )
    write(root, "evals/agree.yaml", f"$schema: agentv-eval-v2\nevalcases:\n{cases}")


def _review(root: Path, results: Path, verdicts: dict[str, str]) -> None:
    """A person's verdict on some runs of ``results``, in the project's run store."""
    (imported,) = import_runs(results, cwd=root)
    with open_store(cwd=root) as store:
        for case, verdict in verdicts.items():
            key = json.dumps(["agree", case, case]).replace(" ", "")
            store.review(imported.id, key, 0, verdict=verdict, reviewer="ann")


@pytest.fixture
def judged(tmp_path: Path) -> tuple[Path, FakeLLMServer, Judge]:
    judge = Judge("yes")
    server = FakeLLMServer(reply=judge)
    server.__enter__()
    _project(tmp_path, server.url)
    run = agentv.run_eval("evals", cwd=tmp_path, out=tmp_path / "r.jsonl")
    assert {r.eval_id: r.status for r in run.results} == {
        "a": "ok",
        "b": "failed",
        "c": "ok",
        "d": "failed",
    }
    yield tmp_path, server, judge
    server.__exit__(None, None, None)


def test_regrade_lists_the_flips_and_how_they_moved_against_the_people(
    judged: tuple[Path, FakeLLMServer, Judge], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, _, judge = judged
    # people: a should fail (the first judge was wrong), b should pass, c passes
    _review(root, root / "r.jsonl", {"a": "fail", "b": "pass", "c": "pass"})
    judge.word = "sure"  # the judge changed
    done = agentv.regrade("r.jsonl", cwd=root, out="v2.jsonl")
    flips = {e.name: e for e in done.flips}
    assert list(flips) == ["judge", "case verdict"]
    for name in flips:
        e = flips[name]
        assert e.compared == 4
        assert [(f.key[1], f.before, f.after, f.human, f.towards) for f in e.flips] == [
            ("a", "pass", "fail", "fail", True),
            ("b", "fail", "pass", "pass", True),
        ]
        assert (e.reviewed, e.towards, e.away) == (2, 2, 0)
    # every regraded record names the file whose answer it grades again
    records = [json.loads(line) for line in (root / "v2.jsonl").read_text().splitlines()]
    assert {r["regraded_from"] for r in records} == {"r.jsonl"}

    monkeypatch.chdir(root)  # the project's run store is found from here
    result = invoke_cli("regrade", "r.jsonl", "--out", "v3.jsonl")
    assert result.exit_code == 0, result.stdout
    assert (
        "Verdicts that flipped (per evaluator):\n"
        "  judge: 2 of 4 runs (1 pass -> fail, 1 fail -> pass); reviewed 2: 2 towards the "
        "people's verdict, 0 away from it\n"
        "    agree/a [a]: pass -> fail (reviewed: fail, towards)\n"
        "    agree/b [b]: fail -> pass (reviewed: pass, towards)\n"
    ) in result.stdout


def test_a_regrade_that_changes_nothing_says_so(
    judged: tuple[Path, FakeLLMServer, Judge], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, _, _ = judged
    monkeypatch.chdir(root)
    result = invoke_cli("regrade", "r.jsonl")
    assert result.exit_code == 0, result.stdout
    assert "No verdict flipped." in result.stdout
    assert agentv.regrade("r.jsonl", cwd=root, out="again.jsonl").flips[0].flips == ()


def test_compare_of_two_regrades_finds_the_reviews_of_their_answers(
    judged: tuple[Path, FakeLLMServer, Judge], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, _, judge = judged
    # the people disagree with the second judge on b
    _review(root, root / "r.jsonl", {"a": "pass", "b": "fail"})
    agentv.regrade("r.jsonl", cwd=root, out="first.jsonl")
    judge.word = "sure"
    agentv.regrade("r.jsonl", cwd=root, out="second.jsonl")
    c = agentv.compare("first.jsonl", "second.jsonl", cwd=root)
    judge_flips = c.flips[0]
    assert judge_flips.name == "judge"
    assert [(f.key[1], f.before, f.after, f.towards) for f in judge_flips.flips] == [
        ("a", "pass", "fail", False),
        ("b", "fail", "pass", False),
    ]
    assert (judge_flips.towards, judge_flips.away) == (0, 2)
    monkeypatch.chdir(root)
    result = invoke_cli("compare", "first.jsonl", "second.jsonl", "--format", "json")
    data = json.loads(result.stdout)
    assert [(e["evaluator"], e["flipped"], e["away_from_human"]) for e in data["flips"]] == [
        ("judge", 2, 2),
        ("case verdict", 2, 2),
    ]
    markdown = invoke_cli("compare", "first.jsonl", "second.jsonl", "--format", "markdown").stdout
    assert "**Verdicts that flipped (per evaluator):**" in markdown
    assert "  - `agree/a [a]`: pass -> fail (reviewed: pass, away)" in markdown
