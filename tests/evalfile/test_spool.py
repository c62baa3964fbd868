"""Large eval files: read once, their cases kept in a spool on disk between planning and
running (``agentv.evalfile.spool``), and given back exactly as built."""

from __future__ import annotations

from pathlib import Path

import pytest

import agentv.evalfile.loader
from agentv.evalfile.files import FileStore
from agentv.evalfile.loader import LoadContext, iter_cases, load_eval_file
from agentv.evalfile.spool import CaseSpool
from agentv.run.plan import KEEP_LIMIT
from support.files import write

CASE = """  - id: c{i}
    outcome: answers {i}
    conversation_id: talk-{c}
    input_messages:
      - role: system
        content: be brief
      - role: user
        content:
          - {{type: text, value: "q{i}"}}
          - {{type: file, value: ctx.md}}
          - {{type: file, value: style.instructions.md}}
      - role: assistant
        content: calling a tool
        tool_calls:
          - {{id: call-{i}, name: lookup, arguments: {{n: {i}, tags: [a, b], deep: {{x: 1.5}}}}}}
      - role: tool
        tool_call_id: call-{i}
        content: "found {i}"
    expected_messages:
      - role: assistant
        content: "answer {i}"
"""
OWN_EVALUATORS = """    evaluators:
      - {{type: contains, value: "{i}"}}
      - {{name: judge, type: llm_judge, prompt: judge.md}}
      - {{name: script, type: code, script: python3 check.py, cwd: checks}}
"""
TARGETED = """    execution: {{target: other}}
    repeat: 2
"""


