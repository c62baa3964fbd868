"""What a run would cost, before anything is sent (``agentv estimate``, docs/running.md,
"Before a run: the estimate").

Every case's prompt is built exactly as the run builds it (``agentv.prompts.builder``), for the
target the run would choose, with the targets built as ``agentv render`` builds them (no
secret needed, nothing sent). Its input tokens are counted by the same rule the run's
``max_tpm`` pacing uses: about 4 characters a token (``run.scheduling.estimate_tokens``;
no tokenizer that works offline is light enough to depend on). The answers are not known:
each is taken to be ``answer_tokens`` long (at most its target's ``max_output_tokens``), as
stated in the estimate. A judge's request is
its own prompt built around an answer of that length, its verdict ``JUDGE_VERDICT_TOKENS``
long. A live conversation's turn carries the conversation so far (the earlier answers at
the stated length); the extra requests of tool loops are not counted. A judge asked several
times (``samples``, ``--judge-samples``) is counted once per sample, adaptive samples at
their ``max``. A simulated user's
conversation is taken at its longest (``max_turns``), each user message
``USER_MESSAGE_TOKENS`` long, and the simulator's requests are counted on its own target. Prices are the run's
(``agentv.providers.pricing``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from agentv.cases import EvalCase, EvaluatorConfig
from agentv.errors import AgentVError, Diagnostic, DiagnosticsView, InputError
from agentv.evalfile.files import FileStore
from agentv.evalfile.loader import LoadContext, iter_cases, load_eval_file
from agentv.evaluators.grading import DEFAULT_JUDGE, needs_judge
from agentv.evaluators.llm_judge import LlmJudgeSpec, judge_prompts
from agentv.evaluators.samples import SampleRule
from agentv.messages import GuidelineFile, Message, TextSegment
from agentv.prompts.builder import (
    Memo,
    Prompt,
    PromptSettings,
    build_guidelines,
    build_prompt,
    request_chars,
)
from agentv.providers.base import Provider, Usage, request_for_case
from agentv.providers.pricing import Pricer
from agentv.results.record import usd as dollars
from agentv.run.plan import CaseJob
from agentv.run.preview import first_request
from agentv.run.scheduling import estimate_tokens, tokens_of
from agentv.run.sending import grading_context
from agentv.targets import DEFAULT_TARGET, RunTarget, TargetPool, choose_target

#: the answer length taken when none is given (tokens)
DEFAULT_ANSWER_TOKENS = 500
#: a simulated user's message, in tokens (users write short messages)
USER_MESSAGE_TOKENS = 50
#: a judge's verdict (a short JSON object with its reasons), in tokens
JUDGE_VERDICT_TOKENS = 200


@dataclass
class Line:
    """One target's (or judge's) share of the estimate."""

    target: str
    role: str  # "target", "judge" or "user" (a simulated user's target)
    model: str | None
    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    usd: float | None = 0.0  # None: no price known
    price: dict[str, Any] | None = None  # the prices used, and where they come from

    def to_dict(self) -> dict[str, Any]:
        """The line as JSON-ready data.

        Returns:
            Its fields, by name.
        """
        return {
            "target": self.target,
            "role": self.role,
            "model": self.model,
            "requests": self.requests,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "usd": dollars(self.usd),
            "price": self.price,
        }


@dataclass
class Estimate(DiagnosticsView):
    """A run's tokens and cost, estimated before sending anything (``estimate``).

    Attributes:
        lines: One per target and per judge (and a simulated user's target): requests,
            input and output tokens, US dollars (None: no price known), the prices used.
        cases: Cases estimated.
        runs: Runs of cases estimated (cases times targets times repeats).
        answer_tokens: The length taken for each answer, in tokens.
        judge_verdict_tokens: The length taken for each judge's verdict, in tokens.
        user_message_tokens: The length taken for a simulated user's message, in tokens
            (its conversations are taken at their ``max_turns``).
        method: How tokens were counted.
        diagnostics: Problems met on the way (files or targets that were not estimated).
    """

    lines: list[Line] = field(default_factory=list)
    cases: int = 0
    runs: int = 0
    answer_tokens: int = DEFAULT_ANSWER_TOKENS
    judge_verdict_tokens: int = JUDGE_VERDICT_TOKENS
    #: a simulated user's message (its conversations are taken at their ``max_turns``)
    user_message_tokens: int = USER_MESSAGE_TOKENS
    method: str = (
        "input tokens: about 4 characters a token, over the exact messages the run sends; "
        "output tokens: the stated answer length"
    )
    diagnostics: list[Diagnostic] = field(default_factory=list)

    @property
    def total_usd(self) -> float:
        """The US dollars of the lines with a price."""
        return sum(line.usd for line in self.lines if line.usd is not None)

    @property
    def unpriced(self) -> list[str]:
        """The targets and judges without a price."""
        return [line.target for line in self.lines if line.usd is None]

    @property
    def requests(self) -> int:
        """Requests the run would send (tool loops' extra rounds not counted)."""
        return sum(line.requests for line in self.lines)

    def to_dict(self) -> dict[str, Any]:
        """The estimate as JSON-ready data.

        Returns:
            What ``agentv estimate --format json`` prints.
        """
        return {
            "cases": self.cases,
            "runs": self.runs,
            "requests": self.requests,
            "answer_tokens": self.answer_tokens,
            "judge_verdict_tokens": self.judge_verdict_tokens,
            "user_message_tokens": self.user_message_tokens,
            "method": self.method,
            "lines": [line.to_dict() for line in self.lines],
            "total_usd": dollars(self.total_usd),
            "unpriced": self.unpriced,
        }


class _Estimator:
    def __init__(
        self,
        pool: TargetPool,
        answer_tokens: int,
        result: Estimate,
        judge_samples: SampleRule | None = None,
    ) -> None:
        self.pool = pool
        self.answer = answer_tokens
        self.result = result
        self.judge_samples = judge_samples
        self.pricer = Pricer()
        self._lines: dict[tuple[str, str, str | None], Line] = {}

    def line(self, provider: Provider, role: str, model: str | None) -> Line:
        from agentv.providers.pricing import target_model

        shown = target_model(provider, model)
        key = (provider.name, role, shown)
        found = self._lines.get(key)
        if found is None:
            rates = self.pricer.rates(provider, model)
            found = self._lines[key] = Line(
                provider.name, role, shown, price=rates.to_dict() if rates else None
            )
            if rates is None:
                found.usd = None
            self.result.lines.append(found)
        return found

    def add(self, line: Line, provider: Provider, model: str | None, inp: int, out: int) -> None:
        line.requests += 1
        line.input_tokens += inp
        line.output_tokens += out
        if line.usd is not None:
            cost = self.pricer.cost(provider, Usage(inp, out, inp + out), model)
            line.usd = line.usd + (cost.usd or 0.0) if cost.priced else None
            if line.usd is not None and not math.isfinite(line.usd):
                line.usd = None  # beyond any sum: unknown, never `Infinity` in JSON

    def case(
        self,
        case: EvalCase,
        target: RunTarget,
        judge: Provider | None,
        runs: int,
        user: Provider | None = None,
    ) -> None:
        provider = target.provider
        target_line = self.line(provider, "target", None)
        settings = PromptSettings.of(provider)
        answer = capped(provider, self.answer)
        if case.user is not None and user is not None:
            asked = self._simulated(case, user, runs, settings, answer)
        elif case.turns:
            asked = self._turns(case, settings, answer)
        else:
            prompt = build_prompt(case, settings)
            tokens = estimate_tokens(request_for_case(case, prompt))
            asked = [(tokens, lambda: (case, prompt), True, _judges(case))]
        for _ in range(runs):
            for tokens, view, graded, configs in asked:
                self.add(target_line, provider, None, tokens, answer)
                if judge is None or not graded or not configs:
                    continue
                seen, prompt = view()
                for config in configs:
                    self._judge(CaseJob(seen, target), prompt, judge, config, answer)

    def _turns(self, case: EvalCase, settings: PromptSettings, length: int) -> list[_Request]:
        """Each turn's request (the earlier answers ``length`` tokens long), whether it is
        graded and by which judges; the conversation's own judges with the last turn.

        The requests are counted as the run builds them, grown by each turn's new messages
        (``request_chars``): nothing is rebuilt per turn, so a conversation of thousands of
        turns is counted in time and memory linear in its length. A turn's view of the case
        (the conversation so far, as a judge sees it) is made only when a judge grades it."""
        first = first_request(case)
        history = list(first.input_messages)
        guidelines = list(first.guideline_files)
        inputs = list(first.input_files)
        memo = Memo()
        # carried forward byte for byte, as the run carries an answer
        answer = Message("assistant", (TextSegment("word " * length, verbatim=True),))
        guideline_text = (-1, "")  # (files, their text): made again only when files join
        out: list[_Request] = []
        for i, turn in enumerate(case.turns):
            if i:
                history += (answer, turn.message)
                guidelines += turn.guideline_files
                inputs += turn.input_files
            if guideline_text[0] != len(guidelines):
                guideline_text = (len(guidelines), build_guidelines(guidelines))
            chars = request_chars(history, guideline_text[1], settings, memo)
            view = _view_of(case, settings, history, guidelines, inputs)
            if chars is None:  # the question joins the messages: the whole prompt
                seen, prompt = view()
                tokens = estimate_tokens(request_for_case(seen, prompt))
            else:
                tokens = tokens_of(chars)
            judges = [e for e in turn.evaluators if e.type == "llm_judge"]
            if turn.outcome.strip() and not turn.evaluators:
                judges = [DEFAULT_JUDGE]
            out.append((tokens, view, True, judges))
        last = [e for e in case.evaluators if e.type == "llm_judge"]
        if last:
            tokens, view, _, judges = out[-1]
            out[-1] = (tokens, view, True, [*judges, *last])
        return out

    def _simulated(
        self,
        case: EvalCase,
        user: Provider,
        runs: int,
        settings: PromptSettings,
        length: int,
    ) -> list[_Request]:
        """A simulated conversation at its longest (``max_turns``), each user message
        ``USER_MESSAGE_TOKENS`` long (at most its target's limit), each answer ``length``;
        the simulator's own requests go on its target's line."""
        from agentv.run.simulator import simulator_messages

        spec = case.user
        assert spec is not None
        message = capped(user, USER_MESSAGE_TOKENS)
        said = Message("user", (TextSegment("word " * message),))
        answer = Message("assistant", (TextSegment("word " * length, verbatim=True),))
        line = self.line(user, "user", None)
        out: list[_Request] = []
        history = list(case.input_messages)
        graders = [e for e in case.turn_evaluators if e.type == "llm_judge"]
        for turn in range(spec.max_turns):
            if turn or spec.first_message is None:  # the simulator writes this message
                asked = sum(len(m.content) for m in simulator_messages(spec, history)) // 4 + 1
                for _ in range(runs):
                    self.add(line, user, None, asked, message)
            history.append(said)
            seen = replace(case, input_messages=tuple(history))
            prompt = build_prompt(seen, settings)
            tokens = estimate_tokens(request_for_case(seen, prompt))
            out.append((tokens, _made(seen, prompt), bool(graders), graders))
            history.append(answer)
        tokens, view, _, judges = out[-1]
        out[-1] = (tokens, view, True, [*judges, *_judges(case)])
        return out

    def _judge(
        self, job: CaseJob, prompt: Any, judge: Provider, config: EvaluatorConfig, answer: int
    ) -> None:
        """A judge's request about an answer ``answer`` tokens long, on its line: once per
        sample it may be asked for (``samples``, else the run's ``judge_samples``; adaptive
        ones at their ``max``)."""
        spec = config.spec if isinstance(config.spec, LlmJudgeSpec) else None
        model = spec.model if spec is not None else None
        rule = (spec.samples if spec is not None else None) or self.judge_samples
        ctx = grading_context(job, job.case, prompt, "word " * answer, judge)
        system, user = judge_prompts(ctx, config)
        tokens = (len(system) + len(user)) // 4 + 1
        verdict = capped(judge, JUDGE_VERDICT_TOKENS)
        line = self.line(judge, "judge", model)
        for _ in range(rule.max if rule is not None else 1):  # every sample, at most
            self.add(line, judge, model, tokens, verdict)


def capped(provider: Provider, tokens: int) -> int:
    """``tokens``, at most what ``provider``'s target lets an answer be
    (``max_output_tokens``): the run asks for no more, and a server honouring it sends no
    more."""
    limit = getattr(provider.settings, "max_output_tokens", None)
    if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0:
        return min(tokens, limit)
    return tokens


#: one request of a case: its input tokens, what makes the case and prompt a judge of its
#: answer sees, whether it is graded, and by which judges
_Request = tuple[int, Callable[[], tuple[EvalCase, Prompt]], bool, list[EvaluatorConfig]]


def _made(case: EvalCase, prompt: Prompt) -> Callable[[], tuple[EvalCase, Prompt]]:
    return lambda: (case, prompt)


def _view_of(
    case: EvalCase,
    settings: PromptSettings,
    history: list[Message],
    guidelines: list[GuidelineFile],
    inputs: list[Path],
) -> Callable[[], tuple[EvalCase, Prompt]]:
    """What makes the case and prompt of a turn's request, as the lists stand now (they
    only grow: what they hold now is their start)."""
    known = (len(history), len(guidelines), len(inputs))

    def make() -> tuple[EvalCase, Prompt]:
        seen = replace(
            case,
            input_messages=tuple(history[: known[0]]),
            guideline_files=tuple(guidelines[: known[1]]),
            input_files=tuple(inputs[: known[2]]),
            turns=(),
        )
        return seen, build_prompt(seen, settings)

    return make


def _judges(case: EvalCase) -> list[EvaluatorConfig]:
    if not case.evaluators:
        return [DEFAULT_JUDGE]
    return [e for e in case.evaluators if e.type == "llm_judge"]


def estimate_run(
    files: list[Path],
    *,
    cwd: Path,
    targets: list[str],
    targets_path: Path | None = None,
    repeat: int | None = None,
    eval_id: str | None = None,
    answer_tokens: int = DEFAULT_ANSWER_TOKENS,
    allow_outside_root: bool = False,
    pool: TargetPool | None = None,
    judge_samples: SampleRule | None = None,
) -> Estimate:
    """The estimate of running ``files`` as ``agentv eval`` would (``targets``: its
    ``--target`` names; empty: each case's own; ``pool``: the targets, Python ones
    included, else those of ``targets_path``). Nothing is sent, no secret is needed."""
    import asyncio

    result = Estimate(answer_tokens=answer_tokens)
    if pool is None:
        pool = TargetPool(cwd=cwd, targets_path=targets_path, preview=True)
    context = LoadContext(store=FileStore(cwd=cwd), allow_outside_root=allow_outside_root)
    work = _Estimator(pool, answer_tokens, result, judge_samples)
    failed: set[tuple[Path, str]] = set()
    try:
        for path in files:
            try:
                loaded = load_eval_file(path, eval_id=eval_id, context=context)
            except InputError as exc:
                result.diagnostics.extend(exc.diagnostics or [Diagnostic(path, str(exc))])
                continue
            result.diagnostics.extend(loaded.diagnostics)
            for case in iter_cases(loaded, eval_id=eval_id, context=context):
                result.cases += 1
                runs = repeat or case.repeat or loaded.repeat or 1
                names = targets or [choose_target(None, case.target, loaded.target)]
                for name in names or [DEFAULT_TARGET]:
                    try:
                        run_target = pool.target(loaded.path, loaded.repo_root, name)
                        judge = pool.judge(run_target) if needs_judge(case) else None
                        user = None
                        if case.user is not None:
                            user = pool.target(loaded.path, loaded.repo_root, case.user.target)
                    except AgentVError as exc:
                        if (path, name) not in failed:
                            failed.add((path, name))
                            result.diagnostics.append(
                                Diagnostic(path, f"not estimated on target {name!r}: {exc}")
                            )
                        continue
                    result.runs += runs
                    work.case(
                        case,
                        run_target,
                        judge,
                        runs,
                        user.provider if user is not None else None,
                    )
    finally:
        asyncio.run(pool.aclose())
    return result
