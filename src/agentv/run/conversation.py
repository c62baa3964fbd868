"""A live case, turn by turn: the target's own answers carried forward, the tools it calls
answered, each turn graded, the conversation graded at the end (docs/eval-files.md, "Live
conversations").

It is the one case pipeline in a loop, not a second pipeline: every request is built by the
one prompt builder from the history so far (``agentv.prompts.builder``), sent through the
target as the run wraps it (its gate, the cache: ``Sender.answer``), and graded by the
case's evaluators (``Sender.grade``); ``live_result`` makes the case's record.

- The history starts with the case's ``input_messages`` (the opening context). Each turn
  adds its user message; the target's answer (its text and native tool calls) becomes the
  assistant turn the next request carries. Guideline files a turn attaches join the system
  message from that turn on.
- When the model calls tools, their mocks answer (``agentv.run.tools``) and the results go
  back as paired tool messages, for up to ``max_tool_rounds`` rounds per turn; then the
  turn's answer counts as it is.
- A turn with ``evaluators`` (or an ``outcome``: a judge of it) is graded on its answer; the
  judge sees the question as the target saw it at that turn. The case's own evaluators
  grade the whole conversation at the end: their question is the whole transcript, their
  answer the last one. ``aggregation`` (mean, min, max) makes one score of the turns' and the
  conversation's; with ``on_turn_failure: stop`` a failed turn ends the conversation (the
  turns after it are not sent) and the case fails.
- A target that fails during a turn ends the conversation with status ``error``; the turns
  before it stay in the record.
- Every tool called during a turn is a step of the run's trajectory (``agentv.trajectory``):
  those the target ran itself (an agent's), then those the run answered, each with its
  turn. A turn's evaluators see the turn's steps, the conversation's the whole trajectory.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from agentv.cases import EvalCase, EvaluatorConfig, Turn
from agentv.errors import BudgetReached, ProviderError
from agentv.evaluators.base import CaseGrade
from agentv.messages import Message, TextSegment, ToolCall
from agentv.prompts.builder import Memo, Prompt, PromptSettings, build_prompt
from agentv.providers.base import ProviderResponse, Usage, total_usage
from agentv.results.outcome import (
    LiveFacts,
    evaluator_error_text,
    grade_status,
    grading_fields,
    live_record,
    required_fields,
    uncertain_fields,
)
from agentv.results.record import SKIPPED, UNCERTAIN, USER_ERROR
from agentv.run.costs import CASE_COST, case_cost
from agentv.run.resume import plan_digest, turn_text
from agentv.run.sending import Sender, describe
from agentv.run.simulator import Simulator, UserFailure, UserTurn
from agentv.run.tools import ToolRun, ToolTime, answer_call
from agentv.trajectory import ToolStep, Trajectory

if TYPE_CHECKING:
    from agentv.providers.base import Provider
    from agentv.run.plan import CaseJob
    from agentv.run.resume import Unfinished


@dataclass
class Round:
    """One request of a turn: the tool loop may make several."""

    messages: int  # messages sent (the turn's request is ``chat_prompt[:messages]`` of the last)
    response: ProviderResponse
    attempts: int
    calls: list[ToolRun] = field(default_factory=list)


@dataclass
class TurnOutcome:
    """What one turn did: its rounds, its answer, its grade."""

    index: int  # 1-based
    turn: Turn | None  # None: a case with tools and no turns (its one implicit turn)
    prompt: Prompt | None = None  # the last request's (the last turn's only, once it is over)
    rounds: list[Round] = field(default_factory=list)
    answer: str = ""
    grade: CaseGrade | None = None
    status: str | None = None  # ok / failed / error; None: not graded on its own
    error: str | None = None  # the target failed during this turn
    tool_rounds_exhausted: bool = False
    user: UserTurn | None = None  # a simulated user's message: where it came from, its cost
    stop_check: dict[str, Any] | None = None  # a simulated conversation's stop_when verdict
    steps: list[ToolStep] = field(default_factory=list)  # the tools called, in order
    untold: bool = False  # the target could not say which tools it called
    trajectory_error: str | None = None  # ... and why, when it should have
    done: bool = False  # answered and, when graded, graded: the turn is whole
    #: the grade an earlier run recorded for it (``--resume``), in place of ``grade``
    kept_grade: dict[str, Any] | None = None

    @property
    def score(self) -> float | None:
        """The turn's score (None: not graded)."""
        if self.grade is not None:
            return self.grade.score
        return self.kept_grade["score"] if self.kept_grade is not None else None

    def usage(self) -> Usage | None:
        """The turn's tokens, its rounds' summed."""
        return total_usage(r.response.usage for r in self.rounds)

    @property
    def trajectory(self) -> Trajectory | None:
        """The tools called during the turn (None: the target could not say)."""
        return None if self.untold else tuple(self.steps)


