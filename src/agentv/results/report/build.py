"""Building the report: results files in, one self-contained HTML file out.

The results are read one record at a time. Each record is split in two: a small *index
row* (what the table shows and searches: id, dataset, target, repeat, score, status,
duration, attempts, the answer) and its *detail* (what a case's page shows: the request
exactly as sent, the question, guidelines and every evaluator), minus what the report does
not show (``lm_provider_request`` and ``agent_provider_request`` repeat ``raw_request``).

The page holds the index rows first, then the browser code, then the details in chunks of
``CHUNK`` records, each in its own ``<script type="application/json">`` element: the table
shows its first rows while the browser is still reading the details, and a case's chunk is
parsed only when the case is opened. Everything taken from a results file goes into the
page as escaped JSON (``<``, ``>``, ``&``, U+2028 and U+2029 as ``\\uXXXX``: it can never end
its script element) and the browser code shows it as text only.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from agentv.errors import Diagnostic, InputError
from agentv.results.reader import read_results
from agentv.results.record import GRADED
from agentv.results.summary import HISTOGRAM_EDGES
from agentv.system.outfile import replaced_whole

#: records per detail chunk (one ``<script type="application/json">`` element each)
CHUNK = 500
#: fields of a record the report never shows (they repeat ``raw_request``)
DROPPED = frozenset({"lm_provider_request", "agent_provider_request", "passed"})
#: fields that go to the index row (so not to the detail)
INDEXED = frozenset(
    {
        "eval_id",
        "dataset",
        "target",
        "repeat",
        "score",
        "status",
        "duration_ms",
        "attempts",
        "candidate_answer",
    }
)
#: a bin is ``score < end + 1e-9`` (agentv.results.summary's rule: a boundary lands in the lower bin)
_BIN_LIMITS = tuple(end + 1e-9 for end in HISTOGRAM_EDGES[1:-1])
_UNSAFE = ((b"<", b"\\u003c"), (b">", b"\\u003e"), (b"&", b"\\u0026"))
_LINE_SEPARATORS = (("\u2028".encode(), b"\\u2028"), ("\u2029".encode(), b"\\u2029"))
#: lines that were not results, listed by number (the rest only counted)
_MAX_LISTED = 5
#: the most characters of one text (an answer, a prompt, a field) the report shows; the
#: rest is left out of the page, which says where the whole text is (the results file and
#: its line), so that a huge answer makes neither a huge page nor a huge build
DISPLAY_CHARS = 100_000


def script_json(value: Any) -> bytes:
    """``value`` as JSON that is safe inside a ``<script>`` element: ``<``, ``>``, ``&``,
    U+2028 and U+2029 are escaped (they only occur inside JSON strings, where ``\\uXXXX``
    means the same character), so no text from a results file can close the element."""
    try:
        data = orjson.dumps(value)
    except TypeError:  # lone surrogates (json.loads lets "\\ud800" through): keep them escaped
        data = json.dumps(value, ensure_ascii=True, allow_nan=False, default=str).encode()
    for raw, escaped in _UNSAFE:
        data = data.replace(raw, escaped)
    for raw, escaped in _LINE_SEPARATORS:
        data = data.replace(raw, escaped)
    return data


def _finite(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _int(value: Any) -> int | None:
    number = _finite(value)
    return None if number is None else int(number)


def _tokens(usage: Any) -> tuple[int, int]:
    if not isinstance(usage, dict):
        return 0, 0
    return _int(usage.get("input_tokens")) or 0, _int(usage.get("output_tokens")) or 0


def _parse_time(text: Any) -> float | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


class _Table:
    """Strings repeated across rows (datasets, targets, statuses) stored once, by number."""

    def __init__(self) -> None:
        self.values: list[str] = []
        self._index: dict[str, int] = {}

    def __call__(self, value: Any) -> int:
        text = "" if value is None else str(value)
        number = self._index.get(text)
        if number is None:
            number = self._index[text] = len(self.values)
            self.values.append(text)
        return number


@dataclass
class _TargetStats:
    runs: int = 0
    graded: int = 0
    score_sum: float = 0.0
    statuses: dict[str, int] = field(default_factory=dict)
    input_tokens: int = 0
    output_tokens: int = 0
    reused_input_tokens: int = 0
    reused_output_tokens: int = 0
    cost: list[float] = field(default_factory=lambda: [0.0, 0.0])  # spent, reused (USD)


#: evaluators (by name) whose figures the report's head keeps, at most
MAX_EVALUATORS = 100


@dataclass
class _EvaluatorStats:
    type: str
    runs: int = 0
    score_sum: float = 0.0
    weights: set[float] = field(default_factory=set)
    required: bool = False
    thresholds: set[float | None] = field(default_factory=set)
    passed: int = 0
    judged: int = 0
    failed_cases: int = 0

    def add(self, entry: dict[str, Any], failed_case: bool) -> None:
        self.runs += 1
        self.score_sum += _finite(entry.get("score")) or 0.0
        self.weights.add(_finite(entry.get("weight", 1.0)) or 0.0)
        self.required = self.required or entry.get("required") is True
        self.thresholds.add(_finite(entry.get("threshold")))
        if isinstance(entry.get("passed"), bool):
            self.passed += entry["passed"]
            self.judged += 1
        self.failed_cases += failed_case

    def as_dict(self) -> dict[str, Any]:
        weight = next(iter(self.weights)) if len(self.weights) == 1 else None
        threshold = next(iter(self.thresholds)) if len(self.thresholds) == 1 else None
        return {
            "type": self.type,
            "runs": self.runs,
            "mean": self.score_sum / self.runs if self.runs else None,
            "weight": weight,
            "required": self.required,
            "threshold": threshold,
            "passed": self.passed,
            "judged": self.judged,
            "failed_cases": self.failed_cases,
            "weighted": weight != 1.0 or self.required or threshold is not None,
        }


@dataclass
class RunStats:
    """What the report's head says about one results file."""

    total: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    score_sum: float = 0.0
    scored: int = 0
    histogram: list[int] = field(default_factory=lambda: [0] * (len(HISTOGRAM_EDGES) - 1))
    input_tokens: int = 0
    output_tokens: int = 0
    reused_input_tokens: int = 0
    reused_output_tokens: int = 0
    judge_input_tokens: int = 0
    judge_output_tokens: int = 0
    #: US dollars by party (``target``, ``judge``, ...): [spent, reused]; runs with
    #: tokens of no known price
    cost: dict[str, list[float]] = field(default_factory=dict)
    unpriced: int = 0
    first_start: float | None = None
    last_end: float | None = None
    duration_sum_ms: float = 0.0
    targets: dict[str, _TargetStats] = field(default_factory=dict)
    required_failures: int = 0  # runs failed by a required evaluator
    tool_calls: int = 0  # steps of the runs' trajectories
    #: evaluator name -> its figures (as agentv.results.summary's evaluator table)
    evaluators: dict[str, _EvaluatorStats] = field(default_factory=dict)

    def _grading(self, record: dict[str, Any], entries: list[Any]) -> None:
        """Each evaluator's settings and outcome, and the runs failed by a required one."""
        failed = record.get("failed_required")
        failed = failed if isinstance(failed, list) else []
        if failed and record.get("status") == "failed":
            self.required_failures += 1
        for entry in entries:
            if not isinstance(entry, dict) or entry.get("error") is not None:
                continue
            name = str(entry.get("name") or entry.get("type") or "?")
            stats = self.evaluators.get(name)
            if stats is None:
                if len(self.evaluators) >= MAX_EVALUATORS:
                    continue
                stats = self.evaluators[name] = _EvaluatorStats(str(entry.get("type") or ""))
            stats.add(entry, name in failed)
        trajectory = record.get("trajectory")
        if isinstance(trajectory, list):
            self.tool_calls += len(trajectory)

    def add(self, record: dict[str, Any], score: float | None, status: str) -> None:
        self.total += 1
        self.statuses[status] = self.statuses.get(status, 0) + 1
        target = self.targets.setdefault(str(record.get("target") or ""), _TargetStats())
        target.runs += 1
        target.statuses[status] = target.statuses.get(status, 0) + 1
        if score is not None:  # a graded run (errors are not scores)
            self.score_sum += score
            self.scored += 1
            target.score_sum += score
            target.graded += 1
            bin_index = 0
            while bin_index < len(_BIN_LIMITS) and score >= _BIN_LIMITS[bin_index]:
                bin_index += 1
            self.histogram[bin_index] += 1
        tokens_in, tokens_out = _tokens(record.get("usage"))
        if record.get("cached"):  # an answer reused from --cache: nothing was spent on it
            self.reused_input_tokens += tokens_in
            self.reused_output_tokens += tokens_out
            target.reused_input_tokens += tokens_in
            target.reused_output_tokens += tokens_out
        else:
            self.input_tokens += tokens_in
            self.output_tokens += tokens_out
            target.input_tokens += tokens_in
            target.output_tokens += tokens_out
        evaluators = record.get("evaluator_results")
        if not isinstance(evaluators, list):  # the default judge: its call's record
            single = record.get("evaluator_raw_request")
            evaluators = [single] if isinstance(single, dict) else []
        for entry in evaluators:
            if isinstance(entry, dict) and not entry.get("cached"):
                judge_in, judge_out = _tokens(entry.get("usage"))
                self.judge_input_tokens += judge_in
                self.judge_output_tokens += judge_out
        self._cost(record.get("cost"), target)
        self._grading(record, evaluators if "evaluator_results" in record else [])
        duration = _finite(record.get("duration_ms")) or 0.0
        self.duration_sum_ms += duration
        end = _parse_time(record.get("timestamp"))
        if end is not None:
            start = end - duration / 1000
            if self.first_start is None or start < self.first_start:
                self.first_start = start
            if self.last_end is None or end > self.last_end:
                self.last_end = end

    def _cost(self, cost: Any, target: _TargetStats) -> None:
        """A record's ``cost`` (by party) added to the totals."""
        if not isinstance(cost, dict):
            return
        unpriced = False
        for party, entry in cost.items():
            if not isinstance(entry, dict):
                continue
            unpriced = unpriced or bool(entry.get("unpriced"))
            spent, reused = (
                _finite(entry.get("usd")) or 0.0,
                _finite(entry.get("reused_usd")) or 0.0,
            )
            totals = self.cost.setdefault(str(party), [0.0, 0.0])
            totals[0] += spent
            totals[1] += reused
            if party == "target":
                target.cost[0] += spent
                target.cost[1] += reused
        self.unpriced += unpriced

    def as_dict(self) -> dict[str, Any]:
        def iso(moment: float | None) -> str | None:
            if moment is None:
                return None
            return datetime.fromtimestamp(moment, UTC).isoformat(timespec="seconds")

        wall = None
        if self.first_start is not None and self.last_end is not None:
            wall = round(max(0.0, self.last_end - self.first_start), 3)
        ok = self.statuses.get("ok", 0)
        return {
            "total": self.total,
            "graded": self.scored,
            "statuses": self.statuses,
            "mean": self.score_sum / self.scored if self.scored else None,
            "pass_rate": ok / self.scored if self.scored else None,
            "histogram": [
                {"start": start, "end": end, "count": count}
                for start, end, count in zip(
                    HISTOGRAM_EDGES[:-1], HISTOGRAM_EDGES[1:], self.histogram, strict=True
                )
            ],
            "tokens": {"input": self.input_tokens, "output": self.output_tokens},
            "reused_tokens": {
                "input": self.reused_input_tokens,
                "output": self.reused_output_tokens,
            },
            "judge_tokens": {"input": self.judge_input_tokens, "output": self.judge_output_tokens},
            "cost": {
                "usd": sum(v[0] for v in self.cost.values()),
                "reused_usd": sum(v[1] for v in self.cost.values()),
                "by_party": {k: {"usd": v[0], "reused_usd": v[1]} for k, v in self.cost.items()},
                "unpriced_runs": self.unpriced,
            }
            if self.cost or self.unpriced
            else None,
            "started": iso(self.first_start),
            "ended": iso(self.last_end),
            "wall_seconds": wall,
            "case_seconds": round(self.duration_sum_ms / 1000, 3),
            "required_failures": self.required_failures,
            "tool_calls": self.tool_calls,
            "evaluators": [
                {"name": name, **stats.as_dict()} for name, stats in self.evaluators.items()
            ],
            "targets": [
                {
                    "target": name,
                    "runs": t.runs,
                    "graded": t.graded,
                    "mean": t.score_sum / t.graded if t.graded else None,
                    "pass_rate": t.statuses.get("ok", 0) / t.graded if t.graded else None,
                    "statuses": t.statuses,
                    "tokens": {"input": t.input_tokens, "output": t.output_tokens},
                    "reused_tokens": {
                        "input": t.reused_input_tokens,
                        "output": t.reused_output_tokens,
                    },
                    "cost": {"usd": t.cost[0], "reused_usd": t.cost[1]},
                }
                for name, t in self.targets.items()
            ],
        }


