"""Grading again the answers a results file recorded, with the evaluators the eval files
hold now, without asking any target again (``agentv regrade``, docs/after-the-run.md).

Each latest record of the file is matched to its case in the current eval files (by file,
dataset and id) and its target in targets.yaml (by the name it was recorded with). Its
prompt is built again, as a run builds it: when it differs from what the record says was
sent, the answer belongs to another question and the record is not regraded (it is
reported, and copied as it was: ``agentv eval --resume`` on the new file runs it again).
Otherwise the case's evaluators grade the recorded answer, through the same ``Sender`` a
run uses (``agentv.run.sending``): a judge is sent through its gate, the cache and the
meter, as in a run; the target is never asked. The new record keeps what was sent and answered
(request, answer, tokens, time), marked ``cached`` (nothing was sent for it this time), its
target's cost counted as reused.

Not regraded, and copied as they were: records of cases no longer in the eval files or of
targets no longer in targets.yaml, records without an answer (``error`` before the target
answered, ``invalid``, ``skipped`` before its request was sent) and live conversations
(``turns``): their turns' questions were built from earlier answers and tool results that
the record holds only as text, so grading them again could not promise the same
questions; ``agentv eval`` runs them again.

The results file streams through: read once to learn its latest records and the eval
files they name (those outside the repository root are not read unless allowed), then
again, each record graded and handed on in the file's order while the next ones are.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentv.cases import EvalCase
from agentv.errors import AgentVError, ConfigError, Diagnostic, InputError
from agentv.evalfile.files import FileStore, find_repo_root, is_within
from agentv.evalfile.loader import LoadContext, iter_cases, load_eval_file
from agentv.evaluators.grading import needs_judge
from agentv.prompts.builder import Prompt, PromptSettings, build_prompt
from agentv.providers.base import ProviderResponse, Usage
from agentv.results.flips import FlipTally, run_verdicts
from agentv.results.outcome import result_record, store_large_once
from agentv.results.reader import ResultsReader, read_results
from agentv.results.record import (
    ERROR,
    GRADED,
    SKIPPED,
    EvalResult,
    RunKey,
    put_back_large_content,
)
from agentv.run.costs import CASE_COST, CaseCost
from agentv.run.plan import CaseJob
from agentv.run.resume import Previous, prompt_changed
from agentv.run.sending import RunSettings, RunStats, Sender, target_workers
from agentv.system.masking import Masker, masking_scope
from agentv.targets import RunTarget, TargetPool

#: what a record keeps of what was sent: copied into its regraded record as it was
_SENT_FIELDS = ("lm_provider_request", "agent_provider_request", "raw_request", "large_content")


@dataclass
class Regraded:
    """What a regrade did: how many records it regraded, and every record it could not
    regrade, by why (``(eval_id, target, reason)``); every record went to ``emit`` in the
    results file's order."""

    regraded: int = 0
    #: each evaluator's verdicts that the regrade flipped (``agentv.results.flips``)
    flips: FlipTally = field(default_factory=FlipTally)
    prompt_changed: list[tuple[str, str]] = field(default_factory=list)  # (eval id, target)
    not_regraded: list[tuple[str, str, str]] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    #: eval files the records name that were not read: outside the repository root
    outside: set[Path] = field(default_factory=set)
    stats: RunStats = field(default_factory=RunStats)
    spent_usd: float = 0.0  # the judges' requests
    reused_usd: float = 0.0


class _Nothing:
    def note(self, text: str) -> None:
        pass


#: records graded at once (each judge's gate keeps to its own limit), as a run would send
_AT_ONCE = 16
#: records read ahead of the one written next: the file streams through in this many
_WINDOW = 64