@dataclass
class Conversation:
    """A live case's run: every turn, and how it ended."""

    turns: list[TurnOutcome] = field(default_factory=list)
    final: Prompt | None = None  # the whole transcript (for the conversation's evaluators)
    last_request: Prompt | None = None
    last_response: ProviderResponse | None = None
    grade: CaseGrade | None = None  # the conversation-level grade (the case's evaluators)
    stopped: dict[str, Any] | None = None
    attempts: int = 0
    simulator: Simulator | None = None  # the simulated user, when one plays the user
    user_error: str | None = None  # why the simulated user could not go on
    check_error: str | None = None  # why the stop_when check could not grade
    budget: str | None = None  # why the run's budget stopped it (it is ``skipped``)
    turns_over: bool = False  # no more turns: the conversation's grade was next
    #: what was taken up from an earlier run's record (``--resume``): ``from``, ``turns``
    resumed: dict[str, Any] | None = None
    kept_aspects: int = 0  # the expected aspects of the turns graded in that run
    #: each earlier message as rendered: a request repeats them all, built once each
    memo: Memo = field(default_factory=Memo)
    #: the judge any of its grades may ask, once looked up (``judge_of``)
    _judge: tuple[Provider | None] | None = None

    def judge_of(self, sender: Sender, job: CaseJob) -> Provider | None:
        """The judge any of the conversation's grades may ask: looked up at its first grade
        (``Sender.judge``), then kept; None when the case needs none."""
        if self._judge is None:
            self._judge = (sender.judge(job.case, job.target),)
        return self._judge[0]

    @property
    def responses(self) -> list[ProviderResponse]:
        """Every response, in order."""
        return [r.response for t in self.turns for r in t.rounds]

    @property
    def trajectory(self) -> Trajectory | None:
        """Every turn's tool calls, in order (None: the target could not say)."""
        if any(t.untold for t in self.turns):
            return None
        return tuple(step for t in self.turns for step in t.steps)

    @property
    def trajectory_error(self) -> str | None:
        """Why the target did not say which tools it called, when it should have."""
        return next((t.trajectory_error for t in self.turns if t.trajectory_error), None)


class _Scripted:
    """The turns written in the case (a case with tools and none: one turn, no new
    message)."""

    def __init__(self, case: EvalCase) -> None:
        self.turns: list[Turn | None] = list(case.turns) or [None]

    async def next(self, run: Conversation, history: list[Message]) -> Turn | _End | None:
        index = len(run.turns)
        return self.turns[index] if index < len(self.turns) else END

    def stop_reason(self, index: int, what: str) -> str | None:
        left = len(self.turns) - index
        if left <= 0:
            return None
        return f"turn {index} {what}: {left} turn(s) not sent"


