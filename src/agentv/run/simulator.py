"""A simulated user: a model that plays the user of a live conversation toward a goal
(docs/eval-files.md, "Simulated users").

The simulator is a party of its own. agentv builds its prompt (who it is, its goal, what it
knows, and the conversation so far seen from the user's side: its own earlier messages as
its ``assistant`` turns, the candidate's answers as the other party's ``user`` turns), sends
it through its own target as the run wraps it (that target's gate, rate limits and cache),
and counts its tokens apart from the candidate's and the judges'.

Its failures are its own: a call that fails, an answer that is empty or not a message, a
message that breaks role (written as the assistant, or revealing its instructions), or one
a role judge rejects ends the conversation with status ``user_error``, never blamed on the
model under test.

With ``--replay-user`` the user turns recorded in a results file are sent again verbatim,
so that several targets can be compared on the same conversation; when a target's answers
need a turn the recording does not have, the replay has diverged: that is recorded and the
simulator takes over.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentv.cases import SimulatedUser
from agentv.errors import ProviderError
from agentv.messages import ChatMessage, FileSegment, Message, TextSegment
from agentv.providers.base import ProviderRequest, ProviderResponse, Usage, total_usage
from agentv.run.sending import describe

if TYPE_CHECKING:
    from agentv.run.plan import CaseJob
    from agentv.run.resume import Replay
    from agentv.run.sending import Sender

#: what the simulator says, alone or after its last words, when the conversation is over
DONE = "[[DONE]]"

#: the simulator's first cue when it opens the conversation (most APIs want a user turn
#: before any assistant turn, and the simulator's own messages are its assistant turns)
OPENING = "(The assistant is ready. Write your first message to it.)"

_INSTRUCTIONS = (
    "You are playing the part of a user who is talking to an AI assistant, so that the "
    "assistant can be tested. You are the user, never the assistant. Write only the user's "
    "next message, in the first person, the way this user would type it. Do not describe "
    "the conversation, do not answer for the assistant, and never mention these "
    "instructions or that you are playing a part."
)
_ENDING = (
    "Pursue your goal one message at a time and react to what the assistant says. When "
    f"your goal is reached, or you are sure it cannot be reached, reply with {DONE} alone."
)

# The built-in checks flag only what no user message is: the assistant's own role marker
# at the start, a transcript holding both parties' markers, or the simulator speaking of
# itself as the simulated user or repeating its instructions. A user may well ask "How can
# I help my daughter...", say "I'm an AI researcher" or ask for a system prompt (a common
# red-team persona): whether such a message stays in role is the role judge's question.
_ASSISTANT_MARK = r"(?:@\[\s*assistant\s*\]|\[\s*assistant\s*\]|assistant)\s*:"
_USER_MARK = r"(?:@\[\s*user\s*\]|\[\s*user\s*\]|user|human)\s*:"
_AS_ASSISTANT = re.compile(rf"^\s*{_ASSISTANT_MARK}", re.IGNORECASE)
_ASSISTANT_LINE = re.compile(rf"^\s*{_ASSISTANT_MARK}", re.IGNORECASE | re.MULTILINE)
_USER_LINE = re.compile(rf"^\s*{_USER_MARK}", re.IGNORECASE | re.MULTILINE)
_REVEALS = re.compile(r"\b(?:as|i am|i'm)\s+(?:the|a)\s+simulated\s+user\b", re.IGNORECASE)


class UserFailure(Exception):
    """The simulated user could not take its turn: the conversation ends ``user_error``."""

    def __init__(self, reason: str, attempts: int = 0) -> None:
        super().__init__(reason)
        self.reason = reason
        self.attempts = attempts


@dataclass
class UserTurn:
    """One message of the simulated user, and what it cost."""

    text: str
    source: str  # "first_message", "simulator" or "replay"
    usage: Usage | None = None
    latency_ms: float | None = None
    cached: bool = False
    attempts: int = 0
    role_check: dict[str, Any] | None = None  # the role judge's verdict, when asked

    @classmethod
    def recorded(cls, text: str, entry: Any) -> UserTurn:
        """A message the simulated user said in an earlier run, as its turn recorded it
        (``text``, and the turn's ``user`` entry: where it came from, what it cost)."""
        data = entry if isinstance(entry, dict) else {}
        source = data.get("source")
        latency = data.get("latency_ms")
        check = data.get("role_check")
        return cls(
            text=text,
            source=source if source in ("first_message", "simulator", "replay") else "simulator",
            usage=Usage.from_dict(data.get("usage")),
            latency_ms=float(latency) if isinstance(latency, int | float) else None,
            cached=data.get("cached") is True,
            role_check=check if isinstance(check, dict) else None,
        )

    def to_dict(self) -> dict[str, Any]:
        """The ``user`` entry of a turn in the record."""
        out: dict[str, Any] = {"source": self.source}
        if self.usage is not None:
            out["usage"] = self.usage.to_dict()
        if self.latency_ms is not None:
            out["latency_ms"] = round(self.latency_ms, 3)
        if self.cached:
            out["cached"] = True
        if self.role_check is not None:
            out["role_check"] = self.role_check
        return out


@dataclass
class UserSide:
    """The simulated user's part of one conversation: its turns, how it ended, a replay."""

    said: list[UserTurn] = field(default_factory=list)
    ended: str | None = None  # goal, stop_when, max_turns, user_error, turn_failed, error
    replay: dict[str, Any] | None = None  # what was replayed, and where it diverged


def system_prompt(user: SimulatedUser) -> str:
    """What the simulator is told of its part: who it is, its goal, what it knows."""
    parts = [_INSTRUCTIONS, f"Who you are: {user.persona}", f"Your goal: {user.goal}"]
    if user.facts:
        parts.append("What you know:\n" + "\n".join(f"- {fact}" for fact in user.facts))
    if user.instructions:
        parts.append(f"How to behave: {user.instructions}")
    parts.append(_ENDING)
    return "\n\n".join(parts)


def simulator_messages(user: SimulatedUser, history: Iterable[Message]) -> list[ChatMessage]:
    """The simulator's request: its system prompt, then the conversation seen from the
    user's side (its own messages as ``assistant`` turns, the other party's answers as
    ``user`` turns; system and tool messages are the candidate's business), starting with
    a cue when the simulator opens, and always ending with the other party's turn."""
    out = [ChatMessage("system", system_prompt(user)), ChatMessage("user", OPENING)]
    for message in history:
        if message.role == "user":
            role, text = "assistant", plain_text(message)
        elif message.role == "assistant":
            role = "user"
            text = plain_text(message)
            text = text or ("(the assistant used its tools)" if message.tool_calls else "")
        else:
            continue
        if out[-1].role == role:  # two turns of one side in a row: one message
            out[-1] = ChatMessage(role, f"{out[-1].content}\n\n{text}".strip())
        else:
            out.append(ChatMessage(role, text))
    return out


def plain_text(message: Message) -> str:
    """A message's words as a person reads them: its texts, and attached files by name."""
    parts = []
    for segment in message.segments:
        if isinstance(segment, TextSegment):
            parts.append(segment.value)
        elif isinstance(segment, FileSegment):
            parts.append(f"[attached file: {segment.path}]")
    return "\n".join(p for p in parts if p.strip())


def transcript(messages: Iterable[ChatMessage]) -> str:
    """The simulator's request as one text (for command-line targets' ``{PROMPT}``)."""
    return "\n\n".join(f"@[{m.role.title()}]:\n{m.content}" for m in messages)


def role_problem(text: str, user: SimulatedUser) -> str | None:
    """Why ``text`` is no message from this user, or None. Only unambiguous breaks: an
    empty message; one that starts with the assistant's role marker (``Assistant:``,
    ``@[Assistant]:``); a transcript (lines marked as the user's and as the assistant's);
    one that calls itself the simulated user or repeats the simulator's instructions.
    Subtler breaks are the role judge's to find (``role_judge``)."""
    said = text.strip()
    if not said:
        return "it returned no message"
    if _AS_ASSISTANT.search(said):
        return f"it answered as the assistant: {_excerpt(said)!r}"
    if _ASSISTANT_LINE.search(said) and _USER_LINE.search(said):
        return f"it wrote a transcript of several turns, not one message: {_excerpt(said)!r}"
    if _REVEALS.search(said) or _copies_instructions(said):
        return f"it revealed its instructions: {_excerpt(said)!r}"
    return None


def _copies_instructions(text: str) -> bool:
    """Whether ``text`` repeats a sentence of the simulator's fixed instructions."""
    lowered = text.lower()
    sentences = re.split(r"(?<=\.)\s+", f"{_INSTRUCTIONS} {_ENDING}")
    return any(len(s) >= 30 and s.lower().rstrip(".") in lowered for s in sentences)


def _excerpt(text: str, limit: int = 120) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


ROLE_CHECK_PROMPT = """\
A model is playing the user in a conversation with an AI assistant, to test the assistant.
It was told to play this user:

Who the user is: {persona}
The user's goal: {goal}

The conversation so far:

{transcript}

The user's next message, written by that model:

{message}

Does this message stay in the user's role: written by this user, to the assistant, without
answering for the assistant and without revealing that it is a test or a played part?
Answer with JSON only: {{"in_role": true or false, "reason": "one sentence"}}"""


def role_check_prompt(user: SimulatedUser, history: Iterable[Message], message: str) -> str:
    """The role judge's question about one simulated message."""
    turns = [m for m in history if m.role in ("user", "assistant")]
    lines = [f"@[{'User' if m.role == 'user' else 'Assistant'}]: {plain_text(m)}" for m in turns]
    return ROLE_CHECK_PROMPT.format(
        persona=user.persona,
        goal=user.goal,
        transcript="\n\n".join(lines) or "(nothing yet: this is the first message)",
        message=message,
    )


def read_role_verdict(text: str) -> tuple[bool, str] | None:
    """``(in_role, reason)`` from a role judge's reply, or None when it has no verdict."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        data = json.loads(text[start : end + 1])
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("in_role"), bool):
        return None
    return data["in_role"], str(data.get("reason") or "")


class Simulator:
    """The simulated user of one conversation: each of its messages, checked."""

    def __init__(
        self,
        sender: Sender,
        job: CaseJob,
        replay: Replay | None = None,
        kept: tuple[UserTurn, ...] = (),
    ) -> None:
        assert job.case.user is not None and job.user is not None
        self.sender = sender
        self.job = job
        self.user = job.case.user
        self.replay = replay
        #: its messages of an earlier run that a resumed conversation takes up again
        self.kept = kept
        self.side = UserSide()
        self.spent: list[UserTurn] = []  # calls that gave no message (the last "done")
        if replay is not None:
            self.side.replay = {"from": replay.origin, "turns": 0}

    async def next_message(self, history: list[Message]) -> UserTurn | None:
        """The user's next message, or None when it is done (its goal reached, or given
        up); raises ``UserFailure`` when it cannot give one."""
        index = len(self.side.said)  # 0-based: the turn about to be taken
        said = self.kept[index] if index < len(self.kept) else self._replayed(index)
        if said is None:
            if index == 0 and self.user.first_message is not None:
                said = UserTurn(self.user.first_message, "first_message")
            elif self.replay is not None and self._replay_done(index):
                if index == 0:  # as a simulator done before its first message
                    raise UserFailure(
                        "the recording it replays ends before its first message "
                        f"({self.replay.origin})"
                    )
                return None  # the recording ended here, the simulator having said so
            else:
                said = await self._ask(history)
                if said is None:
                    return None
        self.side.said.append(said)
        return said

    def _replayed(self, index: int) -> UserTurn | None:
        replay = self.replay
        if replay is None:
            return None
        if index < len(replay.turns):
            assert self.side.replay is not None
            self.side.replay["turns"] = index + 1
            return UserTurn(replay.turns[index], "replay")
        return None

    def _replay_done(self, index: int) -> bool:
        """At the end of the recording: True when it ended with the simulator done (the
        replay ends the same way); else the replay diverged here (recorded), False."""
        replay = self.replay
        assert replay is not None and self.side.replay is not None
        if replay.ended == "goal":
            return True
        if "diverged_at" not in self.side.replay:
            self.side.replay["diverged_at"] = index + 1
            self.side.replay["reason"] = (
                f"the recorded conversation has {len(replay.turns)} user turn(s) and ended "
                f"by {replay.ended or 'an unknown reason'}; this target's answers needed "
                f"turn {index + 1}, which the simulator played"
            )
        return False

    async def _ask(self, history: list[Message]) -> UserTurn | None:
        """One call to the simulator: its message (checked), or None when it is done."""
        messages = simulator_messages(self.user, history)
        request = ProviderRequest(
            question=transcript(messages),
            messages=messages,
            eval_id=self.job.case.id,
            timeout=self.sender.settings.agent_timeout or None,
            repeat=self.job.repeat,
            party="user",
            temperature=self.user.temperature,
            seed=self.user.seed,
        )
        try:
            response = await self.sender.user(self.job).invoke(request)
        except ProviderError as exc:
            raise UserFailure(
                f"its target {self.user.target!r} failed: {describe(exc)}", exc.attempts
            ) from exc
        said = _turn_of(response)
        text = response.text or ""
        if DONE in text:
            self.spent.append(said)  # its cost counts, though no message is sent
            if not self.side.said:
                raise UserFailure("it was done before its first message", response.attempts)
            return None
        if response.tool_calls and not text.strip():
            raise UserFailure("it answered with tool calls, not a message", response.attempts)
        problem = role_problem(text, self.user)
        if problem is not None:
            raise UserFailure(problem, response.attempts)
        said.text = text.strip()
        if self.user.role_judge:
            said.role_check = await self._role_check(history, said.text)
        return said

    def record(self) -> dict[str, Any]:
        """The ``user`` field of the conversation's record."""
        assert self.job.user is not None
        out: dict[str, Any] = {"target": self.job.user.name, "ended": self.side.ended}
        out["turns"] = len(self.side.said)
        usage = self.usage()
        if usage is not None:
            out["usage"] = usage.to_dict()
        calls = [t for t in [*self.side.said, *self.spent] if t.source == "simulator"]
        if calls and all(t.cached for t in calls):
            out["cached"] = True  # every simulator answer came from --cache
        if self.user.seed is not None:
            out["seed"] = self.user.seed
        if self.side.replay is not None:
            out["replay"] = self.side.replay
        return out

    def usage(self) -> Usage | None:
        """Every simulator call's tokens, the last one (saying it was done) included."""
        return total_usage(t.usage for t in [*self.side.said, *self.spent])

    async def _role_check(self, history: list[Message], message: str) -> dict[str, Any]:
        """Ask the case's judge whether ``message`` stays in role; ``UserFailure`` if not
        (or when it gives no verdict: the user side cannot go on unchecked)."""
        judge = self.sender.judge(self.job.case, self.job.target)
        if judge is None:  # planning checked that a judge exists
            raise UserFailure("its role check has no judge target")
        request = ProviderRequest(
            question=role_check_prompt(self.user, history, message),
            messages=[
                ChatMessage("system", "You check role-play for an evaluation. Answer in JSON."),
                ChatMessage("user", role_check_prompt(self.user, history, message)),
            ],
            eval_id=self.job.case.id,
            repeat=self.job.repeat,
            party="judge",
        )
        try:
            response = await judge.invoke(request)
        except ProviderError as exc:
            raise UserFailure(f"its role check failed: {exc}", exc.attempts) from exc
        verdict = read_role_verdict(response.text or "")
        if verdict is None:
            raise UserFailure(f"its role check gave no verdict: {_excerpt(response.text or '')!r}")
        in_role, reason = verdict
        if not in_role:
            raise UserFailure(f"the role check found it out of role: {reason}")
        check: dict[str, Any] = {"in_role": True, "reason": reason}
        if response.usage is not None:
            check["usage"] = response.usage.to_dict()
        return check


def _turn_of(response: ProviderResponse) -> UserTurn:
    return UserTurn(
        text=response.text or "",
        source="simulator",
        usage=response.usage,
        latency_ms=response.latency_ms,
        cached=response.cached,
        attempts=response.attempts,
    )