async def regrade_file(
    source: Path,
    pool: TargetPool,
    settings: RunSettings,
    emit: Callable[[dict[str, Any]], None],
    *,
    cwd: Path,
    eval_files: list[Path] | None = None,
    context: LoadContext | None = None,
    progress: Any = None,
    config_thresholds: bool = True,
    origin: str | None = None,
) -> Regraded:
    """Regrade the latest records of the results file ``source`` with the cases of
    ``eval_files`` (default: the files the records name, those inside the repository
    root unless the context allows others) and the targets of ``pool``; each new record
    goes to ``emit`` in the file's order. The file is read twice, a record at a time:
    memory holds the records in flight, not the file. ``InputError`` when it holds no
    result. ``origin``: what each regraded record names as the file whose answer it grades
    (``regraded_from``). Each regraded run's verdicts are weighed against its record's
    at the threshold it was graded at (``Regraded.flips``)."""
    context = context or LoadContext(store=FileStore(cwd=cwd))
    done = Regraded()
    reader = read_results(source)
    last: dict[RunKey, int] = {}
    named: set[str] = set()
    wanted: set[tuple[str, str]] = set()  # (eval file, target): built before grading
    for line, result in reader:
        last[result.run_key] = line
        if result.eval_file:
            named.add(result.eval_file)
            wanted.add((result.eval_file, result.target or ""))
    done.diagnostics.extend(reader.diagnostics)
    if not last:
        raise InputError(f"{source} holds no result to regrade", reader.diagnostics)
    by_file = eval_files is None  # named files: matched by dataset and id wherever they are
    if eval_files is None:
        eval_files = _named_files(named, cwd, context, done)
    cases, thresholds = _cases(eval_files, context, done, by_file=by_file)
    if not config_thresholds:
        thresholds = {}
    for name, target in sorted(wanted):  # every target's secrets known before grading
        path = (cwd / name).resolve()
        if path in done.outside:
            continue
        with contextlib.suppress(AgentVError):
            built = pool.target(path, find_repo_root(path.parent, cwd), target)
            pool.check_judge(built)
    # every target and judge the records name is built by now: their secrets are known
    sender = Sender(
        settings,
        judge_of=lambda target: _judge_of(pool, settings, target),
        stats=done.stats,
        progress=progress or _Nothing(),
        masker=Masker(pool.run_secrets()),
    )
    # as many at once as a run would send; each judge's gate keeps to its own limit
    limit = asyncio.Semaphore(_AT_ONCE)

    async def one(job: CaseJob, prompt: Prompt, result: EvalResult) -> dict[str, Any]:
        async with limit:
            record = await _regrade(sender, job, prompt, result)
        if origin is not None:
            record["regraded_from"] = origin
        threshold = job.pass_threshold
        if threshold is None:
            threshold = settings.pass_threshold
        before = run_verdicts(result, threshold)
        if before:
            after = run_verdicts(EvalResult.from_record(record), threshold)
            done.flips.add(result.run_key, before, after)
        return record

    keep = set(last.values())
    last.clear()
    window: deque[asyncio.Task[dict[str, Any]] | dict[str, Any]] = deque()

    async def write_first() -> None:
        item = window.popleft()
        emit(item if isinstance(item, dict) else await item)

    try:
        for line, result in ResultsReader(source):
            if line not in keep:
                continue  # a later record of the same run supersedes it
            job, prompt, why = _job(result, cases, thresholds, pool, cwd, by_file=by_file)
            outside = by_file and result.eval_file and (cwd / result.eval_file).resolve()
            if job is None and why is not None and outside in done.outside:
                why = "its eval file is outside the repository root (not read)"
            if job is None or prompt is None:
                if why == "prompt":
                    done.prompt_changed.append((result.eval_id or "", result.target or ""))
                elif why is not None:
                    done.not_regraded.append((result.eval_id or "", result.target or "", why))
                window.append(_as_recorded(result))
            else:
                done.regraded += 1
                window.append(asyncio.ensure_future(one(job, prompt, result)))
            while window and (
                len(window) > _WINDOW or isinstance(window[0], dict) or window[0].done()
            ):
                await write_first()
        while window:
            await write_first()
    finally:
        for item in window:  # a write failed, or the regrade was cancelled
            if not isinstance(item, dict):
                item.cancel()
        await pool.aclose()
    done.spent_usd = sender.meter.spent
    done.reused_usd = sender.meter.reused
    return done


def _named_files(named: set[str], cwd: Path, context: LoadContext, done: Regraded) -> list[Path]:
    """The eval files the records name, those outside the repository root left out (and
    said) unless the context allows them: a results file may come from anywhere, and the
    files it names are read as an eval file's references are."""
    root = find_repo_root(cwd, cwd)
    files: list[Path] = []
    for path in sorted({(cwd / name).resolve() for name in named}):
        if not context.allow_outside_root and not is_within(path, root):
            done.diagnostics.append(
                Diagnostic(
                    path,
                    f"the eval file resolves outside the repository root ({root}): it was "
                    "not read, and its records are not regraded",
                    hint="name it with --evals, or pass --allow-outside-root if you trust "
                    "the results file",
                )
            )
            done.outside.add(path)
            continue
        files.append(path)
    return files


def _judge_of(pool: TargetPool, settings: RunSettings, target: RunTarget) -> tuple[Any, int]:
    judge = pool.judge(target)
    own = pool.owner(judge)
    return judge, target_workers(settings, own) if own is not None else 3


def _cases(
    eval_files: list[Path],
    context: LoadContext,
    done: Regraded,
    *,
    by_file: bool,
) -> tuple[dict[tuple[Path | None, str, str], EvalCase], dict[Path, float | None]]:
    """Every case of the eval files, by (file, dataset, id) (``by_file``) or by (dataset,
    id), and each file's pass threshold (its config's)."""
    cases: dict[tuple[Path | None, str, str], EvalCase] = {}
    thresholds: dict[Path, float | None] = {}
    for path in eval_files:
        path = path.resolve()
        if not path.is_file():
            done.diagnostics.append(
                Diagnostic(path, "the eval file is not there: its records are not regraded")
            )
            continue
        try:
            loaded = load_eval_file(path, context=context)
        except InputError as exc:
            done.diagnostics.extend(exc.diagnostics or [Diagnostic(path, str(exc))])
            continue
        done.diagnostics.extend(loaded.diagnostics)
        config, _ = context.guidelines.for_eval_dir(path.parent, loaded.repo_root)
        thresholds[path] = config.pass_threshold
        for case in iter_cases(loaded, context=context):
            cases[(path if by_file else None, case.dataset, case.id)] = case
    return cases, thresholds