def _suite(root: Path, n: int, *, header_after: bool = False) -> Path:
    """``n`` cases using most of what a case can hold: attachments, a guideline, tool
    calls, expected messages; every third case has evaluators of its own (a file-relative
    judge prompt and code folder), every fifth a target and repeats of its own, the others
    the file's default evaluators (``execution``, before or after the cases)."""
    write(root, "ctx.md", "shared context\n")
    write(root, "style.instructions.md", "be kind\n")
    write(root, "judge.md", "Grade it. {{candidate_answer}}\n")
    write(root, "checks/check.py", "print('{}')\n")
    cases = ""
    for i in range(n):
        cases += CASE.format(i=i, c=i // 4)
        if i % 3 == 0:
            cases += OWN_EVALUATORS.format(i=i)
        if i % 5 == 0:
            cases += TARGETED.format()
    header = "dataset: big\nexecution:\n  evaluators:\n    - {type: regex, value: 'a.+'}\n"
    text = "$schema: agentv-eval-v2\n"
    text += f"evalcases:\n{cases}{header}" if header_after else f"{header}evalcases:\n{cases}"
    return write(root, "suite.yaml", text)


@pytest.mark.parametrize("header_after", [False, True])
def test_spooled_cases_are_the_cases_built(repo: Path, header_after: bool) -> None:
    path = _suite(repo, 40, header_after=header_after)
    kept = load_eval_file(path)
    assert not kept.errors and not kept.streamed and len(kept.cases) == 40
    spooled = load_eval_file(path, keep_limit=7)
    assert spooled.streamed and spooled.cases == [] and spooled.case_count == 40
    assert spooled.spool is not None and spooled.spool.count == 40
    assert (spooled.dataset, spooled.case_targets) == ("big", kept.case_targets)
    again = list(iter_cases(spooled))
    assert again == kept.cases
    assert list(iter_cases(spooled)) == again  # read as often as asked
    # what the file says is in the cases, whatever side of them the header is on
    assert {c.dataset for c in again} == {"big"}
    assert [c.evaluators[0].type for c in again[:4]] == ["contains", "regex", "regex", "contains"]
    assert [(c.target, c.repeat) for c in again[:2]] == [("other", 2), (None, None)]
    code = again[0].evaluators[2]
    assert (code.cwd, again[0].evaluators[1].prompt_path) == (repo / "checks", repo / "judge.md")


def test_what_cases_share_comes_back_shared(repo: Path) -> None:
    path = _suite(repo, 12)
    store = FileStore(cwd=repo)
    loaded = load_eval_file(path, keep_limit=2, context=LoadContext(store=store))
    cases = list(iter_cases(loaded))
    texts = {id(c.input_messages[1].segments[1].text) for c in cases}  # type: ignore[union-attr]
    assert texts == {id(store.text(repo / "ctx.md"))}  # the run's one copy of the file
    assert len({id(c.guideline_files[0].text) for c in cases}) == 1
    # cases with the file's default evaluator share it, as when built
    defaults = {id(c.evaluators[0]) for c in cases if c.evaluators[0].type == "regex"}
    assert len(defaults) == 1


def test_a_large_file_is_read_once(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _suite(repo, 30)
    reads = []
    real = agentv.evalfile.loader.stream_yaml

    def counted(*args: object, **kwargs: object) -> object:
        reads.append(args[0])
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(agentv.evalfile.loader, "stream_yaml", counted)
    loaded = load_eval_file(path, keep_limit=5)
    for _ in range(3):  # as many readings of its cases as lanes
        assert len(list(iter_cases(loaded))) == 30
    assert reads == [path]


def test_readers_of_one_spool_keep_their_own_places(repo: Path) -> None:
    loaded = load_eval_file(_suite(repo, 25), keep_limit=1)
    first, second = iter_cases(loaded), iter_cases(loaded)
    a = [next(first) for _ in range(10)]
    b = list(second)  # reads the whole spool while the first is half-way
    a += list(first)
    assert [c.id for c in a] == [c.id for c in b] == [f"c{i}" for i in range(25)]


def test_records_longer_than_one_read_and_the_end_of_the_spool(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("agentv.evalfile.spool._READ_SIZE", 64)  # every record spans reads
    loaded = load_eval_file(_suite(repo, 9), keep_limit=1)
    assert [c.id for c in iter_cases(loaded)] == [f"c{i}" for i in range(9)]
    spool = CaseSpool()
    spool.count = 1  # says one more record than it holds
    with pytest.raises(EOFError, match="spool of cases ended early"):
        list(spool.cases())
    spool.close()


def test_the_plan_keeps_twenty_thousand_cases_in_memory() -> None:
    assert KEEP_LIMIT == 20_000  # above it, a file's cases go to a spool


LIVE = """$schema: agentv-eval-v2
evalcases:
  - id: talk
    outcome: remembers the traveller
    input_messages:
      - {role: system, content: plan trips}
    turns:
      - content: I'm Ada.
        evaluators: [{type: icontains, value: Ada}]
      - content: Who am I?
    on_turn_failure: stop
    aggregation: min
  - id: customer
    outcome: the kettle is refunded
    input_messages:
      - {role: system, content: help customers}
    user:
      target: sim
      persona: A polite customer.
      goal: A refund.
      facts: {order: 1234}
      max_turns: 4
      seed: 7
    turn_evaluators: [{type: regex, value: "(?i)refund"}]
  - id: forecast
    outcome: uses the forecast
    input_messages:
      - {role: user, content: Weather in Oslo?}
  - id: own-tools
    outcome: none needed
    input_messages:
      - {role: user, content: hi}
    tools: []
tools:
  - name: get_forecast
    description: The forecast of a city.
    parameters: {type: object, properties: {city: {type: string}}}
    results:
      - arguments: {city: Oslo}
        result: sunny
"""


def test_live_conversations_tools_and_simulated_users_survive_the_spool(repo: Path) -> None:
    # every field of a case comes back, those outside the compact record too, and the
    # file's `tools` written after the cases reach the spooled cases that use them
    path = write(repo, "live.yaml", LIVE)
    kept = load_eval_file(path)
    assert not kept.errors, kept.errors
    spooled = load_eval_file(path, keep_limit=1)
    assert spooled.streamed
    again = list(iter_cases(spooled))
    assert again == kept.cases
    talk, customer, forecast, own = again
    assert (len(talk.turns), talk.stop_on_failure, talk.aggregation) == (2, True, "min")
    assert customer.user is not None and customer.user.max_turns == 4
    assert [e.type for e in customer.turn_evaluators] == ["regex"]
    assert [t.name for t in forecast.tools] == ["get_forecast"] and own.tools == ()
