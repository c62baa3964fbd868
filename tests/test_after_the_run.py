"""After the run, exactly (docs/after-the-run.md): a results file is the unit of a run.
Each scenario runs real `agentv` processes: an interrupted run resumed (the summary,
--threshold and the exit code are the whole file's), errored runs redone exactly under
--repeat (a loopback server counts what it gets), an invalid case fixed, rerun and compared,
the same with YAML results, errors kept out of the scores, queue time apart, and answers
reused from the cache reported as reused."""

from __future__ import annotations

import json
import signal
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.cli import agentv_cli, start_agentv
from support.fakes import FakeLLMServer, Fault
from support.files import write
from support.targets import mock_target, openai_target, write_targets

#: every test here runs agentv as a process: left out of `make test-fast`
pytestmark = pytest.mark.slow

CASES = 12
ANSWER = "The answer is 42."  # what the mock target says


def _suite(repo: Path, *, cases: int = CASES) -> None:
    """Cases c0..; every third one wants "7" where the target says 42: it fails."""
    lines = ["$schema: agentv-eval-v2", "evalcases:"]
    for i in range(cases):
        value = "42" if i % 3 else "7"
        lines.append(
            f"  - {{id: c{i}, outcome: ok, input_messages: [{{role: user, content: 'q{i}'}}],"
            f" evaluators: [{{type: contains, value: '{value}'}}]}}"
        )
    write(repo, "evals/s.yaml", "\n".join(lines) + "\n")


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _yaml(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d is not None]


def _interrupted(repo: Path, out: Path, *args: str, written: int = 4) -> None:
    """Start a run writing ``out`` and stop it with SIGINT once ``written`` records are
    there, as Ctrl-C does."""
    proc = start_agentv(repo, "eval", "evals/", "--workers", "2", "--out", str(out), *args)
    deadline = time.monotonic() + 60
    separator = "\n---\n" if out.suffix == ".yaml" else "\n"
    while time.monotonic() < deadline:
        text = out.read_text(encoding="utf-8") if out.exists() else ""
        if written <= text.count(separator) + (out.suffix == ".yaml" and bool(text)) < CASES:
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "To finish the run: agentv eval evals/ --resume" in err


def test_an_interrupted_run_resumed_is_summarised_and_gated_as_the_whole_file(
    repo: Path,
) -> None:
    write_targets(repo, mock_target(response=ANSWER, delay_ms=200))
    _suite(repo)
    out = repo / "r.jsonl"
    _interrupted(repo, out)
    before = len(_jsonl(out))
    assert 4 <= before < CASES

    summary = repo / "s.json"
    resumed = agentv_cli(
        repo,
        "eval",
        "evals/",
        "--resume",
        "r.jsonl",
        "--threshold",
        "0.7",
        "--summary-json",
        "s.json",
    )
    # the file holds 12 runs, 8 passing (every third fails): 0.667 < 0.7, whatever this
    # invocation ran
    assert resumed.returncode == 1, resumed.stdout + resumed.stderr
    assert f"This run: {CASES - before} runs; the summary covers the whole results file" in (
        resumed.stdout
    )
    assert "Total eval cases: 12" in resumed.stdout
    assert "Mean score: 0.667" in resumed.stdout
    assert "Mean score 0.667 of the 12 graded run(s) is below the threshold 0.700" in (
        resumed.stderr
    )
    figures = json.loads(summary.read_text(encoding="utf-8"))
    assert (figures["total"], figures["graded"], figures["ok"]) == (12, 12, 8)
    assert figures["mean"] == 8 / 12
    records = _jsonl(out)
    assert Counter(r["eval_id"] for r in records) == {f"c{i}": 1 for i in range(CASES)}