def _job(
    result: EvalResult,
    cases: dict[tuple[Path | None, str, str], EvalCase],
    thresholds: dict[Path, float | None],
    pool: TargetPool,
    cwd: Path,
    *,
    by_file: bool,
) -> tuple[CaseJob | None, Prompt | None, str | None]:
    """The job that regrades ``result`` and its prompt (as a run builds it, the same as
    the record's), or None and why not ("prompt": its prompt changed)."""
    if not _has_answer(result):
        return None, None, f"no answer was recorded (status {result.status})"
    if result.turns is not None:
        return None, None, "a live conversation: run it again with agentv eval"
    path = (cwd / result.eval_file).resolve() if result.eval_file else None
    case = cases.get((path if by_file else None, result.dataset, result.eval_id or ""))
    if case is None:
        return None, None, "the case is no longer in the eval files"
    path = case.eval_file
    try:
        target = pool.target(path, find_repo_root(path.parent, cwd), result.target or "")
    except AgentVError as exc:
        return None, None, f"its target cannot be used: {exc}"
    prompt = build_prompt(case, PromptSettings.of(target.provider))
    raw = result.raw_request or {}
    raw = put_back_large_content(raw, result.large_content or {})
    previous = Previous(result.status, raw.get("question"), raw.get("chat_prompt"))
    if prompt_changed(previous, prompt, is_agent=target.provider.is_agent):
        return None, None, "prompt"
    if needs_judge(case):
        try:
            pool.check_judge(target)
        except ConfigError as exc:
            return None, None, f"its judge cannot be used: {exc}"
    return CaseJob(case, target, thresholds.get(path), result.repeat or 0), prompt, None


def _has_answer(result: EvalResult) -> bool:
    """Whether the record holds the target's answer: graded, or an error of its evaluators
    (they ran: the target had answered), or skipped after the target answered."""
    if result.status in GRADED:
        return True
    if result.status == ERROR:
        return result.evaluator_results is not None or result.evaluator_raw_request is not None
    if result.status == SKIPPED:
        return result.usage is not None or result.latency_ms is not None
    return False


def _response(result: EvalResult) -> ProviderResponse:
    """The recorded answer, as reused (nothing is sent for it)."""
    return ProviderResponse(
        text=result.candidate_answer,
        usage=Usage.from_dict(result.usage),
        latency_ms=result.latency_ms,
        attempts=0,
        cached=True,
        finish_reason=result.finish_reason,
        finish_reason_raw=result.finish_reason_raw,
    )


def _target_cost(result: EvalResult) -> float | None:
    """The recorded price of the target's answer (spent then, or reused then)."""
    entry = (result.cost or {}).get("target")
    if not isinstance(entry, dict):
        return None
    values = [v for v in (entry.get("usd"), entry.get("reused_usd")) if isinstance(v, int | float)]
    return float(sum(values)) if values else None


async def _regrade(
    sender: Sender, job: CaseJob, prompt: Prompt, result: EvalResult
) -> dict[str, Any]:
    """The regraded record of ``result``."""
    case, target, settings = job.case, job.target, sender.settings
    cost = CaseCost()
    token = CASE_COST.set(cost)
    try:
        with masking_scope(sender.masker):
            response = _response(result)
            price = _target_cost(result)
            entry = (result.cost or {}).get("target")
            if price is not None or (isinstance(entry, dict) and entry.get("unpriced")):
                cost.add("candidate", price, reused=True, priced=price is not None)
            grade = await sender.grade(
                job,
                case,
                prompt,
                result.candidate_answer,
                sender.judge(case, target),
                latency_ms=result.latency_ms,
                cost_usd=price,
            )
            threshold = job.pass_threshold
            record = result_record(
                case,
                target=target.name,
                provider=target.provider,
                prompt=prompt,
                response=response,
                grade=grade,
                duration_ms=result.duration_ms or 0.0,
                pass_threshold=threshold if threshold is not None else settings.pass_threshold,
                attempts=0,
                repeat=job.repeat,
                cost=cost.to_dict(),
            )
    finally:
        CASE_COST.reset(token)
    for key in _SENT_FIELDS:  # what was sent then, exactly as recorded
        value = getattr(result, key)
        if key == "large_content" and value is not None:
            value = {**value, **record.get(key, {})}  # and the new grading's large texts
        if value is not None:
            record[key] = value
        else:
            record.pop(key, None)
    if result.token_limit_ignored:
        record["token_limit_ignored"] = True
    return sender.masker.record(record)


def _as_recorded(result: EvalResult) -> dict[str, Any]:
    """A record copied as it was: its large answers stored once again, as written."""
    record = result.model_dump(mode="json")
    store_large_once(record)
    return record


def default_regrade_path(results: Path) -> Path:
    """``RESULTS.regraded.jsonl`` beside the results file (its own extension)."""
    return results.with_name(f"{results.stem}.regraded{results.suffix or '.jsonl'}")