@dataclass
class RunData:
    """One results file, read: its index rows, stats, and the detail chunks' byte ranges
    in the spool file."""

    name: str
    path: str
    stats: RunStats = field(default_factory=RunStats)
    datasets: _Table = field(default_factory=_Table)
    targets: _Table = field(default_factory=_Table)
    statuses: _Table = field(default_factory=_Table)
    rows: list[list[Any]] = field(default_factory=list)
    chunks: list[tuple[int, int]] = field(default_factory=list)  # (offset, length)
    bad_lines: list[int] = field(default_factory=list)
    bad_count: int = 0
    notes: list[Diagnostic] = field(default_factory=list)  # records read with a repair

    def index(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "path": self.path,
            "columns": [
                "eval_id",
                "dataset",
                "target",
                "repeat",
                "score",
                "status",
                "duration_ms",
                "attempts",
                "answer",
            ],
            "datasets": self.datasets.values,
            "targets": self.targets.values,
            "statuses": self.statuses.values,
            "rows": self.rows,
            "chunk_size": CHUNK,
            "chunks": len(self.chunks),
            "summary": self.stats.as_dict(),
            "skipped_lines": self.bad_count,
            "skipped_examples": self.bad_lines,
        }


def detail_of(record: dict[str, Any]) -> dict[str, Any]:
    """What a case's page needs of a record beyond its index row."""
    return {k: v for k, v in record.items() if k not in INDEXED and k not in DROPPED}


