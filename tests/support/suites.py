"""Eval suites, with their targets and the fake answers they get, that the tests of more
than one package run: the debugging suite (a whole run, locally and on Ray), the support
desk of simulated users, and projects with their own ``.env``."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from support.fakes import FakeLLMServer, RecordedRequest
from support.files import write
from support.providers import provider_fields
from support.targets import openai_target, write_targets

# --- the debugging suite: a multi-turn case judged and checked by code, a case on a target
# that cannot be reached, and a code check that crashes -----------------------------------

DEBUG_SECRET = "sk-e2e-secret-key-0123456789abcdef"
DEBUG_VERDICT = {
    "score": 0.75,
    "hits": ["names the cause"],
    "misses": ["no test suggested"],
    "reasoning": "Mostly right.",
}


def debug_reply(rec: RecordedRequest) -> str:
    """The fake API's answer: the judge's verdict to a judge, else an answer that says 42."""
    messages = (rec.body or {}).get("messages", [])
    system = messages[0]["content"] if messages and messages[0]["role"] == "system" else ""
    if system.startswith("You are an expert evaluator"):
        return "Here is my grade:\n```json\n" + json.dumps(DEBUG_VERDICT) + "\n```"
    return "The KeyError comes from the missing 'user' key. The answer is 42."


#: the target's fields besides its address: the key from the environment
DEBUG_KEYED = {"api_key": "${{ E2E_API_KEY }}", "model": "fake-model", "max_retries": 0}
DEBUG_ENV = {"E2E_API_KEY": DEBUG_SECRET}


def debug_targets(url: str) -> tuple[dict[str, Any], ...]:
    """``default`` at ``url``; ``broken`` at a port where nothing listens."""
    return (
        openai_target(url, **DEBUG_KEYED),
        openai_target("http://127.0.0.1:9", "broken", **DEBUG_KEYED),
    )


DEBUG_CHECK = """\
import json, sys
payload = json.load(sys.stdin)
ok = "42" in payload["candidate_answer"]
print(json.dumps({"score": 1.0 if ok else 0.0,
                  "hits": ["says 42"] if ok else [],
                  "misses": [] if ok else ["no 42"],
                  "reasoning": "question had %d markers" % payload["question"].count("@[")}))
"""


def write_debug_suite(repo: Path) -> Path:
    """``evals/debug.yaml`` (cases ``multi-turn``, ``provider-down``, ``checker-crash``) and
    the files it attaches and runs; its path."""
    write(repo, "evals/guides/debug.instructions.md", "Answer in one paragraph.\n")
    write(repo, "evals/src/app.py", "def handler(event):\n    return event['user']\n")
    write(repo, "evals/check.py", DEBUG_CHECK)
    write(
        repo,
        "evals/crash.py",
        "import sys\nsys.stderr.write('boom: checker crashed')\nsys.exit(3)\n",
    )
    return write(
        repo,
        "evals/debug.yaml",
        """$schema: agentv-eval-v2
evalcases:
  - id: multi-turn
    outcome: Explains the KeyError and gives the answer 42.
    input_messages:
      - role: system
        content: You are a debugging assistant.
      - role: user
        content:
          - type: text
            value: My handler crashes.
          - type: file
            value: guides/debug.instructions.md
          - type: file
            value: src/app.py
      - role: assistant
        content: What error do you see?
      - role: user
        content: A KeyError. Why?
    execution:
      evaluators:
        - name: judge
          type: llm_judge
        - name: check
          type: code
          script: python3 check.py
  - id: provider-down
    outcome: Anything.
    input_messages:
      - role: user
        content: Hello?
    execution:
      target: broken
      evaluators:
        - type: contains
          value: "42"
  - id: checker-crash
    outcome: Anything.
    input_messages:
      - role: user
        content: What is 6 times 7?
    execution:
      evaluators:
        - name: crash
          type: code
          script: python3 crash.py
        - type: contains
          value: "42"
