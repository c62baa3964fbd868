"""Building the HTML report (no browser here: tests/results/test_report_browser.py opens it)."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

import agentv
from agentv.results.reader import read_results
from agentv.results.report import build_report, default_report_path
from agentv.results.report.build import (
    CHUNK,
    DISPLAY_CHARS,
    detail_of,
    page_summary,
    script_json,
)
from support.cli import invoke_cli
from support.paths import BENCHMARKS

BENCH_DIR = BENCHMARKS
SCRIPT = re.compile(r'<script(?: type="application/json" id="([^"]+)")?>(.*?)</script>', re.S)
HOSTILE = "</script><script>window.__pwned=1</script><!-- & > \u2028 \u2029 </SCRIPT "


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.syspath_prepend(str(BENCH_DIR))
    sys.modules.pop("report_bench", None)
    import report_bench

    yield report_bench
    sys.modules.pop("report_bench", None)


def _write(path: Path, records: list[dict[str, Any]], tail: str = "") -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + tail, encoding="utf-8")
    return path


def _scripts(html: str) -> dict[str, str]:
    """The page's script elements by id (the code under ``code``)."""
    return {name or "code": body for name, body in SCRIPT.findall(html)}


def test_script_json_cannot_close_its_element_and_reads_back_the_same() -> None:
    value = {"answer": HOSTILE, "nested": [HOSTILE, {"k": "\\<"}], "score": 0.5}
    data = script_json(value).decode("utf-8")
    for raw in ("<", ">", "&", "\u2028", "\u2029"):
        assert raw not in data
    assert json.loads(data) == value


def test_script_json_keeps_lone_surrogates_escaped() -> None:
    value = json.loads('{"a": "x\\ud800y <"}')
    data = script_json(value)
    assert json.loads(data) == value
    assert b"<" not in data


def test_hostile_answers_stay_inside_their_json(bench: Any, tmp_path: Path) -> None:
    records = [bench.make_record(n, answer=HOSTILE) for n in range(3)]
    report = build_report([_write(tmp_path / "r.jsonl", records)], tmp_path / "r.html")
    html = report.path.read_text("utf-8")
    scripts = _scripts(html)
    assert set(scripts) == {"code", "agentv-meta", "agentv-index-0", "agentv-d-0-0"}
    assert html.lower().count("</script") == 4  # our four elements, nothing from the data
    assert "__pwned" not in scripts["code"]
    index = json.loads(scripts["agentv-index-0"])
    assert [row[8] for row in index["rows"]] == [HOSTILE] * 3
    details = json.loads(scripts["agentv-d-0-0"])
    assert details[0]["evaluator_results"][1]["evaluator_raw_request"]["prompt"].endswith(HOSTILE)


def test_the_page_allows_only_its_own_script(bench: Any, tmp_path: Path) -> None:
    report = build_report(
        [_write(tmp_path / "r.jsonl", [bench.make_record(0)])], tmp_path / "r.html"
    )
    html = report.path.read_text("utf-8")
    code = _scripts(html)["code"]
    digest = base64.b64encode(hashlib.sha256(code.encode("utf-8")).digest()).decode()
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', html).group(1)
    assert f"script-src 'sha256-{digest}'" in csp
    assert "default-src 'none'" in csp and "connect-src 'none'" in csp
    assert not re.search(r"(src|href)=\"(https?:)?//", html)  # nothing fetched from anywhere
    assert "innerHTML" not in code.replace("no innerHTML", "")