def _index_row(run: RunData, number: int, record: dict[str, Any]) -> list[Any]:
    status = record.get("status")
    if not isinstance(status, str) or not status:
        status = "error" if record.get("error") else ("ok" if record.get("passed") else "failed")
    # errors are not scores: a run that errored or was invalid shows none
    score = _finite(record.get("score")) if status in GRADED else None
    run.stats.add(record, score, status)
    eval_id = record.get("eval_id")
    duration = _finite(record.get("duration_ms"))
    answer = record.get("candidate_answer")
    return [
        str(eval_id) if eval_id is not None else "",
        run.datasets(record.get("dataset")),
        run.targets(record.get("target")),
        _int(record.get("repeat")),
        score,
        run.statuses(status),
        None if duration is None else round(duration),
        _int(record.get("attempts")),
        answer if isinstance(answer, str) else ("" if answer is None else str(answer)),
    ]


def _read_run(path: Path, name: str, spool: BinaryIO) -> RunData:
    run = RunData(name=name, path=str(path))
    pending: list[bytes] = []

    def flush() -> None:
        if not pending:
            return
        offset = spool.tell()
        spool.write(b"[" + b",".join(pending) + b"]")
        run.chunks.append((offset, spool.tell() - offset))
        pending.clear()

    reader = read_results(path)
    for number, result in reader.latest():
        record = result.model_dump(mode="json")
        where = f"{path.name}, line {number}"
        answer = record.get("candidate_answer")
        if isinstance(answer, str) and len(answer) > DISPLAY_CHARS:
            record["candidate_answer"] = _for_display(answer, where)
        run.rows.append(_index_row(run, number, record))
        detail = detail_of(record)
        detail.setdefault("line_in_results", number)
        data = script_json(detail)
        if len(data) > DISPLAY_CHARS:  # a text in it may be longer (JSON is never shorter)
            data = script_json(_for_display(detail, where))
        pending.append(data)
        if len(pending) >= CHUNK:
            flush()
    flush()
    reader.check_named(len(run.rows))
    if not run.rows and reader.diagnostics:  # never "0 results" for lines left out
        count = len(reader.diagnostics)
        raise InputError(
            f"{path} holds no result ({count} line(s) are not results): give a results file "
            "written by agentv eval",
            reader.diagnostics[:_MAX_LISTED],
        )
    run.notes = reader.notes
    run.bad_count = len(reader.diagnostics)
    run.bad_lines = [d.line for d in reader.diagnostics[:_MAX_LISTED] if d.line is not None]
    return run