""",
    )


# --- a support desk: the agent under test and a simulated customer (``user_target``), each
# a loopback fake OpenAI server that answers from the conversation it is sent ----------------

SUPPORT_VERDICT = '{"score": 1, "hits": ["fine"], "misses": [], "reasoning": "fine"}'


def support_parties(
    agent: FakeLLMServer,
    customer: FakeLLMServer,
    customer_fields: dict[str, Any] | None = None,
    **more: Any,
) -> list[dict[str, Any]]:
    """``default``: the agent under test; ``customer``: the simulated user's target (with
    ``customer_fields``); ``judge``: a mock judge; ``more``: other targets (name -> fields)."""
    sim = provider_fields("openai", customer, **(customer_fields or {}))
    entries = [
        {"name": "default", "provider": "openai", "judge_target": "judge"}
        | provider_fields("openai", agent),
        {"name": "customer", "provider": "openai"} | sim,
        {"name": "judge", "provider": "mock", "response": SUPPORT_VERDICT},
    ]
    for name, fields in more.items():
        entries.append({"name": name, **fields})
    return entries


def messages_of(rec: RecordedRequest) -> list[dict[str, Any]]:
    """The chat messages of an OpenAI request."""
    return list((rec.body or {}).get("messages", []))


def agent_reply(rec: RecordedRequest) -> str:
    """A support agent: greets, asks for the order number, then refunds."""
    asked = messages_of(rec)[-1]["content"]
    if re.search(r"order \d+", asked):
        return "Refund issued for order 1234."
    if "refund" in asked.lower():
        return "Sorry about that. What is your order number?"
    return "Hello! How can I help?"


def customer_reply(rec: RecordedRequest) -> str:
    """A customer with a broken kettle, seeing the conversation from the user's side: its
    own messages are its assistant turns, the agent's answers its user turns."""
    messages = messages_of(rec)
    heard = messages[-1]["content"]
    if "Refund issued" in heard:
        return "[[DONE]]"
    if "order number" in heard:
        return "It is order 1234."
    if "How can I help" in heard:
        return "My kettle arrived broken and I want a refund."
    return "Hello?"


SUPPORT_CASE = """\
  - id: {id}
    outcome: Gets the order number and refunds it.
    input_messages:
      - role: system
        content: You are a support agent for a kitchen shop.
    user:
      persona: {persona}
      goal: Get a refund for the broken kettle of order 1234.
      facts: {{order: 1234, item: kettle}}
      first_message: {first}
      max_turns: {max_turns}
      seed: 7
      temperature: 0.3{extra}
    turn_evaluators: [{{type: regex, value: "(?i)help|order|refund"}}]
    evaluators: [{{type: contains, value: Refund issued}}]
"""


def write_support_suite(
    repo: Path, *cases: dict[str, Any], header: str = "user_target: customer\n"
) -> None:
    """``evals/support.yaml``: one case of SUPPORT_CASE for each of ``cases`` (its fields
    over the defaults), after ``header``."""
    body = ""
    for c in cases:
        fields = {"persona": "A polite customer.", "first": "Hi there.", "max_turns": 6}
        fields.update(extra="")
        fields.update(c)
        body += SUPPORT_CASE.format(**fields)
    write(repo, "evals/support.yaml", f"$schema: agentv-eval-v2\n{header}evalcases:\n{body}")


# --- a project with its own .env ---------------------------------------------------------


def env_project(tmp_path: Path, name: str) -> Path:
    """Six cases whose agent answers with the run's ``PROJ_SECRET`` (from its ``.env``)."""
    root = tmp_path / name
    (root / ".git").mkdir(parents=True)
    write(root, ".env", f"PROJ_SECRET=value-of-{name}\n")
    agent = "sh -c 'sleep 0.05; printf %s \"$PROJ_SECRET\"'"
    write_targets(
        root, {"name": "default", "provider": "cli", "command_template": agent, "workers": 2}
    )
    cases = "".join(
        f"  - {{id: c{i}, outcome: x, input_messages: [{{role: user, content: q{i}}}],"
        " evaluators: [{type: contains, value: value}]}\n"
        for i in range(6)
    )
    write(root, "evals/e.yaml", "$schema: agentv-eval-v2\nevalcases:\n" + cases)
    return root
