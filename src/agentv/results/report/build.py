"""Building the report: results files in, one self-contained HTML file out.

The results are read one record at a time. Each record is split in two: a small *index
row* (what the table shows and searches: id, dataset, target, repeat, score, status,
duration, attempts, the answer) and its *detail* (what a case's page shows: the request
exactly as sent, the question, guidelines and every evaluator), minus what the report does
not show (``lm_provider_request`` and ``agent_provider_request`` repeat ``raw_request``).

The head of the page (counts, scores, tokens, cost, time, targets, evaluators, histogram)
is the file's summary (``agentv.results.summary``, fed each record as it is read): the
figures ``--summary-json`` writes, which the page shows and never counts itself.

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
from agentv.results.summary import SummaryCollector
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
class RunData:
    """One results file, read: its index rows, its summary (``agentv.results.summary``,
    fed every record as it is read), and the detail chunks' byte ranges in the spool
    file."""

    name: str
    path: str
    summary: SummaryCollector = field(default_factory=SummaryCollector)
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
            # the very figures --summary-json writes: the page computes none of its own
            "summary": page_summary(self.summary.summary().to_dict()),
            "skipped_lines": self.bad_count,
            "skipped_examples": self.bad_lines,
        }


#: what the page leaves out of the summary: its lists of cases (the errored runs, each
#: case's repeats, each target's flaky cases), which grow with the run and which the
#: table of every record shows anyway
PER_CASE = ("errors_by_case", "cases")
PER_CASE_OF_A_TARGET = ("flaky",)


def page_summary(summary: dict[str, Any]) -> dict[str, Any]:
    """The summary's JSON (``Summary.to_dict``) as the page holds it: every figure, its
    lists of cases left out (``PER_CASE``, ``PER_CASE_OF_A_TARGET``), so that the head of
    the page stays small at 100,000 runs."""
    kept = {k: v for k, v in summary.items() if k not in PER_CASE}
    kept["targets"] = [
        {k: v for k, v in target.items() if k not in PER_CASE_OF_A_TARGET}
        for target in summary["targets"]
    ]
    return kept


def detail_of(record: dict[str, Any]) -> dict[str, Any]:
    """What a case's page needs of a record beyond its index row."""
    return {k: v for k, v in record.items() if k not in INDEXED and k not in DROPPED}


def _index_row(run: RunData, record: dict[str, Any]) -> list[Any]:
    status = str(record["status"])  # a model's dump: every record has one
    # errors are not scores: a run that errored or was invalid shows none
    score = _finite(record.get("score")) if status in GRADED else None
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
        run.summary.add_record(record)
        run.rows.append(_index_row(run, record))
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
    """A written report (``report``).

    Attributes:
        path: Where it was written.
        records: The records it shows.
        skipped: Per results file, its lines that were not results (left out).
        notes: Records read with something put right (a null score read as 0), as
            warnings with their file and line.
    """

    path: Path
    records: int
    skipped: dict[str, int]
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
    "page_summary",
    "script_json",
]
