"""A results file of every kind of run, made by running agentv for real (offline): for the
tests that hold every view of a results file (``--summary-json``, the report, JUnit, the
Python API) to the same figures.

Three targets (``--target alpha --target beta --target gamma``), two runs of each case
(``--repeat 2``):

- ``alpha`` and ``beta`` are priced mocks that report tokens; ``alpha``'s first runs are
  answered from ``--cache`` (a first run filled it), so some tokens and dollars are reused;
- ``gamma`` is a command line that writes a ``{TRAJECTORY_FILE}``: its runs have tool calls;
- the cases: graded ones that pass or fail (weights, a required judge with a threshold), a
  code evaluator that crashes (``error``), a file that does not exist (``invalid``), a live
  conversation, a simulated user that plays two turns and one that quits at once
  (``user_error``);
- a second eval file added afterwards and run with ``--resume`` under a budget already spent
  (``skipped``); that last invocation writes ``--summary-json``, ``--report`` and ``--junit``
  of the whole file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from support.cli import agentv_cli

TARGETS = """\
$schema: agentv-targets-v2.2
targets:
  - name: alpha
    provider: mock
    response: It will rain in Oslo, take an umbrella.
    report_usage: true
    judge_target: judge
    price: {input_per_mtok: 3000, output_per_mtok: 15000}
  - name: beta
    provider: mock
    response: Sunny all day, no umbrella needed.
    report_usage: true
    judge_target: judge
    price: {input_per_mtok: 1000, output_per_mtok: 2000}
  - name: gamma
    provider: cli
    command_template: python3 agent.py {CHAT_PROMPT_FILE} {TRAJECTORY_FILE}
    judge_target: judge
  - name: judge
    provider: mock
    response: '{"score": 0.5, "hits": ["on topic"], "misses": ["short"], "reasoning": "half"}'
    report_usage: true
    price: {input_per_mtok: 500, output_per_mtok: 1000}
  - name: customer
    provider: mock
    response: My umbrella broke in the storm. What should I buy?
    report_usage: true
    price: {input_per_mtok: 100, output_per_mtok: 100}
  - name: quitter                  # no price: its tokens are counted, not priced
    provider: mock
    response: "[[DONE]]"
    report_usage: true
"""

# gamma: calls a tool for each question, one more when an umbrella is mentioned
AGENT = """\
import json, sys
messages = json.load(open(sys.argv[1]))
last = str(messages[-1]["content"]) if messages else ""
calls = [{"name": "get_forecast", "arguments": {"city": "Oslo"}, "result": {"rain": 0.8}}]
if "umbrella" in last.lower():
    calls.append({"name": "find_shop", "arguments": {"item": "umbrella"}, "result": "Main St"})
json.dump(calls, open(sys.argv[2], "w"))
print("Rain is likely: take an umbrella from the shop on Main St.")
"""

WEATHER = """\
$schema: agentv-eval-v2
evalcases:
  - id: rain
    outcome: Says to take an umbrella.
    input_messages: [{role: user, content: Will it rain in Oslo?}]
    evaluators: [{name: umbrella, type: contains, value: umbrella}]
  - id: judged
    outcome: A helpful forecast.
    input_messages: [{role: user, content: What is the weather in Oslo tomorrow?}]
    evaluators:
      - {name: rain, type: contains, value: rain, weight: 2}
      - {name: quality, type: llm_judge, required: true, threshold: 0.6}
  - id: crash
    outcome: Anything.
    input_messages: [{role: user, content: Say anything.}]
    evaluators: [{name: checker, type: code, script: python3 ../crash.py}]
  - id: live
    outcome: Answers both questions.
    input_messages: [{role: system, content: You are a weather bot.}]
    turns:
      - content: Rain today?
        evaluators: [{type: contains, value: rain}]
      - content: And an umbrella?
        evaluators: [{type: contains, value: umbrella}]
  - id: shopper
    outcome: Helps the customer replace the umbrella.
    input_messages: [{role: system, content: You are a shop assistant.}]
    user: {target: customer, persona: A customer in a storm., goal: A new umbrella., max_turns: 2}
    turn_evaluators: [{type: contains, value: umbrella}]
    evaluators: [{name: replaced, type: contains, value: umbrella}]
  - id: quits
    outcome: Anything.
    input_messages: [{role: system, content: You are a shop assistant.}]
    user: {target: quitter, persona: Nobody., goal: Nothing.}
  - id: broken
    outcome: Reads the attachment.
    input_messages: [{role: user, content: [{type: file, value: missing.txt}]}]
"""

LATE = """\
$schema: agentv-eval-v2
evalcases:
  - id: late-1
    outcome: Says to take an umbrella.
    input_messages: [{role: user, content: Will it rain in Bergen?}]
    evaluators: [{type: contains, value: umbrella}]
  - id: late-2
    outcome: Says to take an umbrella.
    input_messages: [{role: user, content: Will it rain in Tromso?}]
    evaluators: [{type: contains, value: umbrella}]
"""

MATRIX = ("--target", "alpha", "--target", "beta", "--target", "gamma", "--repeat", "2")


@dataclass(frozen=True)
class MixedRun:
    """The files the last invocation wrote, and its exit code (4: the budget)."""

    results: Path
    summary_json: Path
    report: Path
    junit: Path
    exit_code: int


def mixed_run(project: Path) -> MixedRun:
    """Make the mixed results file in ``project`` (an empty folder) by running agentv three
    times; an ``AssertionError`` with agentv's output when an invocation goes otherwise."""
    (project / ".git").mkdir(parents=True)
    (project / ".agentv").mkdir()
    (project / "evals").mkdir()
    (project / ".agentv" / "targets.yaml").write_text(TARGETS, encoding="utf-8")
    (project / "agent.py").write_text(AGENT, encoding="utf-8")
    (project / "crash.py").write_text("import sys\nsys.exit('the checker crashed')\n")
    (project / "evals" / "weather.yaml").write_text(WEATHER, encoding="utf-8")

    def run(*args: str, code: int) -> None:
        proc = agentv_cli(project, "eval", *args, "-q")
        assert proc.returncode == code, proc.stdout + proc.stderr

    # alpha's answers (and their judges') into the cache: the next run reuses the first
    run("evals/weather.yaml", "--target", "alpha", "--cache", "--out", "warm.jsonl", code=3)
    run("evals/", *MATRIX, "--cache", "--out", "r.jsonl", code=3)
    (project / "evals" / "zz_late.yaml").write_text(LATE, encoding="utf-8")
    proc = agentv_cli(
        project,
        "eval",
        "evals/",
        *MATRIX,
        "--cache",
        "--resume",
        "r.jsonl",
        "--budget-usd",
        "0.001",  # reached by the first answer: the runs after it are skipped
        "--summary-json",
        "summary.json",
        "--report",
        "--junit",
        "junit.xml",
        "-q",
    )
    return MixedRun(
        results=project / "r.jsonl",
        summary_json=project / "summary.json",
        report=project / "r.html",
        junit=project / "junit.xml",
        exit_code=proc.returncode,
    )
