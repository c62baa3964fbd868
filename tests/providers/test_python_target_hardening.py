"""Your own code as a target under hostile conditions (docs/python-api.md, "Your code as a
target"; docs/reliability.md): a function that never returns, one that blocks the event
loop, one that calls ``sys.exit()`` or raises ``CancelledError``: each is that case's
``error``, the other cases run, and ``run_eval`` returns. Options that cannot be used are
refused in words. Each run happens in a real Python process (a hang guard: a run that
waited for a stuck thread would never end)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import agentv
from support.cli import agentv_env
from support.files import write


def _suite(repo: Path, ids: list[str]) -> None:
    cases = "".join(
        f"  - id: {i}\n    outcome: x\n    input_messages: [{{role: user, content: {i}}}]\n"
        "    evaluators: [{type: contains, value: fine}]\n"
        for i in ids
    )
    write(repo, "evals/s.yaml", "$schema: agentv-eval-v2\nevalcases:\n" + cases)


def _run(repo: Path, body: str, timeout: float = 90) -> dict:
    """Run ``body`` (defines ``target`` and the run's options) in a fresh Python process:
    ``run_eval`` on evals/s.yaml, and what it recorded, as JSON."""
    script = textwrap.dedent(
        """\
        import asyncio, json, sys, threading, time
        import agentv
        called = []
        {body}
        run = agentv.run_eval("evals/s.yaml", target=target, out="r.jsonl", **options)
        print(json.dumps({{
            "results": {{r.eval_id: [r.status, r.error] for r in run.results}},
            "called": sorted(set(called)),
        }}))
        sys.stdout.flush()
        """
    ).format(body=textwrap.dedent(body))
    proc = subprocess.run(
        [sys.executable, "-c", script],
        cwd=repo,
        env=agentv_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.splitlines()[-1])


@pytest.mark.slow
def test_a_stuck_function_times_out_and_run_eval_returns(repo: Path) -> None:
    """Three cases deadlock (each tried three times: nine stuck threads, more than a thread
    pool holds); the five others are called and pass."""
    stuck, healthy = ["s0", "s1", "s2"], ["h0", "h1", "h2", "h3", "h4"]
    _suite(repo, stuck + healthy)
    done = _run(
        repo,
        """
        never = threading.Event()
        def target_fn(messages):
            said = messages[-1]["content"]
            called.append(said)
            if said.startswith("s"):
                never.wait()  # a deadlock: it never returns
            return "fine"
        target = agentv.PythonTarget(target_fn)
        options = {"agent_timeout": 1, "workers": 8}
        """,
    )
    results = done["results"]
    assert {i: results[i][0] for i in healthy} == dict.fromkeys(healthy, "ok")
    assert done["called"] == sorted(stuck + healthy)
    for i in stuck:
        status, error = results[i]
        assert status == "error"
        assert "did not answer within 1s (after 3 attempts)" in error


@pytest.mark.slow
def test_an_async_function_that_blocks_the_loop_past_its_limit_is_a_timeout(repo: Path) -> None:
    _suite(repo, ["blocks", "quick"])
    done = _run(
        repo,
        """
        async def target_fn(messages):
            if messages[-1]["content"] == "blocks":
                time.sleep(4)  # blocks the event loop: nothing can stop it at its limit
            return "fine"
        target = agentv.PythonTarget(target_fn)
        options = {"agent_timeout": 1}
        """,
    )
    status, error = done["results"]["blocks"]
    assert status == "error"
    assert "target 'target_fn' took 4." in error
    assert "more than the case's limit of 1 s: it blocked the event loop" in error
    assert done["results"]["quick"][0] == "ok"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("fn", "said"),
    [
        (
            "def target_fn(messages):\n    sys.exit(3)",
            "target 'target_fn' (Python) raised SystemExit: 3",
        ),
        (
            "async def target_fn(messages):\n    sys.exit('bye')",
            "target 'target_fn' (Python) raised SystemExit: bye",
        ),
        (
            "async def target_fn(messages):\n    raise asyncio.CancelledError()",
            "target 'target_fn' (Python) raised CancelledError",
        ),
    ],
    ids=["sync-exit", "async-exit", "async-cancelled"],
)
def test_a_function_that_exits_or_cancels_is_that_case_error(
    repo: Path, fn: str, said: str
) -> None:
    ids = ["bad", *(f"ok{i}" for i in range(6))]
    _suite(repo, ids)
    body = fn.replace(
        "\n    ", "\n    if messages[-1]['content'] != 'bad':\n        return 'fine'\n    ", 1
    )
    done = _run(repo, body + "\ntarget = agentv.PythonTarget(target_fn)\noptions = {}\n")
    results = done["results"]
    assert sorted(results) == sorted(ids)  # every record written
    assert results["bad"][0] == "error" and said in results["bad"][1]
    assert all(results[i][0] == "ok" for i in ids[1:])


def _answer(messages: list[dict]) -> str:
    return "fine"


def test_estimate_takes_a_python_target(repo: Path) -> None:
    _suite(repo, ["a", "b"])
    found = agentv.estimate("evals/s.yaml", target=agentv.PythonTarget(_answer), cwd=repo)
    (line,) = found.lines
    assert (line.target, line.role, line.requests, line.usd) == ("_answer", "target", 2, None)
    assert found.unpriced == ["_answer"]


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ({"agent_timeout": math.nan}, "agent_timeout must be 0 (no limit) or a number of seconds"),
        ({"agent_timeout": -1}, "agent_timeout must be 0 (no limit) or a number of seconds"),
        ({"agent_timeout": math.inf}, "agent_timeout must be 0 (no limit) or a number of seconds"),
        ({"budget_usd": "5"}, "budget_usd must be a number of US dollars above 0 (got '5')"),
        ({"budget_usd": True}, "budget_usd must be a number of US dollars above 0 (got True)"),
        ({"budget_usd": math.nan}, "budget_usd must be a number of US dollars above 0 (got nan)"),
    ],
)
def test_options_that_cannot_be_used_are_refused(repo: Path, options: dict, said: str) -> None:
    _suite(repo, ["a"])
    with pytest.raises(agentv.ConfigError) as caught:
        agentv.run_eval("evals/s.yaml", target=agentv.PythonTarget(_answer), cwd=repo, **options)
    assert said in str(caught.value)
    assert not (repo / ".agentv" / "results").exists()  # nothing was run


def test_two_python_targets_of_one_name_are_refused(repo: Path) -> None:
    _suite(repo, ["a"])

    def other(messages: list[dict]) -> str:
        return "other"

    twins = [agentv.PythonTarget(_answer, name="app"), agentv.PythonTarget(other, name="app")]
    with pytest.raises(agentv.ConfigError) as caught:
        agentv.run_eval("evals/s.yaml", target=twins, cwd=repo)
    assert "two Python targets are named 'app'" in str(caught.value)
    with pytest.raises(agentv.ConfigError):
        agentv.estimate("evals/s.yaml", target=twins, cwd=repo)
