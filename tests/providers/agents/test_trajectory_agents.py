"""Trajectories of agent targets, recorded and graded: Codex's event stream (a recorded log
replayed by the fake ``codex``) and a command-line agent's JSON transcript written to
``{TRAJECTORY_FILE}``; every trajectory evaluator on each, weights and required gates in
the records and the summary, and the ways a transcript can be missing or broken."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

import agentv
from agentv.providers.agents.codex import extract_trajectory, parse_output
from support.agents import FAKE_CODEX, install_script
from support.files import write
from support.paths import DATA

PY = shlex.quote(sys.executable)
EVENTS = DATA / "codex" / "fix-median.jsonl"


def by_name(run: agentv.EvalRun) -> dict[str, agentv.EvalResult]:
    return {r.eval_id or "": r for r in run.results}


def entries(result: agentv.EvalResult) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in result.evaluator_results or []}


# --- Codex -------------------------------------------------------------------------------------

CODEX_EVAL = """$schema: agentv-eval-v2
evalcases:
  - id: fix-median
    outcome: Fixes median and runs the tests.
    input_messages:
      - role: user
        content: The median of an even-length list is wrong. Fix stats.py.
    evaluators:
      - name: ran-pytest-twice
        type: tool_used
        tool: shell
        args_schema: {type: object, properties: {command: {pattern: pytest}}, required: [command]}
        min: 2
      - name: no-rm
        type: tool_not_used
        tool: shell
        args_schema: {properties: {command: {pattern: "rm -rf"}}, required: [command]}
      - name: test-fix-test
        type: tool_trajectory
        mode: in_order
        expected: [shell, apply_patch, shell]
      - name: looked-it-up
        type: tool_trajectory
        mode: superset
        expected:
          - {tool: search, args: {query: median of an even-length list}}
          - web_search
      - name: exactly
        type: tool_trajectory
        mode: exact
        expected: [shell, search, apply_patch, shell]
      - name: f1
        type: tool_call_f1
        expected: [shell, apply_patch, shell, search]
      - name: few-steps
        type: step_count
        max: 4
        weight: 0.5
      - name: no-loops
        type: repeated_calls
        required: true
        threshold: 1
"""


@pytest.fixture
def codex_repo(repo: Path, bin_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    install_script(bin_dir, "codex", FAKE_CODEX)
    monkeypatch.setenv("FAKE_CODEX_EVENTS", str(EVENTS))
    monkeypatch.setenv("AGENTV_CODEX_STREAM_LOGS", "false")
    write(
        repo,
        ".agentv/targets.yaml",
        "$schema: agentv-targets-v2.2\ntargets:\n  - name: default\n    provider: codex\n",
    )
    write(repo, "evals/codex.yaml", CODEX_EVAL)
    return repo


@pytest.mark.slow
def test_codex_event_log_becomes_a_trajectory_every_evaluator_grades(codex_repo: Path) -> None:
    run = agentv.run_eval("evals/codex.yaml", cwd=codex_repo)
    (result,) = run.results
    steps = result.trajectory or []
    # the tool items, in the order they started: not the reasoning, plan or messages
    assert [(s["id"], s["name"]) for s in steps] == [
        ("item_1", "shell"),
        ("item_2", "search"),
        ("item_4", "apply_patch"),
        ("item_5", "shell"),
        ("item_6", "web_search"),
    ]
    first, search, patch, second, web = steps
    assert first["arguments"] == {"command": "bash -lc 'pytest -q'"}
    assert first["result"] == "F.\n1 failed, 1 passed in 0.02s\n"
    assert first["error"] == "exited with code 1"
    assert first["duration_ms"] >= 60  # the log's pause between the command's start and end
    assert (search["server"], search["arguments"]) == (
        "docs",
        {"query": "median of an even-length list"},
    )
    assert search["result"]["content"][0]["text"] == "Average the two middle values."
    assert patch["arguments"] == {"changes": [{"path": "stats.py", "kind": "update"}]}
    assert "duration_ms" not in patch  # Codex reported it done in one event: no time to measure
    assert (second["result"], "error" in second) == ("..\n2 passed in 0.02s\n", False)
    assert web["arguments"] == {"query": "python statistics.median even length"}

    graded = entries(result)
    assert {name: e["score"] for name, e in graded.items()} == pytest.approx(
        {
            "ran-pytest-twice": 1.0,
            "no-rm": 1.0,
            "test-fix-test": 1.0,
            "looked-it-up": 1.0,
            "exactly": 4 / 5,
            "f1": 2 * 0.8 * 1.0 / 1.8,
            "few-steps": 0.0,
            "no-loops": 0.0,
        }
    )
    assert graded["few-steps"]["misses"] == ["5 tool calls (at most 4 allowed)"]
    assert graded["exactly"]["misses"] == [
        "step 5: 'web_search' was not expected (exactly 4 calls expected)"
    ]
    assert graded["no-loops"]["misses"] == [
        'shell {"command": "bash -lc \'pytest -q\'"} was made 2 times (steps 1, 4), '
        "at most 1 allowed"
    ]
    # weighted mean: 8 evaluators, one at half weight
    scores = [e["score"] * e.get("weight", 1.0) for e in graded.values()]
    assert result.score == pytest.approx(sum(scores) / 7.5)
    # the required one missed: failed, whatever the mean
    assert (result.status, result.failed_required) == ("failed", ["no-loops"])
    assert graded["no-loops"] | {"hits": [], "misses": []} == {
        "name": "no-loops",
        "type": "repeated_calls",
        "score": 0.0,
        "hits": [],
        "misses": [],
        "required": True,
        "threshold": 1.0,
        "passed": False,
    }
    assert result.misses[-1] == (
        "required evaluator 'no-loops' scored 0.00, below its threshold 1.00: "
        "the case fails whatever its mean"
    )
    assert run.summary.required_failures == 1
    stats = {e.name: e for e in run.summary.evaluators}
    assert (stats["no-loops"].required, stats["no-loops"].failed_cases) == (True, 1)
    assert stats["few-steps"].weight == 0.5


def test_codex_steps_still_running_when_the_stream_ended_say_so() -> None:
    parsed = parse_output(
        "\n".join(
            json.dumps(e)
            for e in (
                {
                    "type": "item.started",
                    "item": {"id": "a", "type": "command_execution", "command": "sleep 99"},
                },
                {"type": "item.completed", "item": {"type": "web_search", "query": "q"}},
            )
        )
    )
    running, search = extract_trajectory(parsed)
    assert (running.name, running.error) == ("shell", "the call had not finished when Codex ended")
    assert (search.name, search.id, search.error) == ("web_search", None, None)


# --- a command-line agent's transcript -----------------------------------------------------------

AGENT = """\
import json, sys, time
question, trajectory = sys.argv[1], sys.argv[2]
if "silent" in question:
    print("I fixed the median in my head.")
    sys.exit(0)