def _for_display(value: Any, where: str) -> Any:
    """``value`` with every text longer than ``DISPLAY_CHARS`` cut to its start, marked with
    how much was left out and where the whole text is."""
    if isinstance(value, str):
        if len(value) <= DISPLAY_CHARS:
            return value
        left = len(value) - DISPLAY_CHARS
        return (
            f"{value[:DISPLAY_CHARS]}\n[agentv report: {left:,} more characters not shown; "
            f"the whole text is in {where}]"
        )
    if isinstance(value, dict):
        return {k: _for_display(v, where) for k, v in value.items()}
    if isinstance(value, list):
        return [_for_display(v, where) for v in value]
    return value


def _run_names(paths: list[Path]) -> list[str]:
    names = [p.name for p in paths]
    if len(set(names)) == len(names):
        return names
    return [str(p) for p in paths]


def _asset(name: str) -> str:
    return resources.files("agentv.results.report").joinpath("assets", name).read_text("utf-8")


def _csp_hash(script: str) -> str:
    digest = hashlib.sha256(script.encode("utf-8")).digest()
    return "sha256-" + base64.b64encode(digest).decode("ascii")


@dataclass(frozen=True)
class Report:
    """A written report: where, how many records, and lines that were not results."""

    path: Path
    records: int
    skipped: dict[str, int]
    #: records read with something put right (a null score read as 0), as warnings
    notes: tuple[Diagnostic, ...] = ()


