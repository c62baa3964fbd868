"""Numbers in eval and targets files are numbers, finite and sane (docs/reliability.md,
"Hostile files are refused in words"): a weight, a flag or a price written as text, a
flag written as a number, an infinite time limit, a price or weight so large that sums of
them overflow: each is refused with its file and line by ``validate`` (and the run), never
read as something else. And a results record whose score is null is read, with a located
warning, by every reader. Through the real command line on real files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.cli import agentv_cli
from support.files import write
from support.targets import mock_target, write_targets

#: every test here starts agentv (or a script) as a process: left out of `make test-fast`
pytestmark = pytest.mark.slow


def _case(evaluator: str, extra: str = "") -> str:
    return (
        "$schema: agentv-eval-v2\nevalcases:\n  - id: a\n    outcome: x\n"
        "    input_messages: [{role: user, content: hi}]\n"
        f"{extra}    evaluators:\n      - {evaluator}\n"
    )


@pytest.mark.parametrize(
    ("evaluator", "said"),
    [
        ('{type: contains, value: a, weight: "2"}', "`weight`"),
        ("{type: contains, value: a, weight: true}", "`weight`"),
        ("{type: contains, value: a, weight: 1.0e308}", "`weight`"),
        ('{type: contains, value: a, required: "yes"}', "`required`"),
        ("{type: contains, value: a, required: 1}", "`required`"),
        ('{type: contains, value: a, threshold: "0.5"}', "`threshold`"),
        ("{type: code, script: check.py, timeout_seconds: .inf}", "`timeout_seconds`"),
    ],
)
def test_an_evaluator_setting_of_the_wrong_kind_is_refused(
    repo: Path, evaluator: str, said: str
) -> None:
    write_targets(repo, mock_target(response="an answer"))
    write(repo, "evals/check.py", "print('{\"score\": 1}')\n")
    write(repo, "evals/e.yaml", _case(evaluator))
    checked = agentv_cli(repo, "validate", "evals/e.yaml")
    assert checked.returncode == 1, checked.stdout
    out = checked.stdout + checked.stderr
    assert "evals/e.yaml:7" in out and said in out, out
    ran = agentv_cli(repo, "eval", "evals/e.yaml", "--out", "r.jsonl")
    assert json.loads((repo / "r.jsonl").read_text())["status"] == "invalid", ran.stdout


def test_a_tool_without_an_end_to_its_time_is_refused(repo: Path) -> None:
    write_targets(repo, mock_target(response="an answer"))
    tool = "    tools:\n      - name: t\n        script: echo hi\n        timeout_seconds: .inf\n"
    write(repo, "evals/e.yaml", _case("{type: contains, value: a}", tool))
    checked = agentv_cli(repo, "validate", "evals/e.yaml")
    assert checked.returncode == 1, checked.stdout
    out = checked.stdout + checked.stderr
    assert "evals/e.yaml:9" in out and "`timeout_seconds`" in out and "finite" in out, out


@pytest.mark.parametrize(
    ("fields", "line", "said"),
    [
        ('price: {input_per_mtok: "2.5", output_per_mtok: 1}', 6, "input_per_mtok"),
        ("price: {input_per_mtok: 1.0e308, output_per_mtok: 1}", 6, "input_per_mtok"),
        ("timeout_seconds: .inf", 6, "timeout_seconds"),
    ],
)
def test_a_target_number_of_the_wrong_kind_is_refused(
    repo: Path, fields: str, line: int, said: str
) -> None:
    write(
        repo,
        ".agentv/targets.yaml",
        "$schema: agentv-targets-v2.2\ntargets:\n  - name: default\n    provider: openai\n"
        f"    model: m\n    {fields}\n    api_key: k-12345678\n",
    )
    write(repo, "evals/e.yaml", _case("{type: contains, value: a}"))
    checked = agentv_cli(repo, "validate", ".agentv/targets.yaml")
    assert checked.returncode == 1, checked.stdout
    out = checked.stdout + checked.stderr
    assert f".agentv/targets.yaml:{line}" in out and said in out, out
    # estimate neither overflows nor prints what is not JSON
    estimated = agentv_cli(repo, "estimate", "evals/e.yaml", "--format", "json")
    assert said in estimated.stderr
    assert "Infinity" not in estimated.stdout
    json.loads(estimated.stdout)  # JSON, whatever the target says


def test_a_null_score_is_read_as_0_with_a_located_warning(repo: Path) -> None:
    write_targets(repo, mock_target(response="an answer"))
    write(repo, "evals/e.yaml", _case("{type: contains, value: answer}"))
    ran = agentv_cli(repo, "eval", "evals/e.yaml", "--out", "r.jsonl")
    assert ran.returncode == 0, ran.stderr
    record = json.loads((repo / "r.jsonl").read_text())
    write(repo, "null.jsonl", json.dumps({**record, "score": None}) + "\n")
    warning = "null.jsonl:1: warning: score is null (it was not a number when written): read as 0"

    report = agentv_cli(repo, "report", "null.jsonl", "-o", "r.html")
    assert report.returncode == 0, report.stderr
    assert "(1 results)" in report.stdout and warning in report.stderr
    compared = agentv_cli(repo, "compare", "r.jsonl", "null.jsonl", "--format", "json")
    assert compared.returncode == 0, compared.stderr
    assert warning in compared.stderr
    (changed,) = json.loads(compared.stdout)["changed"]
    assert (changed["base"]["score"], changed["new"]["score"]) == (1.0, 0.0)
    resumed = agentv_cli(repo, "eval", "evals/e.yaml", "--resume", "null.jsonl")
    assert resumed.returncode == 0, resumed.stderr
    assert "null.jsonl: 0 run(s) to do" in resumed.stdout
    assert warning in resumed.stderr


def test_weights_at_their_largest_still_make_a_score(repo: Path) -> None:
    write_targets(repo, mock_target(response="an answer"))
    evaluators = (
        "{type: contains, value: answer, weight: 1000000}\n"
        "      - {type: contains, value: nothing, weight: 1000000}"
    )
    write(repo, "evals/e.yaml", _case(evaluators))
    ran = agentv_cli(repo, "eval", "evals/e.yaml", "--out", "r.jsonl")
    assert ran.returncode == 7, ran.stdout + ran.stderr  # 0.5: the case fails
    assert json.loads((repo / "r.jsonl").read_text())["score"] == 0.5