if "broken" in question:
    open(trajectory, "w").write('{"tool_calls": [{"arguments": {}}]}')
    print("done")
    sys.exit(0)
calls = [
    {"id": "c1", "name": "read_file", "arguments": {"path": "stats.py"},
     "result": "def median(xs): ...", "duration_ms": 3.5},
    {"tool": "run_tests", "input": {"path": "tests/", "verbose": True}, "output": "1 failed",
     "error": "exit code 1"},
    {"name": "edit_file", "arguments": "{\\"path\\": \\"stats.py\\", \\"line\\": 3}"},
    {"name": "run_tests", "arguments": {"path": "tests/"}, "result": "2 passed"},
]
json.dump({"tool_calls": calls}, open(trajectory, "w"))
print("Fixed: median averages the two middle values.")
"""

CLI_EVAL = """$schema: agentv-eval-v2
evalcases:
  - id: {id}
    outcome: Fixes median.
    input_messages:
      - role: user
        content: {question}
      # a scripted exchange before the task: context, not what the agent did
      - role: assistant
        content: Let me look.
        tool_calls: [{{id: s1, name: delete_file, arguments: {{path: stats.py}}}}]
      - role: tool
        tool_call_id: s1
        content: refused
      - role: user
        content: Go on.
    evaluators:
      - {{name: answer, type: contains, value: median, weight: 9}}
      - {{name: read-first, type: tool_trajectory, mode: in_order, expected: [read_file, edit_file, run_tests]}}
      - {{name: edited-line-3, type: tool_used, tool: edit_file, args: {{line: 3}}}}
      - {{name: verbose-run, type: tool_used, tool: run_tests, args: {{verbose: true}}, args_match: subset}}
      - {{name: never-deletes, type: tool_not_used, tool: delete_file}}
      - {{name: same-calls, type: tool_trajectory, mode: unordered, expected: [run_tests, edit_file, read_file]}}
      - {{name: nothing-else, type: tool_trajectory, mode: subset, expected: [read_file, edit_file, run_tests, run_tests, search]}}
      - {{name: recall, type: tool_call_f1, metric: recall, expected: [read_file, run_tests, search]}}
      - {{name: bounded, type: step_count, min: 1, max: 4, required: true}}
      - {{name: one-run-each, type: repeated_calls, tool: run_tests}}
"""


@pytest.fixture
def cli_repo(repo: Path) -> Path:
    write(repo, "agent.py", AGENT)
    write(
        repo,
        ".agentv/targets.yaml",
        f"""$schema: agentv-targets-v2.2
targets:
  - name: default
    provider: cli
    command_template: {PY} agent.py {{PROMPT}} {{TRAJECTORY_FILE}}
  - name: untold
    provider: cli
    command_template: {PY} agent.py {{PROMPT}} /dev/null