class _Simulated:
    """Turns a simulated user says (``agentv.run.simulator``), until it is done, the
    ``stop_when`` check passes on an answer, or ``max_turns``."""

    def __init__(
        self,
        sender: Sender,
        job: CaseJob,
        threshold: float,
        run: Conversation,
        kept: _Kept | None = None,
    ) -> None:
        self.sender, self.job, self.threshold = sender, job, threshold
        self.user = job.case.user
        assert self.user is not None
        replays = sender.settings.replay_user
        replay = replays.get((job.case.dataset, job.case.id, job.repeat)) if replays else None
        said = kept.user_turns() if kept is not None else ()
        self.simulator = run.simulator = Simulator(sender, job, replay, said)
        # how the recorded turns ended, when only the conversation's grade was left
        self.ended = (len(said), kept.unfinished.ended) if kept is not None else None

    async def next(self, run: Conversation, history: list[Message]) -> Turn | _End | None:
        side = self.simulator.side
        if self.ended is not None and self.ended[1] is not None and len(run.turns) == self.ended[0]:
            side.ended = self.ended[1]  # as the run that recorded them ended them
            return END
        if run.turns:  # after an answer: is the conversation over?
            if await self._stop_check(run, history):
                side.ended = "stop_when"
                return END
            if len(run.turns) >= self.user.max_turns:
                side.ended = "max_turns"
                return END
        said = await self.simulator.next_message(history)
        if said is None:
            side.ended = "goal"
            return END
        return Turn(
            Message("user", (TextSegment(said.text),)), evaluators=self.job.case.turn_evaluators
        )

    async def _stop_check(self, run: Conversation, history: list[Message]) -> bool:
        """Whether ``stop_when`` passes on the last answer (an evaluator that cannot grade
        ends the conversation as an error, said on the turn)."""
        user = self.user
        if not user.stop_when and not user.stop_when_judge:
            return False
        last = run.turns[-1]
        if last.stop_check is not None:  # checked in the run that recorded the turn
            return last.stop_check.get("passed") is True
        case = replace(
            self.job.case,
            outcome=user.stop_when_judge or self.job.case.outcome,
            evaluators=user.stop_when,
            expected_messages=(),
            reference_answer="",
            input_messages=tuple(history[:-1]),
        )
        grade = await _grade(
            self.sender,
            self.job,
            run.judge_of(self.sender, self.job),
            case,
            last.prompt,
            last.answer,
            [r.response for r in last.rounds],
            last.trajectory,
            last.trajectory_error,
        )
        error = evaluator_error_text(grade)
        last.stop_check = {"score": grade.score, "passed": grade.score >= self.threshold}
        if error is not None:
            last.stop_check["error"] = error
            raise StopCheckFailed(f"the stop_when check could not grade: {error}")
        return grade.score >= self.threshold

    def stop_reason(self, index: int, what: str) -> str | None:
        if index >= self.user.max_turns:
            return None
        return f"turn {index} {what}: the conversation ended there"


class StopCheckFailed(Exception):
    """The ``stop_when`` check of a simulated conversation could not grade an answer."""


class _End:
    """No more turns."""


END = _End()

#: what a turn's record holds of its grade
_GRADE_KEYS = (
    "status",
    "score",
    "hits",
    "misses",
    "reasoning",
    "evaluator_results",
    "evaluator_raw_request",
    "failed_required",
    "uncertain",
    "error",
)


class _Kept:
    """The turns of a conversation the budget stopped, as its record holds them
    (``--resume``): taken up again in order, nothing sent or paid for them again, before
    the conversation goes on. What they cost is counted as reused."""

    def __init__(self, unfinished: Unfinished, run: Conversation) -> None:
        self.unfinished = unfinished
        run.resumed = {"from": unfinished.origin, "turns": len(unfinished.turns)}
        run.kept_aspects = unfinished.aspects
        cost = CASE_COST.get()
        if cost is not None and unfinished.cost:
            cost.carry(unfinished.cost)

    def user_turns(self) -> tuple[UserTurn, ...]:
        """What the simulated user said in the recorded turns."""
        return tuple(
            UserTurn.recorded(turn["content"], turn.get("user")) for turn in self.unfinished.turns
        )

    def take_up(self, outcome: TurnOutcome) -> _KeptTurn | None:
        """The record of ``outcome``'s turn (None past the recorded ones); the tools it
        called and its ``stop_when`` verdict are set on ``outcome`` from it."""
        turns = self.unfinished.turns
        if outcome.index > len(turns):
            return None
        record = turns[outcome.index - 1]
        steps = self.unfinished.steps
        if steps is None:
            outcome.untold = True
            outcome.trajectory_error = self.unfinished.trajectory_error
        else:
            outcome.steps.extend(steps.get(outcome.index, ()))
        if isinstance(record.get("stop_check"), dict):
            outcome.stop_check = record["stop_check"]
        return _KeptTurn(record, _kept_grade(record))


def _kept_grade(record: dict[str, Any]) -> dict[str, Any] | None:
    """A recorded turn's grade, when it has one that reads as a grade (else the turn is
    graded again)."""
    score = record.get("score")
    if record.get("status") not in ("ok", "failed", UNCERTAIN, "error") or _amount(score) is None:
        return None
    texts = [*record.get("hits", ()), *record.get("misses", ())]
    if not all(isinstance(t, str) for t in texts) or (score or 0) > 1:
        return None
    return {key: record[key] for key in _GRADE_KEYS if key in record}