def test_errored_runs_are_redone_exactly_under_repeat(repo: Path) -> None:
    broken = {3, 7, 11}  # the 3rd, 7th and 11th request (one worker: a fixed order)
    with FakeLLMServer() as server:
        write_targets(repo, openai_target(server.url, max_retries=0))
        _suite(repo, cases=3)
        server.script(*[Fault.bad_request() if n in broken else None for n in range(1, 12)])
        first = agentv_cli(
            repo, "eval", "evals/", "--repeat", "5", "--workers", "1", "--out", "r.jsonl"
        )
        assert first.returncode == 3, first.stdout + first.stderr  # some runs errored
        records = _jsonl(repo / "r.jsonl")
        assert len(records) == 15
        errored = {(r["eval_id"], r["repeat"]) for r in records if r["status"] == "error"}
        assert len(errored) == 3
        sent_first = len(server.requests)

        plain = agentv_cli(repo, "eval", "evals/", "--repeat", "5", "--resume", "r.jsonl")
        assert plain.returncode == 0  # an error record is a record: nothing to do ...
        assert "Nothing to do" in plain.stdout
        # ... says which runs it leaves, and the flag that runs them again
        shown = ", ".join(f"{case} [default] #{repeat + 1}" for case, repeat in sorted(errored))
        assert (
            f"3 run(s) recorded as error, invalid or user_error are kept as they are ({shown}); "
            "to run them again: agentv eval --rerun-errors r.jsonl"
        ) in plain.stdout
        assert len(server.requests) == sent_first

        # the eval files and the repeats come from the results file; resume and rerun at once
        retried = agentv_cli(
            repo, "eval", "--repeat", "5", "--resume", "r.jsonl", "--rerun-errors", "r.jsonl"
        )
        assert retried.returncode == 7, retried.stdout + retried.stderr  # ... unless asked
        assert "Resuming" in retried.stdout and "3 run(s) to do (3 retried after an error)" in (
            retried.stdout
        )
        assert len(server.requests) == sent_first + 3  # exactly the errored runs
        records = _jsonl(repo / "r.jsonl")
        assert len(records) == 18  # one file holds the whole truth ...
        redone = {(r["eval_id"], r["repeat"]) for r in records[15:]}
        assert redone == errored
        assert "Errors: 0" in retried.stdout  # ... and its latest records are all graded
        assert "Runs: 15 of 3 eval cases (5 repeats)" in retried.stdout
        # every run fails (the fake says "Hello"): the exit code says so
        assert "15 of the 15 graded run(s) failed: exit code 7" in retried.stderr

        # the old spelling still works: nothing is left to retry now
        old = agentv_cli(
            repo, "eval", "evals/", "--repeat", "5", "--resume", "r.jsonl", "--retry-errors"
        )
        assert old.returncode == 0 and "Nothing to do" in old.stdout, old.stdout + old.stderr
        assert len(server.requests) == sent_first + 3


def test_resume_and_rerun_without_paths_take_the_eval_files_from_the_results(
    repo: Path,
) -> None:
    write_targets(repo, mock_target(response=ANSWER))
    _suite(repo, cases=3)
    write(repo, "other/skip.yaml", (repo / "evals/s.yaml").read_text().replace("id: c", "id: o"))
    first = agentv_cli(repo, "eval", "evals/", "--out", "r.jsonl")
    assert first.returncode == 7  # c0 fails
    rerun = agentv_cli(repo, "eval", "--rerun-failed", "r.jsonl")
    assert rerun.returncode == 7, rerun.stdout + rerun.stderr
    assert "Rerunning 1 run(s) (error, failed, invalid, uncertain, user_error) from r.jsonl" in (
        rerun.stdout
    )
    assert [r["eval_id"] for r in _jsonl(repo / "r.jsonl")][3:] == ["c0"]
    nothing = agentv_cli(repo, "eval", "--resume", "r.jsonl")
    assert nothing.returncode == 0 and "Nothing to do" in nothing.stdout
    # without paths or a results file to take them from: a usage error that says what to give
    none = agentv_cli(repo, "eval")
    assert none.returncode == 2
    assert "give the eval files, folders or globs to run" in none.stderr
    # a --rerun-errors of another file than the one resumed is refused
    both = agentv_cli(repo, "eval", "evals/", "--resume", "r.jsonl", "--rerun-errors", "x.jsonl")
    assert both.returncode == 2
    assert "--rerun-errors must name the same file" in both.stderr


def test_rerun_errors_picks_runs_not_cases_and_appends_to_its_file(repo: Path) -> None:
    with FakeLLMServer() as server:
        write_targets(repo, openai_target(server.url, max_retries=0))
        _suite(repo, cases=1)
        server.script(None, None, None, Fault.bad_request())  # the 4th request: a later run
        first = agentv_cli(
            repo, "eval", "evals/", "--repeat", "4", "--workers", "1", "--out", "r.jsonl"
        )
        assert first.returncode == 3
        records = _jsonl(repo / "r.jsonl")
        ((case, repeat),) = [(r["eval_id"], r["repeat"]) for r in records if r["status"] == "error"]
        assert (case, repeat >= 1) == ("c0", True)
        sent = len(server.requests)
        # without --repeat the file's own (one run) would plan only repeat 0: the rerun
        # still takes the errored run itself, and only it
        again = agentv_cli(repo, "eval", "evals/", "--rerun-errors", "r.jsonl")
        assert again.returncode == 7, again.stdout + again.stderr  # graded now: failed
        assert (
            "Rerunning 1 run(s) (error, invalid, user_error) from r.jsonl, appending to it"
            in again.stdout
        )
        assert len(server.requests) == sent + 1
        records = _jsonl(repo / "r.jsonl")
        assert [(r["eval_id"], r["repeat"], r["status"]) for r in records[4:]] == [
            ("c0", repeat, "failed")  # c0 wants "7": graded now, no longer an error
        ]
        nothing = agentv_cli(repo, "eval", "evals/", "--rerun-errors", "r.jsonl")
        assert nothing.returncode == 0 and "Nothing to do" in nothing.stdout