""",
    )
    cases = [
        ("fix", "Fix the median."),
        ("silent", "Fix it, silent mode."),
        ("broken", "Fix it, broken mode."),
    ]
    text = "".join(CLI_EVAL.format(id=i, question=q).split("evalcases:\n", 1)[1] for i, q in cases)
    write(repo, "evals/cli.yaml", "$schema: agentv-eval-v2\nevalcases:\n" + text)
    return repo


@pytest.mark.slow
def test_a_cli_agents_transcript_is_its_trajectory(cli_repo: Path) -> None:
    run = agentv.run_eval("evals/cli.yaml", cwd=cli_repo)
    fix = by_name(run)["fix"]
    assert fix.trajectory == [
        {
            "id": "c1",
            "name": "read_file",
            "arguments": {"path": "stats.py"},
            "result": "def median(xs): ...",
            "duration_ms": 3.5,
        },
        {  # AgentV's trace names read as well
            "name": "run_tests",
            "arguments": {"path": "tests/", "verbose": True},
            "result": "1 failed",
            "error": "exit code 1",
        },
        {"name": "edit_file", "arguments": {"path": "stats.py", "line": 3}},  # JSON text read
        {"name": "run_tests", "arguments": {"path": "tests/"}, "result": "2 passed"},
    ]
    graded = entries(fix)
    assert {name: e["score"] for name, e in graded.items()} == pytest.approx(
        {
            "answer": 1.0,
            "read-first": 1.0,
            "edited-line-3": 1.0,
            "verbose-run": 1.0,
            "never-deletes": 1.0,  # the scripted delete_file call is not the agent's
            "same-calls": 3 / 4,
            "nothing-else": 1.0,
            "recall": 2 / 3,
            "bounded": 1.0,
            "one-run-each": 1.0,  # two runs of run_tests, with other arguments
        }
    )
    assert graded["same-calls"]["misses"] == [
        'step 4: \'run_tests\' {"path": "tests/"} is not among the expected calls'
    ]
    assert graded["recall"]["misses"][0] == "expected call 3 (search) was not made"
    assert (fix.status, fix.failed_required) == ("ok", None)
    # the answer is weighted 9 of 18
    assert fix.score == pytest.approx((9 + 1 + 1 + 1 + 1 + 0.75 + 1 + 2 / 3 + 1 + 1) / 18)


@pytest.mark.slow
def test_a_cli_agent_without_a_transcript_gets_no_trajectory_grades(cli_repo: Path) -> None:
    run = agentv.run_eval("evals/cli.yaml", cwd=cli_repo)
    results = by_name(run)
    silent, broken = results["silent"], results["broken"]
    # the agent wrote no file: said, and every trajectory evaluator could not grade
    assert silent.trajectory is None
    assert silent.trajectory_error == (
        "the command wrote no {TRAJECTORY_FILE}; write `[]` to it when no tool was called"
    )
    assert silent.status == "error"
    graded = entries(silent)
    assert graded["answer"]["score"] == 1.0 and "error" not in graded["answer"]
    assert graded["never-deletes"]["error"] == silent.trajectory_error
    assert broken.trajectory_error == (
        "the {TRAJECTORY_FILE} is not a transcript: tool call 1 has no `name` (the tool's "
        "name, as text); it has the keys `arguments`"
    )
    # a target without the placeholder reports no trajectory at all
    untold = agentv.run_eval("evals/cli.yaml", cwd=cli_repo, target="untold")
    fix = by_name(untold)["fix"]
    assert (fix.trajectory, fix.trajectory_error, fix.status) == (None, None, "error")
    assert "does not report the tools it called" in entries(fix)["read-first"]["error"]


@pytest.mark.slow
def test_a_cached_answer_keeps_its_trajectory(
    codex_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = agentv.run_eval("evals/codex.yaml", cwd=codex_repo, cache=True)
    monkeypatch.setenv("FAKE_CODEX_MODE", "fail")  # a second call to Codex would fail
    monkeypatch.delenv("FAKE_CODEX_EVENTS")
    again = agentv.run_eval("evals/codex.yaml", cwd=codex_repo, cache=True)
    (before,), (after,) = first.results, again.results
    assert after.cached is True
    assert after.trajectory == before.trajectory and len(after.trajectory or []) == 5
    assert after.evaluator_results == before.evaluator_results


def test_a_cache_entry_from_before_trajectories_says_it_has_none(tmp_path: Path) -> None:
    from agentv.run.cache import OLD_ENTRY, ResponseCache

    cache = ResponseCache(tmp_path)
    key = "ab" + "0" * 62
    path = tmp_path / "ab" / f"{key}.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"text": "an answer", "tool_calls": []}))
    old = cache.get(key)
    assert old is not None and (old.trajectory, old.trajectory_error) == (None, OLD_ENTRY)
