"""The end-of-run summary as people read it: every broken case and evaluator named, the
counts by status, the pass rate, tokens, retries, cache reuse and wall time. Every line
fits in 80 columns (ids and messages aside) and holds no terminal markup."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from agentv.cli.common import format_usd, printable

if TYPE_CHECKING:
    from agentv.api import GateStats, Summary, Tokens, TurnStats

_RULE = "=" * 50


@dataclass
class RunFacts:
    """What the run did beyond the results: for the summary's closing lines."""

    pass_threshold: float | None = None
    dry_run: bool = False
    #: target -> HTTP status (None: no answer) -> retries made
    retries: Mapping[str, Mapping[int | None, int]] = field(default_factory=dict)
    cache_hits: int | None = None  # None: --cache was off
    judge_cache_hits: int = 0
    requests: int = 0
    #: target -> its gate's figures (requests, throttled answers, time paused)
    load: Mapping[str, GateStats] = field(default_factory=dict)
    wall_seconds: float | None = None
    unusable_files: list[Path] = field(default_factory=list)
    #: when the summary is a whole results file's: the runs this invocation ran
    ran: int | None = None
    #: US dollars this invocation's requests spent, and the price of the answers it reused
    spent_usd: float | None = None
    reused_usd: float = 0.0
    unpriced: list[str] = field(default_factory=list)  # targets without a price, and why
    budget_usd: float | None = None