def test_an_invalid_case_fixed_and_rerun_compares_as_improved(repo: Path) -> None:
    write_targets(repo, mock_target(response=ANSWER))
    broken = (
        "$schema: agentv-eval-v2\nevalcases:\n"
        "  - {id: good, outcome: ok, input_messages: [{role: user, content: hi}],"
        " evaluators: [{type: contains, value: '42'}]}\n"
        "  - {id: fixed, outcom: ok, input_messages: [{role: user, content: hi}],"
        " evaluators: [{type: contains, value: '42'}]}\n"
    )
    write(repo, "evals/s.yaml", broken)
    first = agentv_cli(repo, "eval", "evals/", "--out", "r.jsonl")
    assert first.returncode == 3
    (invalid,) = [r for r in _jsonl(repo / "r.jsonl") if r["status"] == "invalid"]
    # keyed like every run: the target it was planned for, and its repeat
    assert (invalid["eval_id"], invalid["target"], invalid["repeat"]) == ("fixed", "default", 0)
    (repo / "base.jsonl").write_bytes((repo / "r.jsonl").read_bytes())

    write(repo, "evals/s.yaml", broken.replace("outcom:", "outcome:"))
    again = agentv_cli(repo, "eval", "evals/", "--rerun-errors", "r.jsonl")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "Passed: 2  Failed: 0  Errors: 0  Invalid: 0" in again.stdout  # the whole file

    compared = agentv_cli(repo, "compare", "base.jsonl", "r.jsonl", "--format", "json", timeout=60)
    data = json.loads(compared.stdout)
    assert data["counts"] == {"improved": 1, "regressed": 0, "unchanged": 1, "new": 0, "missing": 0}
    (change,) = data["changed"]
    assert (change["eval_id"], change["target"], change["verdict"]) == (
        "fixed",
        "default",
        "improved",
    )
    assert change["base"] == {"score": None, "status": "invalid", "runs": 1, "graded": 0}
    assert data["runs"]["base"]["statuses"] == {"ok": 1, "invalid": 1}
    assert data["runs"]["new"] == {"runs": 2, "graded": 2, "statuses": {"ok": 2}, "mean": 1.0}
    assert data["mean_delta"] == 0.0  # over the cases graded in both: "good" only


def test_yaml_results_resume_rerun_compare_and_never_mix_formats(repo: Path) -> None:
    write_targets(repo, mock_target(response=ANSWER, delay_ms=200))
    _suite(repo)
    out = repo / "y.yaml"
    _interrupted(repo, out, "--output-format", "yaml")
    before = len(_yaml(out))
    assert 4 <= before < CASES

    mixed = agentv_cli(repo, "eval", "evals/", "--resume", "y.yaml", "--output-format", "jsonl")
    assert mixed.returncode == 1
    assert "holds yaml results; a file never mixes two formats" in mixed.stderr

    resumed = agentv_cli(
        repo, "eval", "evals/", "--resume", "y.yaml"
    )  # the file's own format, no flag needed
    assert resumed.returncode == 7, resumed.stdout + resumed.stderr  # 4 runs failed
    records = _yaml(out)  # PyYAML still reads the whole file
    assert Counter(r["eval_id"] for r in records) == {f"c{i}": 1 for i in range(CASES)}
    assert "Total eval cases: 12" in resumed.stdout
    nothing = agentv_cli(repo, "eval", "evals/", "--resume", "y.yaml")
    assert nothing.returncode == 0 and "Nothing to do" in nothing.stdout

    failed = sorted(r["eval_id"] for r in records if r["status"] == "failed")
    assert failed == ["c0", "c3", "c6", "c9"]
    rerun = agentv_cli(repo, "eval", "evals/", "--rerun-failed", "y.yaml")
    assert rerun.returncode == 7  # they fail again
    assert (
        "Rerunning 4 run(s) (error, failed, invalid, uncertain, user_error) from y.yaml, "
        "appending to it" in (rerun.stdout)
    )
    assert len(_yaml(out)) == CASES + 4

    write(repo, "evals/s.yaml", (repo / "evals/s.yaml").read_text().replace("'7'", "'42'"))
    assert agentv_cli(repo, "eval", "evals/", "--out", "x.jsonl").returncode == 0
    compared = agentv_cli(repo, "compare", "y.yaml", "x.jsonl", "--format", "json", timeout=60)
    assert compared.returncode == 0, compared.stderr
    data = json.loads(compared.stdout)
    assert data["counts"]["improved"] == 4 and data["counts"]["new"] == 0
    report = agentv_cli(repo, "report", "y.yaml", "--junit", "j.xml", timeout=60)
    assert report.returncode == 0, report.stderr
    assert f"({CASES} results)" in report.stdout  # the latest record of each run
    assert (repo / "j.xml").read_text(encoding="utf-8").count("<testcase ") == CASES