@dataclass(frozen=True, slots=True)
class _KeptTurn:
    """One recorded turn taken up again: its requests' answers and its tool calls'
    results, in order; its ``grade`` when it was graded."""

    record: dict[str, Any]
    grade: dict[str, Any] | None

    @property
    def exhausted(self) -> bool:
        """Its last answer called tools that were left unanswered (the rounds ran out)."""
        return self.record.get("tool_rounds_exhausted") is True

    def answer(self, index: int) -> ProviderResponse | None:
        """The answer to its request ``index`` (0-based), as recorded; None past them."""
        requests = self.record["requests"]
        if index >= len(requests):
            return None
        request = requests[index]
        calls = self._calls(index)
        finish = request.get("finish_reason")
        return ProviderResponse(
            # a request that called tools says its own text; the last one is the answer
            text=request.get("text", "") if calls else self.record["answer"],
            usage=Usage.from_dict(request.get("usage")),
            latency_ms=_amount(request.get("latency_ms")),
            cached=True,  # nothing was sent for it this time
            tool_calls=tuple(_call(c) for c in calls),
            finish_reason=finish if isinstance(finish, str) else None,
            cost_usd=_amount(request.get("cost_usd")),
        )

    def result(self, index: int, number: int) -> ToolRun:
        """How call ``number`` of request ``index`` was answered."""
        call = self._calls(index)[number]
        error = call.get("error")
        return ToolRun(
            _call(call),
            call["result"],
            error if isinstance(error, str) else None,
            _amount(call.get("duration_ms")) or 0.0,
            index,
        )

    def _calls(self, index: int) -> list[dict[str, Any]]:
        return [c for c in self.record.get("tool_calls", ()) if c["round"] == index]


def _call(record: dict[str, Any]) -> ToolCall:
    """A recorded tool call, its arguments as the model wrote them."""
    return ToolCall(
        record["id"], record["name"], record["arguments"], text=record.get("arguments_text")
    )


