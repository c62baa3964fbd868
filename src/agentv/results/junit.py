"""Results as JUnit XML (what Jenkins, GitLab and most CI systems read) and as GitHub
Actions annotations: one test case per case run, a failure for ``failed``, a failure of
type ``uncertain`` for ``uncertain`` (counted among the failures, never a pass, and apart
in the suite's ``uncertain`` property), an error for ``error`` and ``invalid``.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from agentv.results.reader import read_results
from agentv.results.record import EvalResult, repeat_label
from agentv.results.summary import SummaryCollector

#: what a test case keeps of a record (a run of 100,000 cases keeps little)
KEPT = (
    "eval_id",
    "dataset",
    "target",
    "repeat",
    "status",
    "score",
    "misses",
    "uncertain",
    "error",
    "duration_ms",
    "eval_file",
    "line",
)


def slim(result: EvalResult) -> dict[str, Any]:
    """The fields of a record that JUnit and annotations use."""
    data = result.model_dump(include=set(KEPT), exclude_none=True)
    return {k: data[k] for k in KEPT if k in data}


def read_records(path: Path) -> Iterator[dict[str, Any]]:
    """What JUnit and annotations use of the latest record of every run of a results file,
    one at a time; ``InputError`` naming the line of one that is not a result."""
    for _, result in read_results(path, strict=True).latest():
        yield slim(result)


def _name(record: Mapping[str, Any]) -> str:
    """``id [target] #N``: the repeat as people count it, for a repeat after the first
    (the first gets its ``#1`` once the file shows the case has others: ``junit_xml``)."""
    name = str(record.get("eval_id") or f"line {record.get('line', '?')}")
    if record.get("target"):
        name += f" [{record['target']}]"
    if record.get("repeat"):
        name += f" {repeat_label(int(record['repeat']))}"
    return name


#: control characters XML 1.0 cannot hold (tab and newlines aside): dropped
_CONTROLS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f]")
#: the other characters XML 1.0 cannot hold: lone surrogates (JSON lets "\\ud800" through)
#: and the non-characters U+FFFE, U+FFFF; each shown as U+FFFD
_NOT_XML = re.compile("[\ud800-\udfff\ufffe\uffff]")


def _clean(text: str) -> str:
    """Text XML 1.0 can hold, so that the file is well-formed whatever a record holds:
    control characters other than tab and newlines dropped, lone surrogates and U+FFFE /
    U+FFFF replaced with U+FFFD."""
    return _NOT_XML.sub("\ufffd", _CONTROLS.sub("", text))