def build_report(paths: list[Path], out: Path, *, title: str | None = None) -> Report:
    """Write the report of ``paths`` (results files, shown side by side when several) to
    ``out`` (written whole to a temporary file first, then moved into place)."""
    from jinja2 import Environment, PackageLoader, select_autoescape

    if not paths:
        raise InputError("give at least one results file")
    script = _asset("report.js")
    style = _asset("report.css")
    for text, tag in ((script, "script"), (style, "style")):
        if f"</{tag}" in text.lower():  # our own files: checked, never trusted blindly
            raise AssertionError(f"report asset holds </{tag}")
    env = Environment(
        loader=PackageLoader("agentv.results.report", "assets"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        keep_trailing_newline=True,
    )
    template = env.get_template("report.html.j2")
    from agentv._version import __version__

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryFile(dir=out.parent) as spool:
        runs = [
            _read_run(path, name, spool)
            for path, name in zip(paths, _run_names(paths), strict=True)
        ]
        meta = {
            "generator": f"agentv {__version__}",
            "generated": datetime.now(UTC).isoformat(timespec="seconds"),
            "runs": len(runs),
        }
        marker = "\x00AGENTV-DETAILS\x00"
        page = template.render(
            title=title or "agentv report: " + ", ".join(r.name for r in runs),
            csp_script=_csp_hash(script),
            script=script,
            style=style,
            meta=script_json(meta).decode("utf-8"),
            indexes=[script_json(run.index()).decode("utf-8") for run in runs],
            details_marker=marker,
        )
        head, tail = page.split(marker)
        with replaced_whole(out) as handle:
            handle.write(head.encode("utf-8"))
            for r, run in enumerate(runs):
                for c, (offset, length) in enumerate(run.chunks):
                    handle.write(f'<script type="application/json" id="agentv-d-{r}-{c}">'.encode())
                    spool.seek(offset)
                    _copy(spool, handle, length)
                    handle.write(b"</script>\n")
            handle.write(tail.encode("utf-8"))
    return Report(
        path=out,
        records=sum(len(run.rows) for run in runs),
        skipped={run.path: run.bad_count for run in runs if run.bad_count},
        notes=tuple(note for run in runs for note in run.notes),
    )


def _copy(source: BinaryIO, target: BinaryIO, length: int) -> None:
    remaining = length
    while remaining > 0:
        block = source.read(min(remaining, 1 << 20))
        if not block:
            raise OSError("the report's temporary file ended early")
        target.write(block)
        remaining -= len(block)


def default_report_path(paths: list[Path]) -> Path:
    """Next to the results: ``RESULTS.html`` for one file, ``LAST-vs-FIRST.html`` beside the
    last for several."""
    if len(paths) == 1:
        return paths[0].with_suffix(".html")
    return paths[-1].with_name(f"{paths[-1].stem}-vs-{paths[0].stem}.html")


__all__ = [
    "CHUNK",
    "Report",
    "build_report",
    "default_report_path",
    "detail_of",
    "script_json",
]