def _amount(value: Any) -> float | None:
    """A finite number that is not negative, as a float (None for anything else)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) and value >= 0 else None


async def converse(sender: Sender, job: CaseJob, threshold: float) -> Conversation:
    """Run ``job``'s live case on its target: every turn (scripted, or said by a simulated
    user) until the turns end, one fails under ``on_turn_failure: stop``, the target or the
    simulated user fails, or the run's budget is reached; then the conversation's grade.
    A conversation the budget stopped part-way keeps what it had done (``budget``); one
    ``--resume`` goes on from (``job.resumed``) takes its recorded turns up again first."""
    run = Conversation()
    try:
        await _converse(sender, job, threshold, run)
    except BudgetReached as exc:
        _budget_stop(run, exc)
    return run


async def _converse(sender: Sender, job: CaseJob, threshold: float, run: Conversation) -> None:
    case, target = job.case, job.target
    settings = PromptSettings.of(target.provider)
    tools = {t.name: t for t in case.tools}
    specs = tuple(t.spec() for t in case.tools) if not target.provider.is_agent else ()
    history = list(case.input_messages)
    guidelines = list(case.guideline_files)
    inputs = list(case.input_files)
    kept = _Kept(job.resumed, run) if job.resumed is not None else None
    source = _Simulated(sender, job, threshold, run, kept) if case.user else _Scripted(case)
    while True:
        index = len(run.turns) + 1
        try:
            turn = await source.next(run, history)
        except UserFailure as exc:
            run.attempts += exc.attempts
            run.user_error = exc.reason
            run.stopped = {"turn": index, "reason": f"the simulated user failed: {exc.reason}"}
            if run.simulator is not None:
                run.simulator.side.ended = "user_error"
            return
        except StopCheckFailed as exc:
            run.check_error = str(exc)
            run.stopped = {"turn": index - 1, "reason": str(exc)}
            if run.simulator is not None:
                run.simulator.side.ended = "error"
            return
        if isinstance(turn, _End):
            break
        if turn is not None:
            history.append(turn.message)
            guidelines += turn.guideline_files
            inputs += [p for p in turn.input_files if p not in inputs]
        if run.turns:  # a request holds the whole conversation: only the last is kept
            run.turns[-1].prompt = None
        outcome = TurnOutcome(index, turn)
        if run.simulator is not None:
            outcome.user = run.simulator.side.said[-1]
        run.turns.append(outcome)
        recorded = kept.take_up(outcome) if kept is not None else None
        before = len(history)  # the history the target saw when the turn began
        try:
            await _take_turn(
                sender,
                job,
                outcome,
                history,
                guidelines,
                inputs,
                settings,
                specs,
                tools,
                run,
                recorded,
            )
        except ProviderError as exc:
            outcome.error = describe(exc)
            run.attempts += exc.attempts
            run.stopped = {"turn": index, "reason": f"the target failed: {outcome.error}"}
            if run.simulator is not None:
                run.simulator.side.ended = "error"
            return
        if turn is not None and turn.graded and recorded is not None and recorded.grade:
            outcome.kept_grade = recorded.grade  # graded in the run that recorded it
            outcome.status = recorded.grade["status"]
        elif turn is not None and turn.graded:
            outcome.grade = await _grade(
                sender,
                job,
                run.judge_of(sender, job),
                _turn_view(case, turn, history, before, guidelines, inputs),
                outcome.prompt,
                outcome.answer,
                [r.response for r in outcome.rounds],
                outcome.trajectory,
                outcome.trajectory_error,
                evaluators=turn.evaluators,
            )
            outcome.status = grade_status(outcome.grade, threshold)
            what = _turn_failure(outcome) if case.stop_on_failure else None
            if what is not None:
                reason = source.stop_reason(index, what)
                if reason is not None:
                    outcome.done = True
                    run.stopped = {"turn": index, "reason": reason}
                    if run.simulator is not None:
                        run.simulator.side.ended = "turn_failed"
                    break
        outcome.done = True
    run.turns_over = True
    whole = replace(
        case,
        input_messages=tuple(history),
        guideline_files=tuple(guidelines),
        input_files=tuple(inputs),
    )
    if case.user is not None and case.user.goal:
        # the conversation's judge grades against the user's goal too
        whole = replace(whole, outcome=f"{case.outcome}\n\nThe user's goal: {case.user.goal}")
    run.final = build_prompt(whole, settings, run.memo)
    if not run.turns:  # the simulated user was done before it said anything
        return
    if case.evaluators or not (case.turns or case.user):
        # the conversation's grade (a case with tools and no turns: its only grade); the
        # question is the whole transcript, the answer the last one
        last = run.turns[-1]
        prompt = run.final if (case.turns or case.user) else last.prompt
        run.grade = await _grade(
            sender,
            job,
            run.judge_of(sender, job),
            whole,
            prompt,
            last.answer,
            run.responses,
            run.trajectory,
            run.trajectory_error,
        )
    elif case.user is not None:  # no evaluators: a judge of the outcome and the goal
        run.grade = await _grade(
            sender,
            job,
            run.judge_of(sender, job),
            whole,
            run.final,
            run.turns[-1].answer,
            run.responses,
            run.trajectory,
            run.trajectory_error,
        )


def _budget_stop(run: Conversation, exc: BudgetReached) -> None:
    """The run's budget stopped the conversation: what it had done is kept, and said where
    it stopped (``--resume`` goes on from there). One that had sent nothing is not run,
    as any case the budget stops before its request."""
    last = run.turns[-1] if run.turns else None
    if last is not None and not last.rounds and last.user is None:
        run.turns.pop()  # nothing of it was sent (a simulated user's message is kept)
        last = run.turns[-1] if run.turns else None
    if last is None:
        run.budget = str(exc)
        return
    spent = f"the run's spend reached its budget (${exc.spent:.4f} of ${exc.budget:g})"
    if run.turns_over:
        turn, where = last.index, "before the conversation's grade was asked for"
    elif not last.done:
        turn, where = last.index, f"during turn {last.index}"
    else:
        turn, where = last.index + 1, f"before turn {last.index + 1}"
    run.budget = (
        f"not finished: {spent} {where}; what it had done is kept, and `agentv eval "
        "--resume` goes on from there"
    )
    run.stopped = {"turn": turn, "reason": run.budget}
    if run.simulator is not None and not run.turns_over:
        run.simulator.side.ended = "budget"


def _turn_failure(outcome: TurnOutcome) -> str | None:
    """How a graded turn went wrong, for ``on_turn_failure: stop`` (None: it did not):
    it failed, or a required evaluator could not grade it (then it cannot have passed)."""
    if outcome.status == "failed":
        return "failed (on_turn_failure: stop)"
    grade = outcome.grade
    crashed = (
        [s for s in (grade.evaluator_results or ()) if s.required and s.error] if grade else []
    )
    if outcome.status == "error" and crashed:
        first = crashed[0]
        return (
            "could not be graded (on_turn_failure: stop): the required evaluator "
            f"{first.name!r} could not grade: {first.error}"
        )
    return None


async def _take_turn(
    sender: Sender,
    job: CaseJob,
    outcome: TurnOutcome,
    history: list[Message],
    guidelines: list[Any],
    inputs: list[Any],
    settings: PromptSettings,
    specs: tuple[dict[str, Any], ...],
    tools: dict[str, Any],
    run: Conversation,
    recorded: _KeptTurn | None = None,
) -> None:
    """One turn: requests until the model answers without calling a tool (or the rounds run
    out); the answer joins ``history``. ``recorded``: the turn as an earlier run recorded
    it (``--resume``): its requests' answers and its calls' results are taken from there,
    in order, and the turn goes on from where the record ends."""
    case = job.case
    timeout = sender.settings.agent_timeout or None
    tool_time = ToolTime(timeout)  # the turn's scripts share the time limit
    rounds = 0
    while True:
        prompt = build_prompt(case, settings, run.memo, so_far=(history, guidelines, inputs))
        outcome.prompt = prompt
        replayed = recorded.answer(rounds) if recorded is not None else None
        if replayed is None:
            try:
                response, attempts = await sender.answer(job, prompt, specs)
            except BudgetReached:
                raise  # not sent: the record's request stays the last one sent
            except ProviderError:
                run.last_request = prompt  # sent, and failed: the record shows it
                raise
            run.attempts += attempts
            sender.note_ending(job, response)
        else:
            response, attempts = replayed, 0
        run.last_request, run.last_response = prompt, response
        this = Round(len(prompt.messages), _settled(response), attempts)
        outcome.rounds.append(this)
        if replayed is not None:
            pass  # the turn's tools are the record's (``_Kept.take_up``)
        elif response.trajectory is None:  # what the target ran itself, before the run answers
            outcome.untold = True
            outcome.trajectory_error = outcome.trajectory_error or response.trajectory_error
        else:
            outcome.steps.extend(step.in_turn(outcome.index) for step in response.trajectory)
        calls = response.tool_calls
        # a recorded round that called tools had its calls answered then, whatever the
        # case's max_tool_rounds says now
        if calls and (replayed is not None or rounds < case.max_tool_rounds):
            history.append(Message("assistant", (_said(response.text),), tool_calls=calls))
            for number, call in enumerate(calls):
                if replayed is not None and recorded is not None:
                    done = recorded.result(rounds, number)
                else:
                    done = await answer_call(
                        call, tools, timeout=timeout, round_=rounds, tool_time=tool_time
                    )
                    outcome.steps.append(done.step(outcome.index))
                this.calls.append(done)
                history.append(
                    Message(
                        "tool", (TextSegment(done.result),), tool_call_id=call.id, name=call.name
                    )
                )
            rounds += 1
            continue
        # the answer counts: with calls left unanswered (the rounds ran out) only its text
        # is carried forward, since no API takes calls without their results
        outcome.tool_rounds_exhausted = bool(calls) or (
            replayed is not None and recorded is not None and recorded.exhausted
        )
        outcome.answer = response.text
        history.append(Message("assistant", (_said(response.text),)))
        return


def _settled(response: ProviderResponse) -> ProviderResponse:
    """What a turn keeps of an answer once it is in the history: neither what was sent
    (a request carries the whole conversation so far, so keeping each would grow with the
    square of the turns) nor the API's raw reply. The record takes what was sent from the
    last request only (``Conversation.last_response``)."""
    return replace(response, sent={}, raw=None)


def _said(text: str) -> TextSegment:
    """A model's answer as the history carries it forward: byte for byte (its whitespace
    is its own, not text written in a file: docs/prompt-rules.md, section 5)."""
    return TextSegment(text, verbatim=True)


async def _grade(
    sender: Sender,
    job: CaseJob,
    judge: Provider | None,
    case: EvalCase | Callable[[], EvalCase],
    prompt: Prompt | None,
    answer: str,
    responses: list[ProviderResponse],
    steps: Trajectory | None,
    steps_error: str | None,
    *,
    evaluators: tuple[EvaluatorConfig, ...] | None = None,
) -> CaseGrade:
    """``case``'s evaluators (else a judge of its outcome) on ``answer`` and the tools
    called (``steps``), the question being ``prompt``'s: the answer and the steps masked
    first, as any answer is before it is graded. ``responses``: the requests that made the
    answer (their time and price, summed); ``case`` may be a function that makes it, with
    its ``evaluators`` then given (``EvaluationContext``)."""
    assert prompt is not None
    masked, _ = sender.masker.text(answer)
    steps, _ = sender.masker.steps(steps)
    return await sender.grade(
        job,
        case,
        prompt,
        masked,
        judge,
        latency_ms=_sum(r.latency_ms for r in responses),
        cost_usd=_sum(r.cost_usd for r in responses),
        trajectory=steps,
        trajectory_error=steps_error,
        evaluators=evaluators,
    )


def live_result(
    run: Conversation,
    job: CaseJob,
    prompt: Prompt,
    threshold: float,
    *,
    duration_ms: float,
    queued_ms: float | None,
    workspace: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A live case's record: its conversation (``converse``), scored by its
    ``aggregation``; ``prompt``: the case's opening prompt, the record's request when no
    turn was sent."""
    case, target = job.case, job.target
    turns = [turn_record(t, threshold) for t in run.turns]
    hits = [f"turn {t['turn']}: {h}" for t in turns for h in t.get("hits", ())]
    misses = [f"turn {t['turn']}: {m}" for t in turns for m in t.get("misses", ())]
    # a required evaluator that missed fails the case, in a turn or over the conversation
    gates = [f"turn {t['turn']}: {name}" for t in turns for name in t.get("failed_required", ())]
    errors = [f"turn {t['turn']}: {t['error']}" for t in turns if t.get("error")]
    if run.check_error is not None:
        errors.append(run.check_error)
    # judges whose samples disagreed where a turn's or the conversation's verdict hangs on
    # them: the conversation is uncertain when it would otherwise have passed
    unsure = [f"turn {t['turn']}: {name}" for t in turns for name in t.get("uncertain", ())]
    unsure_status = [t["status"] for t in turns if t.get("uncertain")]
    reasoning = None
    if run.grade is not None:
        names, gate_misses = required_fields(run.grade, threshold)
        gates += names
        hits += run.grade.hits
        own, own_misses = uncertain_fields(run.grade, threshold)
        unsure += own
        if own:
            unsure_status.append(grade_status(run.grade, threshold))
        misses += [*run.grade.misses, *gate_misses, *own_misses]
        reasoning = run.grade.reasoning
        if (text := evaluator_error_text(run.grade)) is not None:
            errors.append(text)
    score = aggregate_score(run, case.aggregation)
    if run.budget is not None:  # not finished: never a score (``--resume`` goes on)
        status, score = SKIPPED, None
        misses = [f"Skipped: {run.budget}", *misses]
    elif run.user_error is not None:
        status = USER_ERROR  # the simulated user's failure, not the model's
        errors = [f"the simulated user failed: {run.user_error}"]
    elif errors:
        status = "error"
    elif run.stopped is not None or score is None or score < threshold or gates:
        status = "failed"  # a conversation stopped by a failed turn did not get through
    elif UNCERTAIN in unsure_status:
        status = UNCERTAIN  # it passed, but only if its uncertain judges went its way
    elif "failed" in unsure_status:
        status = "failed"  # their on_uncertain: fail
    else:
        status = "ok"
    responses = run.responses
    latencies = [r.latency_ms for r in responses if r.latency_ms is not None]
    facts = LiveFacts(
        score=score or 0.0,
        status=status,
        hits=hits,
        misses=misses,
        answer=run.turns[-1].answer if run.turns else "",
        turns=turns,
        aggregation=case.aggregation,
        grading=grading_fields(run.grade, threshold) if run.grade is not None else {},
        failed_required=gates,
        uncertain=unsure if status in (UNCERTAIN, "ok", "failed") and unsure else None,
        reasoning=reasoning,
        expected_aspect_count=run.kept_aspects
        + sum(
            g.expected_aspect_count
            for g in [*(t.grade for t in run.turns), run.grade]
            if g is not None
        ),
        usage=total_usage(r.usage for r in responses),
        latency_ms=sum(latencies) if latencies else None,
        stopped=run.stopped,
        error="; ".join(errors) if errors else None,
        plan_digest=plan_digest(case),
        cached=bool(responses) and all(r.cached for r in responses),
        user=run.simulator.record() if run.simulator is not None else None,
        cost=case_cost(),
        trajectory=run.trajectory,
        trajectory_error=run.trajectory_error,
        own_tools=bool(case.tools) or target.provider.reports_trajectory,
        skip_reason=run.budget,
        resumed=run.resumed,
    )
    return live_record(
        case,
        target=target.name,
        provider=target.provider,
        prompt=run.last_request or prompt,
        response=run.last_response,
        facts=facts,
        duration_ms=duration_ms,
        queued_ms=queued_ms,
        attempts=run.attempts,
        repeat=job.repeat,
        workspace=workspace,
    )