def junit_xml(records: Iterable[Mapping[str, Any]]) -> str:
    """JUnit XML for ``records``: a test suite per dataset, in the order they first come.
    The suites' and the file's counts and times are those of the records' summary
    (``agentv.results.summary``), the figures every other view of the results shows."""
    suites: dict[str, ET.Element] = {}
    collector = SummaryCollector()
    root = ET.Element("testsuites", name="agentv")
    # the first run of each case, and the cases that have other runs: their first is #1
    firsts: dict[tuple[Any, ...], ET.Element] = {}
    repeated: set[tuple[Any, ...]] = set()
    for record in records:
        collector.add_record(record)
        dataset = _suite_name(record.get("dataset"))
        suite = suites.get(dataset)
        if suite is None:
            suite = suites[dataset] = ET.SubElement(root, "testsuite", name=_clean(dataset))
        seconds = float(record.get("duration_ms") or 0.0) / 1000
        case = ET.SubElement(
            suite,
            "testcase",
            classname=_clean(dataset),
            name=_clean(_name(record)),
            time=f"{seconds:.3f}",
        )
        run = (record.get("dataset"), record.get("eval_id"), record.get("target"))
        if record.get("repeat"):
            repeated.add(run)
        else:
            firsts.setdefault(run, case)
        if record.get("eval_file"):
            case.set("file", _clean(str(record["eval_file"])))
            if record.get("line"):
                case.set("line", str(record["line"]))
        status = record.get("status") or ("error" if record.get("error") else "ok")
        if status == "failed":
            misses = [str(m) for m in record.get("misses") or []]
            node = ET.SubElement(
                case,
                "failure",
                message=_clean(f"score {float(record.get('score', 0.0)):.3f}"),
                type="failed",
            )
            node.text = _clean("\n".join(misses))
        elif status == "uncertain":  # graded, but a judge's samples disagreed: not a pass
            judges = ", ".join(str(n) for n in record.get("uncertain") or [])
            node = ET.SubElement(
                case,
                "failure",
                message=_clean(
                    f"uncertain: score {float(record.get('score', 0.0)):.3f}, the samples of "
                    f"{judges or 'its judge'} disagreed"
                ),
                type="uncertain",
            )
            node.text = _clean("\n".join(str(m) for m in record.get("misses") or []))
        elif status in ("error", "invalid"):
            error = str(record.get("error") or status)
            first = error.strip().splitlines()[0] if error.strip() else status
            node = ET.SubElement(case, "error", message=_clean(first), type=status)
            node.text = _clean(error)
        elif status == "user_error":
            # the simulated user failed, not the model: no verdict on it either way
            error = str(record.get("error") or status)
            ET.SubElement(case, "skipped", message=_clean(error.strip().splitlines()[0]))
        elif status == "skipped":  # not run: the run's budget was reached first
            ET.SubElement(case, "skipped", message=_clean(str(record.get("skip_reason") or "")))
    for run in repeated & firsts.keys():
        first = firsts[run]
        first.set("name", f"{first.get('name')} {repeat_label(0)}")
    summary = collector.summary()
    # datasets "" and "eval" are one suite: sum what the summary says of each
    counts: dict[str, list[float]] = {}
    for d in summary.datasets:
        c = counts.setdefault(_suite_name(d.name), [0, 0, 0, 0, 0.0, 0])
        c[0] += d.runs
        c[1] += d.failed + d.uncertain
        c[5] += d.uncertain
        c[2] += d.errors + d.invalid
        c[3] += d.skipped + d.user_errors  # no verdict on the model either way
        c[4] += d.seconds
    for dataset, suite in suites.items():
        tests, failures, errors, skipped, seconds, uncertain = counts[dataset]
        if uncertain:  # counted apart: failures of type "uncertain"
            properties = ET.Element("properties")
            ET.SubElement(properties, "property", name="uncertain", value=str(int(uncertain)))
            suite.insert(0, properties)
        suite.set("tests", str(int(tests)))
        suite.set("failures", str(int(failures)))
        suite.set("errors", str(int(errors)))
        suite.set("skipped", str(int(skipped)))
        suite.set("time", f"{seconds:.3f}")
    root.set("tests", str(summary.total))
    root.set("failures", str(summary.failed + summary.uncertain))
    root.set("errors", str(summary.errors + summary.invalid))
    root.set("time", f"{summary.time.case_seconds:.3f}")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _suite_name(dataset: Any) -> str:
    """The test suite of a dataset (``eval`` for none)."""
    return str(dataset or "eval")


#: what a log's terminal may act on (C0 controls but tab and the newlines, which the
#: encoding below escapes; DEL; C1 controls): GitHub's workflow-command encoding leaves
#: them as they are, so each is shown as its escape (``\x1b``), as on the console
_LOG_CONTROLS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def _escape_data(text: str) -> str:
    # a lone surrogate cannot be printed (UTF-8 refuses it): shown as U+FFFD
    text = _NOT_XML.sub("\ufffd", text)
    text = _LOG_CONTROLS.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def github_annotations(records: Iterable[Mapping[str, Any]], cwd: Path) -> list[str]:
    """One ``::error file=...,line=...::`` workflow command per failed, errored or invalid
    case (``::warning`` for an uncertain one), pointing at the case in its eval file
    (relative to ``cwd`` when inside it)."""
    out = []
    for record in records:
        status = record.get("status")
        if status not in ("failed", "uncertain", "error", "invalid"):
            continue
        where = []
        if record.get("eval_file"):
            path = Path(str(record["eval_file"]))
            try:
                shown = path.resolve().relative_to(cwd.resolve()).as_posix()
            except ValueError:
                shown = str(path)
            where.append(f"file={_escape_property(shown)}")
            if record.get("line"):
                where.append(f"line={int(record['line'])}")
        where.append(f"title={_escape_property(f'agentv: {_name(record)} {status}')}")
        if status in ("failed", "uncertain"):
            detail = f"score {float(record.get('score', 0.0)):.3f}"
            misses = "; ".join(str(m) for m in record.get("misses") or [])
            message = f"{detail}: {misses}" if misses else detail
        else:
            message = str(record.get("error") or status)
        level = "warning" if status == "uncertain" else "error"
        out.append(f"::{level} {','.join(where)}::{_escape_data(message)}")
    return out