def test_index_rows_details_and_what_is_left_out(bench: Any, tmp_path: Path) -> None:
    records = [bench.make_record(n, target=("gpt", "claude")[n % 2]) for n in range(10)]
    records[0]["large_content"] = {"ab" * 32: "BIG " * 10}
    records[0]["custom_field"] = {"kept": True}
    report = build_report([_write(tmp_path / "r.jsonl", records)], tmp_path / "r.html")
    assert report.records == 10
    scripts = _scripts(report.path.read_text("utf-8"))
    index = json.loads(scripts["agentv-index-0"])
    first = index["rows"][0]
    assert first[0] == "case-000000"
    assert index["datasets"][first[1]] == "logistics"
    assert index["targets"][first[2]] == "gpt"
    assert first[3:8] == [0, records[0]["score"], first[5], round(records[0]["duration_ms"]), 1]
    assert index["statuses"][first[5]] == "ok"
    assert first[8] == records[0]["candidate_answer"]
    invalid = index["rows"][9]
    assert index["statuses"][invalid[5]] == "invalid" and invalid[6] is None
    assert invalid[4] is None  # errors are not scores: an invalid run shows none
    detail = json.loads(scripts["agentv-d-0-0"])[0]
    assert "lm_provider_request" not in detail and "candidate_answer" not in detail
    assert detail["raw_request"] == records[0]["raw_request"]
    assert detail["large_content"] == records[0]["large_content"]
    assert detail["custom_field"] == {"kept": True}
    assert detail["line_in_results"] == 1
    summary = index["summary"]
    assert summary["total"] == 10
    assert summary["statuses"] == {"ok": 6, "failed": 2, "error": 1, "invalid": 1}
    # over the 8 graded runs: the error and the invalid run are counted, not scored
    graded = [r for r in records if r["status"] in ("ok", "failed")]
    assert (summary["graded"], summary["pass_rate"]) == (8, 6 / 8)
    assert summary["mean"] == pytest.approx(sum(r["score"] for r in graded) / 8)
    assert sum(b["count"] for b in summary["histogram"]) == 8
    assert summary["tokens"]["input"] == sum(
        r.get("usage", {}).get("input_tokens", 0) for r in records
    )
    assert summary["judge_tokens"]["output"] == 48 * 8
    assert [t["target"] for t in summary["targets"]] == ["gpt", "claude"]
    assert summary["time"]["wall_seconds"] > 0
    # the figures are the summary's, whole: what `agentv.read_results(...).summary` says,
    # less its lists of cases (the table lists every run)
    whole = agentv.read_results(tmp_path / "r.jsonl").summary.to_dict()
    assert summary == page_summary(whole)
    assert set(whole) - set(summary) == {"errors_by_case", "cases"}
    assert whole["errors_by_case"] and "flaky" in whole["targets"][0]
    assert [set(t) for t in whole["targets"]] == [{*t, "flaky"} for t in summary["targets"]]


def test_huge_texts_are_shortened_for_display_and_say_where_the_whole_is(
    bench: Any, tmp_path: Path
) -> None:
    records = [bench.make_record(n) for n in range(3)]
    records[1]["candidate_answer"] = "a" * 3_000_000
    records[1]["raw_request"] = {"question": "q" * 2_000_000, "kept": "short"}
    results = _write(tmp_path / "r.jsonl", records)
    report = build_report([results], tmp_path / "r.html")
    html = report.path.read_text("utf-8")
    assert report.path.stat().st_size < results.stat().st_size // 10
    scripts = _scripts(html)
    row = json.loads(scripts["agentv-index-0"])["rows"][1]
    note = "the whole text is in r.jsonl, line 2]"
    assert (
        row[8]
        == "a" * DISPLAY_CHARS + f"\n[agentv report: 2,900,000 more characters not shown; {note}"
    )
    detail = json.loads(scripts["agentv-d-0-0"])[1]
    question = detail["raw_request"]["question"]
    assert question.startswith("q" * DISPLAY_CHARS + "\n[agentv report: 1,900,000 more")
    assert question.endswith(note) and detail["raw_request"]["kept"] == "short"
    # the other records are shown whole
    assert json.loads(scripts["agentv-d-0-0"])[0]["raw_request"] == records[0]["raw_request"]
    # and the results file still holds every character
    assert [len(r.candidate_answer) for _, r in read_results(results)][1] == 3_000_000


def test_agent_requests_are_left_out_too() -> None:
    record = {"eval_id": "a", "agent_provider_request": {"question": "q"}, "passed": True, "x": 1}
    assert detail_of(record) == {"x": 1}


def test_histogram_bins_as_the_summary_counts_them(tmp_path: Path) -> None:
    scores = [0.0, 0.2, 0.21, 0.8, 0.81, 1.0, float("nan")]
    records = [
        {"eval_id": f"c{n}", "dataset": "d", "status": "ok", "score": s, "candidate_answer": ""}
        for n, s in enumerate(scores)
    ]
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))  # NaN as Python writes it
    report = build_report([path], tmp_path / "r.html")
    index = json.loads(_scripts(report.path.read_text("utf-8"))["agentv-index-0"])
    # a boundary lands in the lower bin; a graded run's NaN score counts as 0.0 (the
    # summary's rule for a stray score), though its row shows no score
    assert [b["count"] for b in index["summary"]["histogram"]] == [3, 1, 0, 1, 2]
    assert index["summary"]["histogram"] == agentv.read_results(path).summary.to_dict()["histogram"]
    assert index["rows"][6][4] is None  # NaN: no score