def _turn_view(
    case: EvalCase,
    turn: Turn,
    history: list[Message],
    before: int,
    guidelines: list[Any],
    inputs: list[Any],
) -> Callable[[], EvalCase]:
    """What makes ``case`` as ``turn`` is graded: the turn's outcome, expectations and
    evaluators, asked after the first ``before`` messages of ``history``, with the files
    known by then. Made only if an evaluator reads it (most look at the answer alone); the
    lists only grow while a conversation lasts, so what they held then is their start."""
    known = (len(guidelines), len(inputs))

    def make() -> EvalCase:
        return replace(
            case,
            outcome=turn.outcome,
            expected_messages=turn.expected_messages,
            reference_answer=turn.reference_answer,
            evaluators=turn.evaluators,
            input_messages=tuple(history[:before]),
            guideline_files=tuple(guidelines[: known[0]]),
            input_files=tuple(inputs[: known[1]]),
        )

    return make


def _sum(values: Any) -> float | None:
    """The sum of the values; None when any is unknown (or there is none)."""
    found = list(values)
    if not found or any(v is None for v in found):
        return None
    return float(sum(found))


def aggregate_score(run: Conversation, how: str) -> float | None:
    """The case's score: the graded turns' scores and the conversation's, combined by
    ``how`` (mean, min, max); None when nothing was graded."""
    scores = [score for t in run.turns if (score := t.score) is not None]
    if run.grade is not None:
        scores.append(run.grade.score)
    if not scores:
        return None
    if how == "min":
        return min(scores)
    if how == "max":
        return max(scores)
    return sum(scores) / len(scores)