def _indent_message(message: str) -> list[str]:
    # no line of only spaces: blank lines (also of spaces or tabs) print empty, and none
    # lead or trail
    lines = [line.rstrip() for line in message.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    start = next((i for i, line in enumerate(lines) if line), len(lines))
    return [f"   {line}" if line else "" for line in lines[start:]] or [""]


def _count(number: int, noun: str) -> str:
    """``1 target answer``, ``3 target answers``."""
    return f"{number:,} {noun}{'' if number == 1 else 's'}"


def _clock(seconds: float) -> str:
    whole = max(0, int(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"


def _tokens(tokens: Tokens) -> str:
    text = f"in {tokens.input:,} / out {tokens.output:,}"
    if tokens.reused:  # answers from --cache: their tokens were not spent again
        text += f" (reused: in {tokens.reused_input:,} / out {tokens.reused_output:,})"
    return text


def _retries(by_status: Mapping[int | None, int]) -> str:
    parts = []
    for status, count in sorted(by_status.items(), key=lambda kv: -kv[1]):
        what = {None: "no answer", 200: "empty answer", 429: "429"}.get(status, f"HTTP {status}")
        parts.append(f"{what} x{count}")
    return f"{sum(by_status.values())} ({', '.join(parts)})"


def _k(count: int) -> str:
    return f"{count / 1000:.1f}k" if count >= 10_000 else str(count)


def _runs_line(summary: Summary) -> str:
    """``Total eval cases: 4``, or with several runs a case: how the runs come about."""
    if summary.total == summary.cases:
        return f"Total eval cases: {summary.total}"
    targets, repeats = len(summary.targets), summary.repeats
    line = f"Runs: {summary.total} of {_count(summary.cases, 'eval case')}"
    if summary.total == summary.cases * targets * repeats:
        factors = [_count(targets, "target")] if targets > 1 else []
        factors += [_count(repeats, "repeat")] if repeats > 1 else []
        line += f" ({' x '.join(factors)})"
    return line


def _pass_rate_line(summary: Summary, threshold: str) -> str:
    """``Pass rate: 50.0% (1 of 2 graded runs, ...)``: over the graded runs only (errors
    are not scores, docs/results.md)."""
    if not summary.graded:
        return "Pass rate: - (no run was graded)"
    rate = summary.pass_rate or 0.0
    if summary.graded == summary.total:
        of = f"{summary.total} runs" if summary.total != summary.cases else str(summary.total)
    else:
        of = f"{summary.graded} graded runs; {summary.total - summary.graded} not graded"
    return f"Pass rate: {rate:.1%} ({summary.ok} of {of}{threshold})"


def _turns_line(t: TurnStats) -> str:
    """``Conversations: 3 (12 turns; 10 graded, 8 passed, mean 0.850; 1 stopped early)``."""
    parts = [_count(t.turns, "turn")]
    if t.graded:
        parts.append(f"{t.graded} graded, {t.passed} passed, mean {t.mean:.3f}")
    if t.tool_calls:
        parts.append(_count(t.tool_calls, "tool call"))
    if t.stopped:
        parts.append(f"{t.stopped} stopped early")
    return f"Conversations: {t.conversations} ({'; '.join(parts)})"


def _evaluators_block(summary: Summary) -> list[str]:
    """Each evaluator with its weight, whether it is required, its threshold and how it
    graded: shown when some evaluator has other settings than the defaults."""
    rows = summary.evaluators[:EVALUATOR_ROWS]
    width = min(24, max(9, *(len(e.name) for e in rows)))
    lines = [
        "Evaluators (weighted mean; a required one that misses fails the run):",
        f"  {'evaluator':<{width}} {'weight':>6} {'required':>8} {'thresh':>6} {'mean':>6} "
        f"{'passed':>9} {'failed':>6}",
    ]
    for e in rows:
        weight = f"{e.weight:g}" if e.weight is not None else "mixed"
        threshold = f"{e.threshold:.2f}" if e.threshold is not None else "-"
        mean = f"{e.mean:.3f}" if e.mean is not None else "-"
        passed = f"{e.passed}/{e.judged}" if e.judged else "-"
        lines.append(
            f"  {e.name[:width]:<{width}} {weight:>6} {'yes' if e.required else 'no':>8} "
            f"{threshold:>6} {mean:>6} {passed:>9} {e.failed_cases:>6}"
        )
    if len(summary.evaluators) > EVALUATOR_ROWS:
        lines.append(f"  ... and {len(summary.evaluators) - EVALUATOR_ROWS} more (--summary-json)")
    return lines


#: evaluators listed in the summary's table at most
EVALUATOR_ROWS = 20


def _score_lines(summary: Summary) -> list[str]:
    """The score statistics, distribution and ranking; one line when no run was graded."""
    if summary.mean is None:
        return ["Scores: none (no run was graded: every run errored or was invalid)"]
    over = "" if summary.graded == summary.total else f" (over {summary.graded} graded runs)"
    lines = [
        f"Mean score: {summary.mean:.3f}{over}",
        f"Median score: {summary.median:.3f}",
        f"Min score: {summary.min:.3f}",
        f"Max score: {summary.max:.3f}",
    ]
    if summary.std_dev is not None:
        lines.append(f"Std deviation: {summary.std_dev:.3f}")
    lines += ["", "Score distribution:"]
    lines += [f"  {b.label}: {b.count}" for b in summary.histogram]
    lines += ["", "Top performing eval cases:" if summary.bottom else "Eval cases by score:"]
    lines += [f"  {rank}. {eid}: {score:.3f}" for rank, (eid, score) in enumerate(summary.top, 1)]
    return lines


def _targets_block(summary: Summary) -> list[str]:
    """Targets side by side; with repeats, pass@k, pass^k and flaky cases; for a small
    suite on several targets, a score per case and target."""
    width = min(20, max(6, *(len(t.name) for t in summary.targets)))
    runs = f" over {summary.repeats} runs" if summary.repeats > 1 else ""
    lines = [
        f"Targets (mean of graded case means{runs}, 95% interval):",
        f"  {'target':<{width}} {'mean':>5} {'interval':<14} {'pass':>6} {'err':>4} "
        f"{'tokens in/out':>13} {'p50/p95 ms':>12}",
    ]
    for t in summary.targets:
        mean = f"{t.mean:.3f}" if t.mean is not None else "-"
        ci = f"[{t.ci[0]:.2f}, {t.ci[1]:.2f}]" if t.ci is not None else "-"
        rate = f"{t.pass_rate:.1%}" if t.pass_rate is not None else "-"
        tokens = f"{_k(t.tokens.input)}/{_k(t.tokens.output)}"
        latency = (
            f"{t.latency_median_ms:,.0f}/{t.latency_p95_ms:,.0f}"
            if t.latency_median_ms is not None and t.latency_p95_ms is not None
            else "-"
        )
        lines.append(
            f"  {t.name[:width]:<{width}} {mean:>5} {ci:<14} {rate:>6} "
            f"{t.errors + t.invalid:>4} {tokens:>13} {latency:>12}"
        )
    if summary.repeats > 1:
        lines += ["", "Repeats (mean over cases):"]
        for t in summary.targets:
            at = "  ".join(f"pass@{k} {v:.3f}" for k, v in enumerate(t.pass_at, 1))
            every = f"pass^{len(t.pass_all)} {t.pass_all[-1]:.3f}" if t.pass_all else ""
            lines.append(f"  {t.name}: {at}  {every}".rstrip())
            if t.flaky:
                lines.append(f"    flaky ({len(t.flaky)}): {', '.join(t.flaky)}")
        lines += _noise_lines(summary)
    if len(summary.targets) > 1 and summary.case_table:
        names = [t.name[:12] for t in summary.targets]
        case_width = min(24, max(4, *(len(case) for case, _ in summary.case_table)))
        lines += ["", "Scores by case:"]
        lines.append(f"  {'case':<{case_width}} " + " ".join(f"{n:>12}" for n in names))
        for case, cells in summary.case_table:
            shown = " ".join(f"{c:>12.3f}" if c is not None else f"{'-':>12}" for c in cells)
            lines.append(f"  {case[:case_width]:<{case_width}} {shown}")
    return lines


#: runs whose verdict hung on disagreeing samples, listed by name at most
UNCERTAIN_ROWS = 20


def _uncertain_lines(summary: Summary) -> list[str]:
    """The runs whose verdict hung on a judge's disagreeing samples, and the judges asked
    more than once: how often their samples disagreed."""
    lines: list[str] = []
    details = summary.uncertain_details
    if details:
        resolved = []
        if summary.uncertain_passed:
            resolved.append(f"{summary.uncertain_passed} made ok")
        if summary.uncertain_failed:
            resolved.append(f"{summary.uncertain_failed} made failed")
        how = f"; on_uncertain: {', '.join(resolved)}" if resolved else ""
        lines.append(
            f"Uncertain verdicts: {len(details)} (a judge's samples disagreed about pass or "
            f"fail{how}):"
        )
        for run, status, judges in details[:UNCERTAIN_ROWS]:
            shown = "" if status == "uncertain" else f" -> {status}"
            lines.append(f"  {run}: {judges}{shown}")
        if len(details) > UNCERTAIN_ROWS:
            lines.append(f"  ... and {len(details) - UNCERTAIN_ROWS} more (--summary-json)")
    sampled = [e for e in summary.evaluators if e.sampled]
    if sampled:
        parts = [f"{e.name} {e.uncertain} of {e.sampled}" for e in sampled]
        lines.append(f"Judge samples disagreed: {', '.join(parts)} runs")
    return lines


#: cases of --repeat auto listed by name at most
AUTO_ROWS = 20


def _auto_lines(summary: Summary) -> list[str]:
    """How many runs ``--repeat auto`` gave each case, and why: the counts, then every case
    that got more than one run or is not settled."""
    auto = summary.auto_repeat
    assert auto is not None
    rule = auto.rule
    parts = [f"{auto.count('settled', runs=1)} settled after one run"]
    more = auto.count("settled") - auto.count("settled", runs=1)
    if more:
        parts.append(f"{more} settled after more")
    for state, said in (
        ("max", "unsettled at the maximum"),
        ("budget", "stopped by the budget"),
        ("stopped", "stopped before settling"),
        ("no_verdict", "not repeated (a run not graded)"),
    ):
        if auto.count(state):
            parts.append(f"{auto.count(state)} {said}")
    lines = [
        f"Auto repeats (--repeat auto: at most {rule.max}, confidence {rule.confidence:g}, "
        f"margin {rule.margin:g}): {_count(auto.runs, 'run')} of "
        f"{_count(len(auto.cases), 'case')}: {', '.join(parts)}"
    ]
    several = len({c.target for c in auto.cases}) > 1
    shown = [c for c in auto.cases if c.runs > 1 or c.state != "settled"]
    for c in shown[:AUTO_ROWS]:
        name = f"{c.eval_id} [{c.target}]" if several else c.eval_id
        lines.append(f"  {name}: {_count(c.runs, 'run')}, {c.why}")
    if len(shown) > AUTO_ROWS:
        lines.append(f"  ... and {len(shown) - AUTO_ROWS} more (--summary-json)")
    return lines


def _noise_lines(summary: Summary) -> list[str]:
    """Where each target's scores vary: between repeats (the target) and between a
    judge's samples of one answer (the judge); the cases the judge decides."""
    found = [t for t in summary.targets if t.noise is not None]
    if not found:
        return []
    lines = ["", "Noise (variance of the scores: the target's between repeats, the judge's"]
    lines.append("between its samples of one answer):")
    for t in found:
        noise = t.noise
        assert noise is not None
        share = noise.judge_share
        lines.append(
            f"  {t.name}: target {noise.target_variance:.4f}, judge {noise.judge_variance:.4f}"
            + (f" (judge {share:.0%})" if share is not None else "")
            + f" over {_count(noise.cases, 'case')}"
        )
        if noise.judge_decided:
            lines.append(
                f"    decided by the judge's mood more than the model "
                f"({len(noise.judge_decided)}): {', '.join(noise.judge_decided)}"
            )
    return lines


def _vars_block(summary: Summary) -> list[str]:
    """Each variable's values side by side (runs made from ``vars:``)."""
    width = min(24, max(5, *(len(f"{g.variable}={g.value}") for g in summary.vars)))
    lines = [
        "By variable (mean and pass rate of the graded runs):",
        f"  {'value':<{width}} {'runs':>6} {'mean':>6} {'pass':>7} {'err':>5}",
    ]
    for g in summary.vars:
        name = f"{g.variable}={g.value}"
        mean = f"{g.mean:.3f}" if g.mean is not None else "-"
        rate = f"{g.pass_rate:.1%}" if g.pass_rate is not None else "-"
        lines.append(
            f"  {name[:width]:<{width}} {g.runs:>6} {mean:>6} {rate:>7} {g.errors + g.invalid:>5}"
        )
    return lines


def _cost_lines(summary: Summary, facts: RunFacts) -> list[str]:
    """``Cost: $0.0123 spent (...)``: by party, per run of each target, what was reused,
    what had no price, and the budget."""
    cost = summary.cost
    lines: list[str] = []
    if cost is not None:
        parts = [f"{party} {format_usd(spend.usd)}" for party, spend in cost.parties]
        text = f"Cost: {format_usd(cost.total.usd)} spent"
        if len(cost.parties) > 1 or (cost.parties and cost.parties[0][0] != "target"):
            text += f" ({', '.join(parts)})"
        if cost.total.reused_usd:
            text += f"; {format_usd(cost.total.reused_usd)} reused, not spent again"
        lines.append(text)
        for t in summary.targets:
            if t.cost_per_run is not None:
                lines.append(f"  {t.name}: {format_usd(t.cost_per_run)} per run")
        if cost.unpriced_runs:
            lines.append(f"  {_count(cost.unpriced_runs, 'run')} with tokens of no known price")
    for why in facts.unpriced:
        lines.append(f"  {why}")
    if facts.budget_usd is not None:
        spent = format_usd(facts.spent_usd)
        line = f"Budget: {spent} of {format_usd(facts.budget_usd)} spent"
        if summary.skipped:
            line += f"; reached: {_count(summary.skipped, 'run')} not sent (skipped)"
        lines.append(line)
    return lines


def render_summary(
    summary: Summary,
    *,
    results_path: Path | None,
    prompts_dir: Path | None = None,
    facts: RunFacts | None = None,
) -> str:
    """The end-of-run summary as plain text (print it verbatim: control characters in ids,
    target names and messages are already escaped).

    The layout follows the original AgentV's: an ERRORS block naming every case that
    errored or was invalid, the statistics, the score distribution, the top and lowest
    cases, then where results went. agentv adds the counts by status, the pass rate,
    evaluator errors by name, judge failures, tokens, retries, cache reuse and wall time.
    """
    facts = facts or RunFacts()
    if summary.total == 0:
        return "\nNo results to summarize"

    lines: list[str] = []
    if summary.error_details:
        lines += ["", _RULE, "ERRORS", _RULE]
        for eval_id, status, message in summary.error_details:
            lines += ["", f"❌ {eval_id} [{status}]", *_indent_message(message)]
        lines.append("")

    title = "EVALUATION SUMMARY" + (
        " (dry run: no target or judge was called)" if facts.dry_run else ""
    )
    lines += ["", _RULE, title, _RULE, _runs_line(summary)]
    if facts.ran is not None:
        lines.append(
            f"This run: {_count(facts.ran, 'run')}; the summary covers the whole results "
            "file (the latest record of each run)"
        )
    counts = (
        f"Passed: {summary.ok}  Failed: {summary.failed}  "
        + (f"Uncertain: {summary.uncertain}  " if summary.uncertain else "")
        + f"Errors: {summary.errors}  Invalid: {summary.invalid}"
        + (f"  Skipped: {summary.skipped}" if summary.skipped else "")
    )
    if summary.user_errors:  # the simulated users' failures, apart from the model's
        counts += f"  User errors: {summary.user_errors}"
    lines.append(counts)
    threshold = (
        f", pass threshold {facts.pass_threshold:.2f}" if facts.pass_threshold is not None else ""
    )
    lines.append(_pass_rate_line(summary, threshold))
    if facts.unusable_files:
        lines.append(f"Eval files that could not be used: {len(facts.unusable_files)}")
        lines += [f"  {p}" for p in facts.unusable_files]
    if summary.evaluator_errors:
        named = ", ".join(f"{name} x{count}" for name, count in summary.evaluator_errors)
        lines.append(f"Evaluator errors: {named}")
    if summary.judge_failures:
        lines.append(f"Judge failures: {summary.judge_failures}")
    lines += _uncertain_lines(summary)
    if summary.required_failures:
        lines.append(
            f"Failed by a required evaluator: {summary.required_failures} "
            f"(of the {summary.failed} failed)"
        )
    if summary.turns is not None:
        lines.append(_turns_line(summary.turns))
        if summary.turns.ended:
            ended = ", ".join(f"{how} {n}" for how, n in summary.turns.ended)
            lines.append(f"Simulated users: conversations ended by {ended}")
        if summary.turns.replays_diverged:
            lines.append(
                f"Replays that diverged: {summary.turns.replays_diverged} (the recorded user "
                "turns ran out; the simulator played the rest)"
            )
    lines += _score_lines(summary)
    if summary.bottom:
        lines += ["", "Lowest performing eval cases:"]
        lines += [
            f"  {rank}. {eid}: {score:.3f}" for rank, (eid, score) in enumerate(summary.bottom, 1)
        ]

    if summary.slowest:
        lines += ["", "Slowest eval cases:"]
        lines += [
            f"  {rank}. {eid}: {secs:.2f}s" for rank, (eid, secs) in enumerate(summary.slowest, 1)
        ]

    if summary.weighted:
        lines += ["", *_evaluators_block(summary)]

    if len(summary.targets) > 1 or summary.repeats > 1:
        lines += ["", *_targets_block(summary)]

    if summary.vars:
        lines += ["", *_vars_block(summary)]

    if summary.auto_repeat is not None:
        lines += ["", *_auto_lines(summary)]

    closing: list[str] = []
    if summary.tokens or summary.judge_tokens:
        closing.append("Tokens:")
        closing += [f"  {target}: {_tokens(tokens)}" for target, tokens in summary.tokens]
        if summary.judge_tokens is not None:
            closing.append(f"  judges: {_tokens(summary.judge_tokens)}")
        if summary.turns is not None and summary.turns.user_tokens is not None:
            closing.append(f"  simulated users: {_tokens(summary.turns.user_tokens)}")
    closing += _cost_lines(summary, facts)
    if facts.retries:
        closing.append("Retries:")
        closing += [f"  {target}: {_retries(codes)}" for target, codes in facts.retries.items()]
    throttled = {t: g for t, g in facts.load.items() if g.throttled}
    if throttled:
        closing.append("Throttled targets:")
        closing += [
            f"  {t}: {g.requests:,} requests, {g.throttled} throttled (429/503), "
            f"paused {g.throttled_seconds:.1f} s, down to {g.lowest_limit} at once"
            for t, g in throttled.items()
        ]
    if facts.cache_hits is not None:
        closing.append(
            f"Cache: {_count(facts.cache_hits, 'target answer')} and "
            f"{_count(facts.judge_cache_hits, 'judge answer')} reused, "
            f"{_count(facts.requests, 'target request')} sent"
        )
    if facts.wall_seconds is not None:
        closing.append(f"Wall time: {_clock(facts.wall_seconds)}")
    if closing:
        lines += ["", *closing]

    if results_path is not None:
        lines += ["", f"Results written to: {results_path}"]
    if prompts_dir is not None:
        lines.append(f"Prompt payloads saved to: {prompts_dir}")
    return printable("\n".join(lines))
