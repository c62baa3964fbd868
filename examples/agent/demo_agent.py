"""A small offline "agent" for `make demo`: no model, no network, just a few honest skills.

agentv's `cli` target runs it with the case's conversation as a JSON file
(`{CHAT_PROMPT_FILE}`: a list of {role, content, ...} messages) and reads its answer from
`{OUTPUT_FILE}`. It shows how any command-line agent plugs into agentv; point the same
suite at a real model with `--target openai` (see examples/.agentv/targets.yaml).

Skills, each working on what the conversation actually contains:
- code review: finds divisions by len(...) with no empty check, and percentages used as fractions;
- debugging: reads a traceback's KeyError and proposes a safe lookup;
- tool results: answers a rain question from a forecast tool's JSON result;
- brainstorming: proposes names built from the task's keywords;
- trip planning, over a live conversation: remembers what the traveller said and what it
  suggested itself in its earlier answers (agentv carries them into each turn).
"""

from __future__ import annotations

import argparse
import ast
import json
import re
from pathlib import Path


def review_python(source: str) -> list[str]:
    """Findings for a Python module: unguarded len() divisions and percent-as-fraction math."""
    findings: list[str] = []
    tree = ast.parse(source)
    for func in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
        params = {a.arg for a in func.args.args}
        for node in ast.walk(func):
            if not isinstance(node, ast.BinOp):
                continue
            right = node.right
            if (
                isinstance(node.op, ast.Div)
                and isinstance(right, ast.Call)
                and getattr(right.func, "id", "") == "len"
            ):
                arg = ast.unparse(right.args[0]) if right.args else "the list"
                findings.append(
                    f"{func.name} divides by len({arg}): an empty list raises "
                    f"ZeroDivisionError. Return 0.0 (or raise a clear ValueError) when "
                    f"`{arg}` is empty."
                )
            names = {getattr(side, "id", None) for side in (node.left, right)}
            if isinstance(node.op, ast.Mult) and "percent" in names & params:
                findings.append(
                    f"{func.name} multiplies by `percent` as if it were a fraction, so 10 "
                    f"takes off 1000 %. Use `price * (1 - percent / 100)`."
                )
    return findings


def debug_key_error(conversation: str) -> str | None:
    """A fix for the KeyError named in a traceback, if there is one."""
    match = re.search(r"KeyError: '([^']+)'", conversation)
    if not match:
        return None
    key = match.group(1)
    return (
        f'Some records have no "{key}" key, so `user["{key}"]` raises KeyError. Read it with '
        f'`address = user.get("{key}")` and return early (log the user id) when it is None, '
        f"so those users are skipped instead of crashing the job."
    )


def answer_from_forecast(messages: list[dict]) -> str | None:
    """Answer a rain question from the last forecast tool result."""
    for msg in reversed(messages):
        if msg.get("role") != "tool":
            continue
        try:
            data = json.loads(msg.get("content", ""))
        except json.JSONDecodeError:
            continue
        chance = data.get("chance_of_rain")
        if chance is None:
            continue
        city, day = data.get("city", "there"), data.get("day", "then")
        pct = round(float(chance) * 100)
        verdict = (
            "Yes, take an umbrella" if chance >= 0.5 else "You can probably leave the umbrella"
        )
        return f"{verdict}: the forecast for {city} {day} gives a {pct} % chance of rain."
    return None


def brainstorm(task: str) -> str:
    """Five short names made from the task's main words."""
    words = [w for w in re.findall(r"[a-z]{4,}", task.lower()) if w not in _STOP][:4] or ["eval"]
    stems = sorted({w[:4] for w in words})
    names = [f"{s}ly" for s in stems] + [f"{s}kit" for s in stems] + ["probe", "gauge", "verdict"]
    picks = list(dict.fromkeys(n.capitalize() for n in names))[:5]
    return "\n".join(
        f"{i}. {n} - short, easy to say, hints at what it does" for i, n in enumerate(picks, 1)
    )


_STOP = {
    "that",
    "with",
    "this",
    "each",
    "line",
    "name",
    "names",
    "five",
    "short",
    "reason",
    "list",
    "numbered",
    "building",
    "brainstorm",
    "them",
    "from",
    "runs",
    "tool",
}


def plan_trip(messages: list[dict]) -> str | None:
    """A travel planner's turn, from everything said so far (its own answers included)."""
    said = " ".join(str(m.get("content", "")) for m in messages if m.get("role") == "user")
    trip = re.search(r"(\w+) days in ([A-Z]\w+)(?: in ([A-Z]\w+))?", said)
    if trip is None:
        return None
    days, city, month = trip.group(1), trip.group(2), trip.group(3) or "the spring"
    name = re.search(r"\bI'm ([A-Z]\w+)", said)
    diet = "vegetarian" if re.search(r"\bvegetarian\b", said, re.I) else None
    asked = next(m["content"] for m in reversed(messages) if m.get("role") == "user")
    if re.search(r"remind me", asked, re.I):
        mine = " ".join(str(m.get("content", "")) for m in messages if m.get("role") == "assistant")
        place = re.search(r"try ([^,]+),", mine)
        facts = [f"You are {name.group(1) if name else 'my traveller'}"]
        facts.append(f"spending {days} days in {city} in {month}")
        facts.append(f"you eat {diet}" if diet else "you did not tell me what you eat")
        if place:
            facts.append(f"and I suggested {place.group(1)} for your first evening")
        return ", ".join(facts) + "."
    if re.search(r"\beat\b", asked, re.I):
        kind = "a vegetarian restaurant" if diet else "a seafood place"
        return f"For your first evening in {city}, try Ao 26, {kind} in Chiado."
    greeting = f"Welcome, {name.group(1)}" if name else "Welcome"
    return f"{greeting}: {days} days in {city} in {month}, noted. Tell me what you like to eat."


def answer(messages: list[dict]) -> str:
    """The agent's reply to the conversation."""
    text = "\n".join(str(m.get("content", "")) for m in messages)
    last_user = next((m["content"] for m in reversed(messages) if m.get("role") == "user"), "")
    trip = plan_trip(messages)
    if trip:
        return trip
    forecast = answer_from_forecast(messages)
    if forecast:
        return forecast
    fix = debug_key_error(text)
    if fix:
        return fix
    sources = re.findall(r"=== (\S+\.py) ===\n(.*?)(?=\n=== |\Z)", text, flags=re.S)
    if sources and re.search(r"review", last_user, re.I):
        findings = [f for _, src in sources for f in review_python(src)]
        if findings:
            return "\n".join(f"{i}. {f}" for i, f in enumerate(findings, 1))
        return "I found nothing to change in this module."
    if re.search(r"brainstorm|names?\b", last_user, re.I):
        return brainstorm(last_user)
    return "I can review Python code, debug tracebacks, read tool results and brainstorm names."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chat", type=Path, required=True, help="the chat prompt JSON file")
    parser.add_argument("--out", type=Path, required=True, help="where to write the answer")
    args = parser.parse_args()
    messages = json.loads(args.chat.read_text(encoding="utf-8"))
    args.out.write_text(answer(messages), encoding="utf-8")


if __name__ == "__main__":
    main()