def turn_record(outcome: TurnOutcome, threshold: float) -> dict[str, Any]:
    """One turn as the record keeps it: what the user said, the answer, the tool calls with
    their results, each request (how many messages of ``raw_request.chat_prompt`` it sent;
    its tokens, time and ending), the grade (``threshold``: the run's pass threshold)."""
    rec: dict[str, Any] = {"turn": outcome.index}
    if outcome.turn is not None:
        rec["content"] = turn_text(outcome.turn)
    if outcome.user is not None:
        rec["user"] = outcome.user.to_dict()
    rec["answer"] = outcome.answer
    if outcome.stop_check is not None:
        rec["stop_check"] = outcome.stop_check
    calls = [c.to_dict() for r in outcome.rounds for c in r.calls]
    if calls:
        rec["tool_calls"] = calls
    if outcome.tool_rounds_exhausted:
        rec["tool_rounds_exhausted"] = True
    rec["requests"] = [_round_record(r) for r in outcome.rounds]
    usage = outcome.usage()
    if usage is not None:
        rec["usage"] = usage.to_dict()
    latencies = [r.response.latency_ms for r in outcome.rounds if r.response.latency_ms]
    if latencies:
        rec["latency_ms"] = round(sum(latencies), 3)
    if outcome.rounds and outcome.rounds[-1].response.finish_reason is not None:
        rec["finish_reason"] = outcome.rounds[-1].response.finish_reason
    if outcome.grade is not None:
        gates, gate_misses = required_fields(outcome.grade, threshold)
        unsure, unsure_misses = uncertain_fields(outcome.grade, threshold)
        rec["status"] = outcome.status
        rec["score"] = outcome.grade.score
        rec["hits"] = outcome.grade.hits
        rec["misses"] = [*outcome.grade.misses, *gate_misses, *unsure_misses]
        if outcome.grade.reasoning:
            rec["reasoning"] = outcome.grade.reasoning
        rec.update(grading_fields(outcome.grade, threshold))
        if gates:
            rec["failed_required"] = gates
        if unsure and outcome.status != "error":
            rec["uncertain"] = unsure
        error = evaluator_error_text(outcome.grade)
        if error is not None:
            rec["error"] = error
    elif outcome.kept_grade is not None:
        rec.update(outcome.kept_grade)
    if outcome.error is not None:
        rec["status"] = "error"
        rec["error"] = outcome.error
    return rec


def _round_record(r: Round) -> dict[str, Any]:
    rec: dict[str, Any] = {"messages": r.messages}
    if r.response.usage is not None:
        rec["usage"] = r.response.usage.to_dict()
    if r.response.cost_usd is not None:
        rec["cost_usd"] = round(r.response.cost_usd, 10)
    if r.response.latency_ms is not None:
        rec["latency_ms"] = round(r.response.latency_ms, 3)
    if r.response.finish_reason is not None:
        rec["finish_reason"] = r.response.finish_reason
    if r.response.cached:
        rec["cached"] = True
    if r.calls:
        rec["tool_calls"] = len(r.calls)
        if r.response.text:  # what it said with its calls (the history carries it forward)
            rec["text"] = r.response.text
    return rec


def tool_result_text(value: Any) -> str:
    """JSON of a recorded value (for hits and misses)."""
    return json.dumps(value, ensure_ascii=False)
