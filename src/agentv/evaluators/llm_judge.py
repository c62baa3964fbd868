"""The ``llm_judge`` evaluator: a language model grades the answer (reference 9.2).

The judge gets two messages: a system prompt describing the JSON verdict it must give, and
a user prompt with ``[[ ## ... ## ]]`` sections. The ``question`` section holds exactly the
question the candidate got (docs/prompt-rules.md section 7); guideline text is not copied in.

A custom prompt (the evaluator's ``prompt``) with at least one ``{{ variable }}`` or
``${variable}`` becomes the user prompt after substitution; without any variable it
replaces the system prompt; a ``prompt`` that names a file is read when the eval file is
loaded. The judge's reply is parsed tolerantly (code fences, prose around the JSON); a reply
without a usable verdict is a judge failure, not a score.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import field_validator

from agentv.cases import EvaluatorConfig
from agentv.errors import BudgetReached, ProviderError
from agentv.evaluators.base import (
    EvaluationContext,
    EvaluatorScore,
    EvaluatorSpec,
    Loading,
    as_score,
    excerpt,
    failed,
    text_list,
)
from agentv.evaluators.samples import (
    MAX_SAMPLES,
    OnUncertain,
    SampleRule,
    representative,
    spread,
)
from agentv.messages import FileSegment, GuidelineRef, Message, TextSegment
from agentv.prompts.builder import request_messages
from agentv.providers.base import ProviderRequest, total_usage

if TYPE_CHECKING:
    from agentv.cases import EvalCase

_REFERENCE_LINE = (
    "Use the reference_answer as a gold standard for a high-quality response. The "
    "candidate_answer does not need to match it verbatim, but should capture the key points "
    "and follow the same spirit."
)


def _system_prompt(with_reference: bool) -> str:
    lines = [
        "You are an expert evaluator. Your goal is to grade the candidate_answer based on how "
        "well it achieves the expected_outcome for the original task.",
        "",
    ]
    if with_reference:
        lines += [_REFERENCE_LINE, ""]
    lines += [
        "Be concise and focused in your evaluation. Provide succinct, specific feedback rather "
        "than verbose explanations.",
        "",
        "You must respond with a single JSON object matching this schema:",
        "",
        "{",
        '  "score": <number between 0.0 and 1.0>,',
        '  "hits": [<array of strings, max 4 items, brief specific achievements>],',
        '  "misses": [<array of strings, max 4 items, brief specific failures or omissions, '
        "empty if none>],",
        '  "reasoning": "<string, concise explanation for the score, 1-2 sentences max>"',
        "}",
    ]
    return "\n".join(lines)


#: the default judge system prompt, without and with a reference answer
SYSTEM_PROMPT = _system_prompt(False)
SYSTEM_PROMPT_WITH_REFERENCE = _system_prompt(True)

MAX_ITEMS = 4  # hits and misses kept from a judge's verdict, each


def default_user_prompt(outcome: str, question: str, reference_answer: str, candidate: str) -> str:
    """The ``[[ ## section ## ]]`` user prompt; the reference section only when non-blank."""
    lines = ["[[ ## expected_outcome ## ]]", outcome.strip(), "", "[[ ## question ## ]]"]
    lines += [question, ""]  # exactly the question the candidate got
    if reference_answer.strip():
        lines += ["[[ ## reference_answer ## ]]", reference_answer.strip(), ""]
    lines += ["[[ ## candidate_answer ## ]]", candidate.strip()]
    return "\n".join(lines)


# --- custom prompt variables ------------------------------------------------------------------

# `{{ name }}` is what the documentation promised, `${name}` is what the original AgentV ran.
_VARIABLE = re.compile(r"\{\{\s*(\w+)\s*\}\}|\$\{\s*(\w+)\s*\}")


def has_variables(template: str) -> bool:
    """True when the text has at least one ``{{ name }}`` or ``${name}`` token."""
    return _VARIABLE.search(template) is not None


def substitute(template: str, values: dict[str, str]) -> str:
    """Replace known ``{{ name }}`` / ``${name}`` tokens; unknown names are left as written."""

    def replace(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        value = values.get(name)
        return match.group(0) if value is None else value

    return _VARIABLE.sub(replace, template)


def _segment_dict(seg: TextSegment | FileSegment | GuidelineRef) -> dict[str, str]:
    match seg:
        case TextSegment():
            return {"type": "text", "value": seg.value}
        case FileSegment():
            return {"type": "file", "path": seg.path, "text": seg.text}
        case GuidelineRef():
            # the guideline's text is not copied into the judge prompt
            # (docs/prompt-rules.md section 7)
            return {"type": "guideline", "path": seg.path}
    raise TypeError(f"unknown segment {seg!r}")  # pragma: no cover


def messages_json(messages: Sequence[Message]) -> str:
    """The conversation as 2-space JSON: ``[{role, content: [segments]}, ...]``."""
    out: list[dict[str, Any]] = []
    for msg in messages:
        item: dict[str, Any] = {
            "role": msg.role,
            "content": [_segment_dict(s) for s in msg.segments],
        }
        if msg.tool_calls:
            item["tool_calls"] = [c.to_dict() for c in msg.tool_calls]
        if msg.tool_call_id is not None:
            item["tool_call_id"] = msg.tool_call_id
        out.append(item)
    return json.dumps(out, indent=2, ensure_ascii=False)


def template_values(case: EvalCase, question: str, candidate: str) -> dict[str, str]:
    """The values a custom judge prompt can use."""
    return {
        "question": question,
        "expected_outcome": case.outcome,
        "reference_answer": case.reference_answer,
        "candidate_answer": candidate,
        "input_messages": messages_json(case.input_messages),
        "output_messages": messages_json(case.expected_messages),
    }


def judge_prompts(ctx: EvaluationContext, config: EvaluatorConfig) -> tuple[str, str]:
    """(system prompt, user prompt) for one judge call."""
    case = ctx.case
    question = ctx.prompt.question
    with_reference = bool(case.reference_answer.strip())
    system = SYSTEM_PROMPT_WITH_REFERENCE if with_reference else SYSTEM_PROMPT
    # A prompt file's final newline is not part of the prompt (docs/prompt-rules.md).
    custom = (config.prompt_text or "").rstrip()
    if custom.strip():
        if has_variables(custom):
            return system, substitute(custom, template_values(case, question, ctx.candidate))
        system = custom
    user = default_user_prompt(case.outcome, question, case.reference_answer, ctx.candidate)
    return system, user


# --- the judge's reply --------------------------------------------------------------------------


@dataclass(slots=True)
class Verdict:
    """A judge's parsed verdict."""

    score: float
    hits: list[str]
    misses: list[str]
    reasoning: str | None


_FENCED = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n?(.*?)```", re.DOTALL)


def _candidates(text: str) -> Iterator[str]:
    yield text
    for match in _FENCED.finditer(text):
        yield match.group(1)
    first, last = text.find("{"), text.rfind("}")
    if 0 <= first < last:
        yield text[first : last + 1]


def parse_verdict(text: str) -> Verdict | None:
    """The verdict in a judge's reply, or None when there is no usable one.

    Tried in order: the whole reply, the inside of each code fence, the text from the first
    ``{`` to the last ``}``, then the JSON object starting at each ``{``. The first JSON
    object with a numeric ``score`` wins; the score is clamped into [0, 1] and hits/misses
    keep at most 4 non-blank strings.
    """
    text = text.strip()
    if not text:
        return None
    for candidate in _candidates(text):
        try:
            verdict = _verdict(json.loads(candidate))
        except ValueError:
            continue
        if verdict is not None:
            return verdict
    # prose with braces around the object: decode from each opening brace in turn
    start = text.find("{")
    for _ in range(_MAX_OPENINGS):
        if start < 0:
            break
        try:
            verdict = _verdict(_DECODER.raw_decode(text, start)[0])
        except ValueError:
            verdict = None
        if verdict is not None:
            return verdict
        start = text.find("{", start + 1)
    return None


_DECODER = json.JSONDecoder()
_MAX_OPENINGS = 50


def _verdict(data: object) -> Verdict | None:
    if not isinstance(data, dict):
        return None
    score = as_score(data.get("score"))
    if score is None:
        return None
    reasoning = data.get("reasoning")
    return Verdict(
        score=score,
        hits=text_list(data.get("hits"), MAX_ITEMS),
        misses=text_list(data.get("misses"), MAX_ITEMS),
        reasoning=reasoning.strip() if isinstance(reasoning, str) and reasoning.strip() else None,
    )


# --- the evaluator ---------------------------------------------------------------------------

_REQUEST_IDS = uuid.UUID("5d1f7f3e-6a3c-4a57-9a7e-3f0b2f4e8c11")


SAMPLES_HINT = f"samples is a number from 1 to {MAX_SAMPLES}, or {{min, max, margin}}"

#: a single-line ``prompt`` ending like this was meant as a file: an error when none is found
_PROMPT_FILE_SUFFIXES = (".md", ".txt", ".prompt")


class LlmJudgeSpec(EvaluatorSpec):
    """Grades with a language model, the case's judge target: asks it for a JSON verdict
    and records exactly what was asked. ``prompt`` is a file or inline text. ``samples``:
    how many times it is asked about one answer (a number, or ``{min, max, margin}``);
    ``on_uncertain``: what its samples disagreeing about pass or fail makes of the case
    (``evaluators.samples``)."""

    type: Literal["llm_judge"]
    prompt: str | None = None
    model: str | None = None
    samples: SampleRule | None = None
    on_uncertain: OnUncertain | None = None

    @field_validator("samples", mode="before")
    @classmethod
    def _samples(cls, value: Any) -> Any:
        # a number is that many samples, exactly (``{min: N, max: N}``)
        if isinstance(value, bool):
            raise ValueError(SAMPLES_HINT)
        if isinstance(value, int):
            if not 1 <= value <= MAX_SAMPLES:
                raise ValueError(SAMPLES_HINT)
            return SampleRule.fixed(value)
        return value

    key_hints: ClassVar[Mapping[str, str]] = {
        **EvaluatorSpec.key_hints,
        "samples": SAMPLES_HINT,
        "on_uncertain": "on_uncertain is uncertain, fail or pass",
    }

    uses_judge: ClassVar[bool] = True

    def resolve(self, name: str, at: Loading) -> EvaluatorConfig:
        """A ``prompt`` is a file when one is found, else inline text (as the original
        AgentV: docs/architecture.md, "Compatibility")."""
        prompt = self.prompt
        if not prompt or "\n" in prompt:
            return EvaluatorConfig(name, self, prompt_text=prompt or None)
        looks_like_path = prompt.strip().lower().endswith(_PROMPT_FILE_SUFFIXES)
        found = at.reference(
            prompt.strip(), "prompt", "judge prompt file", must_exist=looks_like_path
        )
        if found is None:
            return EvaluatorConfig(name, self, prompt_text=prompt)
        path, text = found
        return EvaluatorConfig(name, self, prompt_text=text, prompt_path=path)

    def sample_rule(self, ctx: EvaluationContext) -> SampleRule | None:
        """How many times this judge is asked about one answer: its own ``samples``, else
        the run's (None: once)."""
        return self.samples or ctx.judge_samples

    async def evaluate(self, ctx: EvaluationContext, config: EvaluatorConfig) -> EvaluatorScore:
        judge = ctx.judge
        if judge is None:
            return failed(
                config,
                "no judge target available for LLM grading; set `judge_target` on the "
                "target in targets.yaml",
            )
        model = self.model
        system, user = judge_prompts(ctx, config)
        raw: dict[str, Any] = {
            # derived from the request, so identical requests get identical records
            "id": str(uuid.uuid5(_REQUEST_IDS, f"{judge.id}\0{system}\0{user}\0{model}")),
            "provider": judge.id,
            "prompt": user,
            "system_prompt": system,
            "target": ctx.target_name,
        }
        if model:
            raw["model"] = model
        rule = self.sample_rule(ctx)
        if rule is None or rule.single:
            return await self._ask(ctx, config, judge, system, user, raw, sample=0)
        threshold = self.threshold if self.threshold is not None else ctx.pass_threshold
        asked: list[EvaluatorScore] = []
        while rule.wants_more([a.score for a in asked], threshold):
            one = await self._ask(ctx, config, judge, system, user, raw, sample=len(asked))
            asked.append(one)
            if one.error is not None:
                break  # a sample without a verdict: the judge could not grade this answer
        return _combined(config, asked, threshold, raw, self.on_uncertain or ctx.on_uncertain)

    async def _ask(
        self,
        ctx: EvaluationContext,
        config: EvaluatorConfig,
        judge: Any,
        system: str,
        user: str,
        raw: dict[str, Any],
        *,
        sample: int,
    ) -> EvaluatorScore:
        """One verdict of the judge (sample number ``sample``, from 0)."""
        model = self.model
        # The judge's own two messages: its system prompt and the grading request. A CLI
        # judge gets the request as its {PROMPT}, like any question.
        request = ProviderRequest(
            question=user,
            messages=request_messages(user, system_prompt=system),
            model=model,
            eval_id=ctx.case.id,
            attempt=ctx.attempt,
            repeat=ctx.repeat,
            party="judge",
            sample=sample,
            # bounded as the target's requests are (the run's --agent-timeout), not by the
            # long default of a request without any limit: a hung judge fails its case in time
            timeout=ctx.timeout,
        )
        started = time.perf_counter()
        try:
            response = await judge.invoke(request)
        except BudgetReached:
            raise  # not a failure of the judge: the case is not graded (``skipped``)
        except ProviderError as exc:
            return failed(config, f"judge target '{exc.target}' failed: {exc}", raw_request=raw)
        except Exception as exc:
            return failed(
                config, f"judge call failed: {exc or type(exc).__name__}", raw_request=raw
            )
        latency = response.latency_ms
        if latency is None:
            latency = (time.perf_counter() - started) * 1000
        # what the judge said, as it said it (a sampled judge's replies: in its samples)
        reply = response.text or ""
        if sample == 0:
            raw["reply"] = reply
        verdict = parse_verdict(reply)
        if verdict is None:
            said = excerpt(reply)
            reason = (
                f"judge reply has no JSON verdict with a numeric score: {said!r}"
                if said
                else "judge returned an empty reply"
            )
            if response.finish_reason == "length":
                # the likely cause: a verdict cut off by the judge target's own limit
                reason += (
                    " (the reply was cut at the judge's output token limit; raise "
                    "max_output_tokens on the judge target)"
                )
            miss = failed(config, reason, raw_request=raw, usage=response.usage, latency_ms=latency)
            miss.cached = response.cached
            miss.cost_usd = response.cost_usd
            miss.reasoning = reply or None
            return miss
        return EvaluatorScore(
            name=config.name,
            type=config.type,
            score=verdict.score,
            hits=verdict.hits,
            misses=verdict.misses,
            reasoning=verdict.reasoning or response.reasoning,
            raw_request=raw,
            expected_aspect_count=max(len(verdict.hits) + len(verdict.misses), 1),
            usage=response.usage,
            latency_ms=latency,
            cached=response.cached,
            cost_usd=response.cost_usd,
        )


def _sample_dict(one: EvaluatorScore) -> dict[str, Any]:
    """One sample as its judge's entry records it."""
    out: dict[str, Any] = {"score": one.score, "hits": one.hits, "misses": one.misses}
    if one.error is not None:
        out["error"] = one.error
        if one.reasoning:
            out["reply"] = one.reasoning  # what the judge said instead of a verdict
    elif one.reasoning:
        out["reasoning"] = one.reasoning
    if one.usage is not None:
        out["usage"] = one.usage.to_dict()
    if one.cost_usd is not None:
        out["cost_usd"] = round(one.cost_usd, 10)
    if one.latency_ms is not None:
        out["latency_ms"] = round(one.latency_ms, 3)
    if one.cached:
        out["cached"] = True
    return out


def _combined(
    config: EvaluatorConfig,
    asked: list[EvaluatorScore],
    threshold: float,
    raw: dict[str, Any],
    on_uncertain: str | None,
) -> EvaluatorScore:
    """A sampled judge's entry: the samples' mean, the representative sample's hits,
    misses and reasoning, every sample recorded, their spread and votes; the judge's
    failure when a sample had no verdict."""
    usage = total_usage(a.usage for a in asked)
    costs = [a.cost_usd for a in asked]
    latency = sum(a.latency_ms or 0.0 for a in asked)
    samples = [_sample_dict(a) for a in asked]
    broken = next((a for a in asked if a.error is not None), None)
    if broken is not None:
        reason = f"sample {len(asked)} of the judge failed: {broken.error}"
        miss = failed(config, reason, raw_request=raw, usage=usage, latency_ms=latency)
        miss.samples = samples
        miss.cached = all(a.cached for a in asked)
        miss.cost_usd = None if any(c is None for c in costs) else sum(c or 0.0 for c in costs)
        return miss
    scores = [a.score for a in asked]
    found = spread(scores, threshold)
    shown = asked[representative(scores)]
    return EvaluatorScore(
        name=config.name,
        type=config.type,
        score=found.mean,
        hits=shown.hits,
        misses=shown.misses,
        reasoning=shown.reasoning,
        raw_request=raw,
        expected_aspect_count=shown.expected_aspect_count,
        usage=usage,
        latency_ms=latency,
        cached=all(a.cached for a in asked),
        cost_usd=None if any(c is None for c in costs) else sum(c or 0.0 for c in costs),
        samples=samples,
        spread=found,
        on_uncertain=on_uncertain,
    )
