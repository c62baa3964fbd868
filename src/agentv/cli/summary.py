"""The end-of-run summary as people read it."""

from __future__ import annotations

from pathlib import Path

from agentv.summary import Summary

_RULE = "=" * 50


def _indent_message(message: str) -> list[str]:
    lines = message.strip("\n").splitlines() or [""]
    return [f"   {line}" if line else "" for line in lines]


def render_summary(
    summary: Summary, *, results_path: Path | None, prompts_dir: Path | None = None
) -> str:
    """The end-of-run summary as plain text (no markup; print it verbatim).

    The layout follows the original AgentV's: an ERRORS block when cases failed, the statistics,
    the score distribution, the top and lowest cases, then where results went. Agentv adds
    the judge-failure count and the slowest cases.
    """
    if summary.total == 0:
        return "\nNo results to summarize"

    lines: list[str] = []
    if summary.error_details:
        lines += ["", _RULE, "ERRORS", _RULE]
        for eval_id, message in summary.error_details:
            lines += ["", f"❌ {eval_id}", *_indent_message(message)]
        lines.append("")

    lines += ["", _RULE, "EVALUATION SUMMARY", _RULE, f"Total eval cases: {summary.total}"]
    if summary.errors:
        lines += [f"Failed: {summary.errors}", f"Passed: {summary.passed}"]
    if summary.judge_failures:
        lines.append(f"Judge failures: {summary.judge_failures}")
    lines += [
        f"Mean score: {summary.mean:.3f}",
        f"Median score: {summary.median:.3f}",
        f"Min score: {summary.min:.3f}",
        f"Max score: {summary.max:.3f}",
    ]
    if summary.std_dev is not None:
        lines.append(f"Std deviation: {summary.std_dev:.3f}")

    lines += ["", "Score distribution:"]
    lines += [f"  {b.label}: {b.count}" for b in summary.histogram]

    lines += ["", "Top performing eval cases:"]
    lines += [f"  {rank}. {eid}: {score:.3f}" for rank, (eid, score) in enumerate(summary.top, 1)]
    lines += ["", "Lowest performing eval cases:"]
    lines += [
        f"  {rank}. {eid}: {score:.3f}" for rank, (eid, score) in enumerate(summary.bottom, 1)
    ]

    if summary.slowest:
        lines += ["", "Slowest eval cases:"]
        lines += [
            f"  {rank}. {eid}: {secs:.2f}s" for rank, (eid, secs) in enumerate(summary.slowest, 1)
        ]

    if results_path is not None:
        lines += ["", f"Results written to: {results_path}"]
    if prompts_dir is not None:
        lines.append(f"Prompt payloads saved to: {prompts_dir}")
    return "\n".join(lines)