def test_details_are_split_in_chunks(bench: Any, tmp_path: Path) -> None:
    records = [bench.make_record(n, status="ok") for n in range(CHUNK + 3)]
    report = build_report([_write(tmp_path / "r.jsonl", records)], tmp_path / "r.html")
    scripts = _scripts(report.path.read_text("utf-8"))
    assert len(json.loads(scripts["agentv-d-0-0"])) == CHUNK
    assert json.loads(scripts["agentv-d-0-1"])[2]["line"] == records[-1]["line"]
    assert json.loads(scripts["agentv-index-0"])["chunks"] == 2


def test_the_report_is_smaller_than_the_results(bench: Any, tmp_path: Path) -> None:
    results = bench.write_results(tmp_path / "r.jsonl", 2000)
    report = build_report([results], tmp_path / "r.html")
    ratio = report.path.stat().st_size / results.stat().st_size
    assert ratio < bench.GOAL_SIZE_RATIO, ratio


def test_lines_that_are_not_results_are_counted_and_left_out(bench: Any, tmp_path: Path) -> None:
    path = _write(
        tmp_path / "r.jsonl", [bench.make_record(0), bench.make_record(1)], '{"eval_id": "cut'
    )
    path.write_text("not json\n[1, 2]\n\n" + path.read_text())
    reader = read_results(path)
    assert [n for n, _ in reader] == [4, 5]
    assert [d.line for d in reader.diagnostics] == [1, 2, 6]
    report = build_report([path], tmp_path / "r.html")
    assert report.records == 2
    assert report.skipped == {str(path): 3}
    index = json.loads(_scripts(report.path.read_text("utf-8"))["agentv-index-0"])
    assert index["skipped_lines"] == 3 and index["skipped_examples"] == [1, 2, 6]


def test_yaml_results(bench: Any, tmp_path: Path) -> None:
    from agentv.results.writers._yaml import dumps_document

    records = [bench.make_record(n) for n in range(4)]
    path = tmp_path / "r.yaml"
    path.write_text("".join("---\n" + dumps_document(r) for r in records), encoding="utf-8")
    assert [r.eval_id for _, r in read_results(path)] == [r["eval_id"] for r in records]
    assert build_report([path], tmp_path / "r.html").records == 4


def test_default_paths() -> None:
    assert default_report_path([Path("a/run.jsonl")]) == Path("a/run.html")
    assert default_report_path([Path("a/base.jsonl"), Path("b/new.jsonl")]) == Path(
        "b/new-vs-base.html"
    )


def test_report_command(bench: Any, tmp_path: Path) -> None:
    base = _write(tmp_path / "base.jsonl", [bench.make_record(n) for n in range(3)])
    new = _write(tmp_path / "new.jsonl", [bench.make_record(n) for n in range(4)])
    result = invoke_cli("report", str(base))
    assert result.exit_code == 0, result.output
    assert f"Report written to: {tmp_path / 'base.html'} (3 results)" in result.output
    result = invoke_cli("report", str(base), str(new), "-o", str(tmp_path / "out" / "both.html"))
    assert result.exit_code == 0, result.output
    scripts = _scripts((tmp_path / "out" / "both.html").read_text("utf-8"))
    assert json.loads(scripts["agentv-meta"])["runs"] == 2
    assert json.loads(scripts["agentv-index-1"])["name"] == "new.jsonl"
    assert not list((tmp_path / "out").glob(".*.tmp"))  # written whole, then moved


def test_report_command_errors(tmp_path: Path) -> None:
    result = invoke_cli("report", str(tmp_path / "missing.jsonl"))
    assert result.exit_code == 1
    assert "results file not found" in result.output
    assert not (tmp_path / "missing.html").exists()
    assert invoke_cli("report").exit_code == 2


@pytest.mark.slow  # its run asks git for the commit it is on
def test_eval_report_writes_it_next_to_the_results(repo: Path) -> None:
    assert invoke_cli("init").exit_code == 0
    result = invoke_cli("eval", "evals/", "--out", "r.jsonl", "--report", "-q")
    assert f"Report written to: {repo / 'r.html'}" in result.output, result.output
    scripts = _scripts((repo / "r.html").read_text("utf-8"))
    rows = json.loads(scripts["agentv-index-0"])["rows"]
    assert len(rows) == len((repo / "r.jsonl").read_text().splitlines())