def test_an_errored_run_is_not_a_zero_score(repo: Path) -> None:
    # an agent that breaks on c0's question and answers the others
    write(
        repo,
        "agent.py",
        "import sys\nif 'q0' in sys.argv[1]:\n    sys.exit('the agent broke')\n"
        "print('The answer is 42.')\n",
    )
    write(
        repo,
        ".agentv/targets.yaml",
        "$schema: agentv-targets-v2.2\ntargets:\n  - name: default\n    provider: cli\n"
        f"    command_template: {sys.executable} agent.py {{PROMPT}}\n",
    )
    _suite(repo, cases=2)  # c0 errors, c1 passes
    done = agentv_cli(
        repo, "eval", "evals/", "--out", "r.jsonl", "--summary-json", "s.json", "--threshold", "0.9"
    )
    figures = json.loads((repo / "s.json").read_text(encoding="utf-8"))
    assert (figures["total"], figures["graded"], figures["errors"]) == (2, 1, 1)
    assert figures["mean"] == 1.0 and figures["pass_rate"] == 1.0  # not 0.5: c0 had no score
    assert "Pass rate: 100.0% (1 of 1 graded runs; 1 not graded" in done.stdout
    assert done.returncode == 3, done.stderr  # the gate passes; the error has its own code


def test_waiting_for_a_worker_is_queue_time_not_case_time(repo: Path) -> None:
    write_targets(repo, mock_target(response=ANSWER, delay_ms=400))
    _suite(repo, cases=6)
    done = agentv_cli(repo, "eval", "evals/", "--workers", "2", "--out", "r.jsonl")
    assert done.returncode == 7, done.stderr  # c0 and c3 fail
    records = _jsonl(repo / "r.jsonl")
    # two at once, three rounds of 0.4 s: each case took its 0.4 s; a case picked while both
    # turns were taken waited, and that wait is not its time (or it would be both)
    durations = [r["duration_ms"] for r in records]
    assert all(d >= 390 for d in durations), durations
    waited = [r for r in records if r["queued_ms"] >= 300]
    assert waited, [r["queued_ms"] for r in records]
    assert all(r["duration_ms"] < r["queued_ms"] + r["latency_ms"] for r in waited), waited
    # the first ones at once: they waited less than any case takes
    assert min(r["queued_ms"] for r in records) < min(durations)


def test_answers_reused_from_the_cache_are_reported_as_reused(repo: Path) -> None:
    with FakeLLMServer() as server:
        write_targets(repo, openai_target(server.url, max_retries=0))
        _suite(repo, cases=2)
        first = agentv_cli(repo, "eval", "evals/", "--cache", "--out", "a.jsonl")
        assert first.returncode == 7  # the fake server's answers fail the checks
        sent = len(server.requests)
        second = agentv_cli(repo, "eval", "evals/", "--cache", "--out", "b.jsonl")
        assert len(server.requests) == sent  # nothing was sent ...
    spent = [line for line in first.stdout.splitlines() if line.startswith("  default: in ")]
    reused = [line for line in second.stdout.splitlines() if line.startswith("  default: in ")]
    (spent_line,) = spent
    tokens = spent_line.removeprefix("  default: ")  # "in N / out M"
    assert reused == [f"  default: in 0 / out 0 (reused: {tokens})"]  # ... nor spent
    assert all(r["cached"] is True for r in _jsonl(repo / "b.jsonl"))
