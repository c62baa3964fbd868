"""The benchmark harness (``benchmarks/``) still works: generator, checks, measuring, and a
tiny ``make bench`` run through the same code path. Figures are not asserted, only that the
runs succeeded and the figures have the expected shape."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest

from agentv.evalfile.loader import load_eval_file

BENCH_DIR = Path(__file__).resolve().parent.parent / "benchmarks"


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> dict[str, ModuleType]:
    """The benchmark scripts as modules (they import each other as top-level modules)."""
    monkeypatch.syspath_prepend(str(BENCH_DIR))
    for name in ("gen_suite", "measure", "run"):
        sys.modules.pop(name, None)
    import gen_suite
    import measure

    import run

    yield {"gen_suite": gen_suite, "measure": measure, "run": run}
    for name in ("gen_suite", "measure", "run"):
        sys.modules.pop(name, None)


def test_generated_suite_loads_with_shared_files_and_one_contains_evaluator(
    bench: dict[str, ModuleType], tmp_path: Path
) -> None:
    gen = bench["gen_suite"]
    suite = gen.generate_suite(tmp_path / "suite", 5, server_url="http://127.0.0.1:9")
    loaded = load_eval_file(suite.eval_file)

    assert [d for d in loaded.diagnostics if d.severity == "error"] == []
    assert [c.id for c in loaded.cases] == suite.case_ids()
    context = (suite.folder / gen.CONTEXT_FILE).resolve()
    guideline = (suite.folder / gen.GUIDELINE_FILE).resolve()
    for case in loaded.cases:
        assert [m.role for m in case.input_messages] == ["system", "user", "assistant", "user"]
        assert [p.resolve() for p in case.input_files] == [context]
        assert [p.resolve() for p in case.guideline_paths] == [guideline]
        assert [(e.spec.type, e.spec.value) for e in case.evaluators] == [("contains", "42")]
    targets = suite.targets_file.read_text(encoding="utf-8")
    assert "provider: mock" in targets
    assert '"http://127.0.0.1:9/v1"' in targets


def test_suite_is_reused_unless_its_size_changes(
    bench: dict[str, ModuleType], tmp_path: Path
) -> None:
    gen = bench["gen_suite"]
    suite = gen.generate_suite(tmp_path / "s", 3)
    suite.eval_file.write_text(suite.eval_file.read_text() + "# marker\n")
    gen.generate_suite(tmp_path / "s", 3)
    assert suite.eval_file.read_text().endswith("# marker\n")  # reused, not rewritten

    bigger = gen.generate_suite(tmp_path / "s", 4)
    assert "# marker" not in bigger.eval_file.read_text()
    assert len(load_eval_file(bigger.eval_file).cases) == 4


def _record(case: str, score: float = 1.0, answer: str = "The answer is 42.") -> dict:
    return {
        "eval_id": case,
        "score": score,
        "candidate_answer": answer,
        "evaluator_results": [{"name": "c", "type": "contains", "score": score}],
    }


@pytest.mark.parametrize(
    ("records", "message"),
    [
        ([_record("case-000000")], "1 result lines for 2 cases"),
        ([_record("case-000000"), _record("case-000001", 0.0)], "scored 0.0"),
        ([_record("case-000000"), _record("case-000000")], "written twice"),
        ([_record("case-000000"), {**_record("case-000001"), "error": "boom"}], "boom"),
        ([_record("case-000000"), _record("case-000001", answer="no")], "lacks the needle"),
        ([_record("case-000000"), _record("case-000009")], "unexpected eval_id"),
    ],
)
def test_result_checks_reject_bad_runs(
    bench: dict[str, ModuleType], tmp_path: Path, records: list[dict], message: str
) -> None:
    run = bench["run"]
    suite = bench["gen_suite"].generate_suite(tmp_path / "s", 2)
    out = tmp_path / "out.jsonl"
    out.write_text("".join(json.dumps(r) + "\n" for r in records))
    with pytest.raises(run.RunCheckError, match=message):
        run.check_results(out, suite)
    out.write_text("".join(json.dumps(_record(c)) + "\n" for c in reversed(suite.case_ids())))
    run.check_results(out, suite)  # any order, all passing: fine


@pytest.mark.slow
def test_measure_reports_child_rss_and_kills_hung_runs(
    bench: dict[str, ModuleType], tmp_path: Path
) -> None:
    measure = bench["measure"]
    big = measure.measure(
        [sys.executable, "-c", "x = bytearray(80 * 1024 * 1024); print(len(x))"],
        cwd=tmp_path,
        log_path=tmp_path / "big.log",
    )
    assert big.returncode == 0
    assert big.max_rss_mb >= 80
    assert (tmp_path / "big.log").read_text().strip() == str(80 * 1024 * 1024)

    # The harness's own memory must not leak into a child's figure (Linux counts the
    # memory of the process a child was forked from until it calls exec).
    ballast = bytearray(300 * 1024 * 1024)
    small = measure.measure(
        [sys.executable, "-c", "pass"], cwd=tmp_path, log_path=tmp_path / "small.log"
    )
    assert small.returncode == 0
    assert small.max_rss_mb < 100
    del ballast

    missing = measure.measure(
        ["no-such-program-here"], cwd=tmp_path, log_path=tmp_path / "missing.log"
    )
    assert missing.returncode == 127
    assert "cannot run no-such-program-here" in (tmp_path / "missing.log").read_text()

    hung = measure.measure(
        [sys.executable, "-c", "import time; time.sleep(60)"],
        cwd=tmp_path,
        log_path=tmp_path / "hung.log",
        timeout_s=0.5,
    )
    assert hung.timed_out
    assert hung.returncode != 0
    assert hung.wall_s < 30


def test_max_in_flight_counts_overlapping_requests(bench: dict[str, ModuleType]) -> None:
    mif = bench["measure"].max_in_flight
    assert mif([0.0, 0.01, 0.02, 0.5], 0.1) == 3
    assert mif([0.0, 0.2, 0.4], 0.1) == 1


@pytest.mark.slow
def test_make_bench_code_path_at_tiny_sizes(
    bench: dict[str, ModuleType], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = bench["run"]
    output = tmp_path / "latest.json"
    argv = ["--only", "S1,S2,S4", "--s1-sizes", "20", "--s2-size", "10", "--delay-ms", "5"]
    argv += ["--reps", "1", "--workers", "5", "--work", str(tmp_path / "work")]
    argv += ["--output", str(output)]

    code = run.main(argv)

    printed = capsys.readouterr().out
    assert code == 0, printed
    data = json.loads(output.read_text())
    references = [f"S2/10/{mode}" for mode in run.REFERENCE_MODES]
    keys = [row["key"] for row in data["rows"]]
    assert keys == ["S1/20", "S1/20/validate", "S2/10", *references, "S4/version", "S4/1-case"]
    for row in data["rows"]:
        assert row["wall_s"] > 0 and row["max_rss_mb"] > 0 and row["cpu_s"] >= 0
        assert row["runs"]
    rows = {row["key"]: row for row in data["rows"]}
    s1 = rows["S1/20"]
    assert s1["cases_per_s"] > 0 and len(s1["runs"]) == 1
    assert rows["S1/20/validate"]["ok"] and len(rows["S1/20/validate"]["runs"]) == 1
    for key in ("S2/10", *references):
        assert rows[key]["efficiency"] > 0 and rows[key]["max_in_flight"] >= 1
        assert rows[key]["cpu_ms_per_request"] > 0 and len(rows[key]["efficiency_window_runs"]) == 1
    assert len(rows["S4/version"]["runs"]) == 5  # --version gets at least 5 runs
    # Goals are tied to the full sizes, so a tiny run judges only the start-up goal.
    status = {g["row"]: g["status"] for g in data["goals"]}
    assert status.pop("S4/version") in ("PASS", "FAIL")
    assert set(status.values()) == {"n/a"}
    assert len(data["goals"]) == len(run.GOALS)
    assert "| S1 overhead (instant target) | 20 |" in printed
    assert data["meta"]["agentv_version"]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["sdk-create", "sdk-post", "aiohttp"])
def test_bare_client_sends_the_body_n_times_and_checks_the_answers(
    bench: dict[str, ModuleType], tmp_path: Path, mode: str
) -> None:
    measure = bench["measure"]
    body = {"model": "fake", "messages": [{"role": "user", "content": "6 times 7?"}]}
    body_file = tmp_path / "body.json"
    body_file.write_text(json.dumps(body))
    module = measure.load_fake_server_module()
    argv = [sys.executable, str(BENCH_DIR / "bare_client.py"), "--mode", mode]
    argv += ["--body", str(body_file), "--n", "7", "--workers", "3"]

    with module.FakeLLMServer(reply="The answer is 42.") as server:
        good = measure.measure(
            [*argv, "--url", server.url + "/v1"], cwd=tmp_path, log_path=tmp_path / "good.log"
        )
        sent = [r.body for r in server.requests]
    with module.FakeLLMServer(reply="I do not know.") as server:
        bad = measure.measure(
            [*argv, "--url", server.url + "/v1"], cwd=tmp_path, log_path=tmp_path / "bad.log"
        )

    assert good.returncode == 0, (tmp_path / "good.log").read_text()
    assert sent == [body] * 7
    assert bad.returncode == 1
    assert "7 of 7 answers lacked '42'" in (tmp_path / "bad.log").read_text()


async def test_fake_server_streams_chat_completions_for_streaming_clients(
    bench: dict[str, ModuleType],
) -> None:
    # The TypeScript AgentV peer always streams; the fake must answer it with SSE.
    from openai import AsyncOpenAI

    module = bench["measure"].load_fake_server_module()
    with module.FakeLLMServer(reply="The answer is 42.") as server:
        client = AsyncOpenAI(base_url=server.url + "/v1", api_key="dummy")
        stream = await client.chat.completions.create(
            model="fake",
            messages=[{"role": "user", "content": "6 times 7?"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        text, finish, usage = "", None, None
        async for chunk in stream:
            for choice in chunk.choices:
                text += choice.delta.content or ""
                finish = choice.finish_reason or finish
            usage = chunk.usage or usage
        await client.close()
    assert text == "The answer is 42."
    assert finish == "stop"
    assert usage is not None and usage.completion_tokens == 4
    assert server.requests[0].body["stream"] is True


@pytest.mark.slow
def test_make_bench_rate_limit_and_fault_scenarios_at_tiny_sizes(
    bench: dict[str, ModuleType], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # S5 against a limit low enough to answer 429s, S6 with its 500s and one hang (the
    # first request: cut by the target's 2 s timeout), and the S2 run S6 is compared with
    run = bench["run"]
    output = tmp_path / "latest.json"
    argv = ["--only", "S5,S6", "--s5-size", "20", "--s6-size", "20", "--delay-ms", "5"]
    argv += ["--s5-limits", "10rps-burst5", "--s5-latency-ms", "5", "--reps", "1"]
    argv += ["--workers", "5"]
    argv += ["--work", str(tmp_path / "work"), "--output", str(output)]

    code = run.main(argv)

    printed = capsys.readouterr().out
    assert code == 0, printed
    data = json.loads(output.read_text())
    rows = {row["key"]: row for row in data["rows"]}
    s5_key = "S5/10rps-burst5/5ms/20"
    assert list(rows) == [s5_key, "S2/20", "S6/20"]  # S6 ran its fault-free S2 first
    assert all(row["ok"] for row in rows.values())
    s5, s6 = rows[s5_key], rows["S6/20"]
    assert s5["failed_cases"] == 0 and s5["limited"] > 0
    assert s5["requests"] == 20 + s5["limited"]
    assert 0 < s5["limited_share"] == s5["limited_share_max"] < 1
    assert (s5["limit"], s5["latency_ms"], s5["limit_rps"]) == ("10rps-burst5", 5, 10)
    # goodput: passed cases over the arrivals' window (the last accepted one, plus 1 / rate)
    (one,) = s5["runs"]
    assert one["goodput"] == s5["goodput"] == s5["goodput_min"]
    assert one["goodput"] == pytest.approx(20 / (one["ok_span_s"] + 0.1) / 10, abs=0.001)
    assert s5["server_window_s"] > one["ok_span_s"] > 0  # to the last answer: longer
    assert s6["failed_cases"] == 0 and s6["hangs"] >= 1 and s6["server_errors"] >= 1
    assert s6["requests"] == 20 + s6["hangs"] + s6["server_errors"]
    assert s6["wall_vs_s2"] > 0 and s6["floor_s"] > 0
    # the ideal runner's window holds at least the hang's 2 s timeout, and its S2 ratio is
    # the ideal time over the same S2 wall time as the measured one
    assert s6["ideal_window_s"] > 2 and s6["ideal_s"] > s6["ideal_window_s"]
    ratio = s6["ideal_s"] / s6["s2_wall_s"]
    assert s6["ideal_vs_s2"] == pytest.approx(ratio, abs=0.001)
    assert s6["target_settings"]["timeout_seconds"] == run.S6_TARGET_SETTINGS["timeout_seconds"]
    assert "| 10 requests/s, burst 5 | 5 ms | 20 |" in printed
    assert "request window s | goodput" in printed  # S6's table
    # the fixed goals are tied to the full sizes: n/a here; S5's are the cell's
    judged = {g["goal"]: g for g in data["goals"] if g["status"] != "n/a"}
    assert set(judged) == {
        "S5 10 requests/s, burst 5, 5 ms, 20 cases: no failed case",
        "S5 10 requests/s, burst 5, 5 ms, 20 cases: goodput >= 0.9",
        "S5 10 requests/s, burst 5, 5 ms, 20 cases: 429s <= 10 %",
    }
    assert judged["S5 10 requests/s, burst 5, 5 ms, 20 cases: no failed case"]["status"] == "PASS"


def test_s5_limit_names(bench: dict[str, ModuleType]) -> None:
    run, module = bench["run"], bench["measure"].load_fake_server_module()
    assert run.parse_limit("20rps-burst1", module) == module.BucketLimit(20.0, 1.0)
    assert run.parse_limit("600rpm", module) == module.WindowLimit(600, 60.0)
    assert run.limit_label("20rps-burst20") == "20 requests/s, burst 20"
    assert run.limit_label("20rps-burst1") == "20 requests/s, no burst"
    assert run.limit_label("600rpm") == "600 requests/minute"
    with pytest.raises(ValueError, match="unknown S5 limit 'fast'"):
        run.parse_limit("fast", module)


def test_the_ideal_fault_window_counts_every_requests_time_and_the_tail(
    bench: dict[str, ModuleType],
) -> None:
    ideal = bench["run"].ideal_fault_window
    never = 10**9
    # no 500s; only request 1 hangs: for its 2 s the other 4 turns serve 80 cases, then
    # its retry and the 419 cases left take 84 rounds of 5 x 0.1 s
    assert ideal(500, 5, 0.1, fail_every=never, hang_every=never) == pytest.approx(10.4)
    # one request at a time: every request in turn, the hang's 2 s included
    assert ideal(10, 1, 0.1, fail_every=never, hang_every=never) == pytest.approx(3.0)
    # 500s add their requests and back-offs; the jitter is drawn from the seed
    faulty = [ideal(200, 10, 0.01, hang_every=never, seed=s) for s in range(3)]
    assert all(x > ideal(200, 10, 0.01, fail_every=never, hang_every=never) for x in faulty)
    assert ideal(200, 10, 0.01, hang_every=never, seed=1) == faulty[1]
    # S6 itself: a hang late in the run leaves a tail the even spread does not count
    s6 = ideal(2000, 50, 0.1)
    even = (2564 - 52) * 0.1 / 50 + 52 * 2.0 / 50
    assert even + 1.0 < s6 < even + 4.0


def test_peer_s5_counts_failed_cases_instead_of_failing(
    bench: dict[str, ModuleType], tmp_path: Path
) -> None:
    # the peers' S5 readers: a peer that gives up on 429s has that as its result
    sys.modules.pop("peers", None)
    import peers

    out = tmp_path / "out"
    out.mkdir()
    records = [
        {"test_id": "case-000000", "execution_status": "ok", "score": 1},
        {"test_id": "case-000001", "execution_status": "execution_error", "error": "HTTP 429"},
    ]
    (out / "index.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    failed, errors = peers.count_agentv_ts(out, 3)  # one passed, one error, one missing
    assert failed == 2 and "HTTP 429" in errors[0]
    assert peers.count_agentv_ts(tmp_path / "none", 3)[0] == 3
    sys.modules.pop("peers", None)


@pytest.mark.slow
def test_peer_s6_runs_agentv_against_the_faulty_server_and_reports_it(
    bench: dict[str, ModuleType], tmp_path: Path
) -> None:
    # the peers' S6 path for this project (the peers themselves need npm and PyPI)
    sys.modules.pop("peers", None)
    import peers

    run = bench["run"]
    work = tmp_path / "work"
    (work / "runs").mkdir(parents=True)
    settings = run.Bench(
        agentv=run.find_agentv(),
        work=work,
        reps=1,
        workers=5,
        delay_ms=5,
        timeout_s=None,
        keep=False,
        env=run.child_env(),
    )
    module = bench["measure"].load_fake_server_module()
    faults = (
        module.Every(peers.S6_FAIL_EVERY, module.Fault.server_error()),
        module.Every(peers.S6_HANG_EVERY, module.Fault.hanging(), at=1),
    )
    with module.FakeLLMServer(
        delay_ms=5, reply="The answer is 42.", record=True, standing=faults
    ) as server:
        pb = peers.PeerBench(bench=settings, work=tmp_path / "peers", faulty_server=server)
        result = peers.run_faulty(pb, "S6", "agentv", 12, 0, 120)

    assert result["finished"] and result["failed_cases"] == 0, result["errors"]
    assert result["hangs"] == 1 and result["server_errors"] >= 2  # the first request hung
    assert result["requests"] == 12 + result["hangs"] + result["server_errors"]
    row = peers.summarize_faulty("agentv", "S6", 12, [result])
    row["wall_vs_s2"] = 2.5
    table = peers.format_s6([row])
    assert "| agentv (this project) | 12 | 1 |" in table and "| 2.50 |" in table
    assert table.rstrip().endswith("| 0 | ok |")
    sys.modules.pop("peers", None)


@pytest.mark.slow
def test_peer_s5_runs_agentv_against_a_limited_server_and_reports_it(
    bench: dict[str, ModuleType], tmp_path: Path
) -> None:
    # the peers' S5 path for this project: one cell of the sweep, its tables
    sys.modules.pop("peers", None)
    import peers

    run = bench["run"]
    work = tmp_path / "work"
    (work / "runs").mkdir(parents=True)
    settings = run.Bench(
        agentv=run.find_agentv(),
        work=work,
        reps=1,
        workers=5,
        delay_ms=100,
        timeout_s=None,
        keep=False,
        env=run.child_env(),
    )
    module = bench["measure"].load_fake_server_module()
    limit = run.parse_limit("10rps-burst5", module)
    with module.FakeLLMServer(delay_ms=5, reply="The answer is 42.", limit=limit) as server:
        pb = peers.PeerBench(bench=settings, work=tmp_path / "peers", limited_server=server)
        result = peers.run_faulty(pb, "S5", "agentv", 12, 0, 120, 0.005)

    assert result["finished"] and result["failed_cases"] == 0, result["errors"]
    assert result["limited"] > 0 and result["requests"] == 12 + result["limited"]
    window = result["ok_span_s"] + 0.1  # to the last accepted arrival, plus 1 / rate
    assert result["goodput"] == pytest.approx(12 / window / 10)
    row = peers.summarize_faulty("agentv", "S5", 12, [result])
    row.update(limit="10rps-burst5", latency_ms=5.0)
    table = peers.format_s5([row])
    assert "| 10 requests/s, burst 5 | 5 ms | 12 | agentv (this project) | 1 |" in table
    assert table.rstrip().endswith("| 0 | ok |")
    theirs = {**row, "tool": "inspect", "wall_s": 2 * row["wall_s"]}
    side = peers.format_s5_side_by_side([row, theirs])
    assert side.splitlines()[2].endswith("| 2.00x |")
    sys.modules.pop("peers", None)


def test_counted_results_count_failed_cases_and_reject_broken_runs(
    bench: dict[str, ModuleType], tmp_path: Path
) -> None:
    run = bench["run"]
    suite = bench["gen_suite"].generate_suite(tmp_path / "s", 3)
    ids = suite.case_ids()
    out = tmp_path / "out.jsonl"
    records = [
        _record(ids[0]),
        {**_record(ids[1], 0.0), "status": "error", "error": "HTTP 500"},
        {**_record(ids[2]), "status": "failed"},
    ]
    out.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert run.count_results(out, suite) == (2, [f"{ids[1]}: HTTP 500", f"{ids[2]}: failed"])
    out.write_text("".join(json.dumps(r) + "\n" for r in records[:2]))
    with pytest.raises(run.RunCheckError, match="2 result lines for 3 cases"):
        run.count_results(out, suite)
    out.write_text("".join(json.dumps(r) + "\n" for r in [*records, records[0]]))
    with pytest.raises(run.RunCheckError, match="written twice"):
        run.count_results(out, suite)


@pytest.mark.slow
def test_s8_live_code_path_at_tiny_sizes(
    bench: dict[str, ModuleType], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sys.modules.pop("s8_live", None)
    import s8_live

    output = tmp_path / "s8.json"
    argv = ["--cases", "6", "--turns", "3", "--long-turns", "12", "--workers", "3"]
    argv += ["--delay-ms", "5", "--reps", "1", "--work", str(tmp_path / "work")]
    code = s8_live.main([*argv, "--output", str(output)])

    printed = capsys.readouterr().out
    assert code == 0, printed
    data = json.loads(output.read_text())
    many, long = data["rows"]["many"], data["rows"]["long"]
    assert many["key"] == "S8/6x3" and many["ideal_s"] == pytest.approx(6 / 3 * 3 * 0.005)
    assert many["efficiency_window"] > 0 and many["s1_same_requests_rss_mb"] > 0
    assert many["s2_same_requests_rss_mb"] > 0 and len(many["runs"]) == 1
    # the SDK's calls alone, and agentv's provider alone, sent as many requests (checked)
    # in windows of their own
    assert 0 < many["sdk_alone_efficiency_window"] <= 1.2
    assert 0 < many["provider_alone_efficiency_window"] <= 1.2
    assert f"the SDK's calls alone: {many['sdk_alone_efficiency_window']:.2f}" in printed
    assert f"agentv's provider alone: {many['provider_alone_efficiency_window']:.2f}" in printed
    assert long["turns"] == 12 and long["first_turns_ms"] > 0 and long["request_last_ms"] > 0
    # agentv's own work per turn: the turn's time less its request's sent alone
    expected = long["own_last_ms"] / max(long["own_first_ms"], 0.5)
    assert long["own_growth"] == pytest.approx(expected, abs=0.002)
    assert long["own_growth_runs"] == [long["own_growth"]]  # one run: itself the median
    assert long["last_request_bytes"] > long["first_request_bytes"]
    # each run's window beside the median, and the CPU each request cost every program
    assert many["efficiency_window_runs"] == [pytest.approx(many["efficiency_window"], abs=0.01)]
    assert len(many["sdk_alone_efficiency_window_runs"]) == 1
    for program in ("", "s2_same_requests_", "sdk_alone_", "provider_alone_"):
        assert many[f"{program}cpu_ms_per_request"] > 0
    assert f"CPU per request (ms, whole process): S8 {many['cpu_ms_per_request']:.3f}" in printed
    # the goals hold for the full sizes only
    assert [g["status"] for g in data["goals"]] == ["n/a"] * len(s8_live.GOALS)


def test_s8_window_is_judged_against_the_sdk_alone_in_the_same_run(
    bench: dict[str, ModuleType],
) -> None:
    sys.modules.pop("s8_live", None)
    import s8_live

    many = {"efficiency_window": 0.85, "sdk_alone_efficiency_window": 0.87, "rss_vs_s1": 1.3}
    rows = {"many": many, "long": {"own_growth": 0.5}}
    judged = s8_live.judge(rows, s8_live.FULL)
    assert [(g["value"], g["bound"], g["status"]) for g in judged] == [
        (0.85, 0.84, "PASS"),
        (1.3, 1.5, "PASS"),
        (0.5, 2.0, "PASS"),
    ]
    many["sdk_alone_efficiency_window"] = 0.89  # the SDK alone did better this time
    window = s8_live.judge(rows, s8_live.FULL)[0]
    assert (window["value"], window["bound"], window["status"]) == (0.85, 0.86, "FAIL")


def test_s2_window_is_judged_against_the_sdk_alone_in_the_same_run(
    bench: dict[str, ModuleType],
) -> None:
    run = bench["run"]
    goals = [g for g in run.GOALS if g.metric == "efficiency_window"]
    assert [(g.row, g.against) for g in goals] == [
        ("S2/2000", "S2/2000/sdk-post"),
        ("S2/10000", "S2/10000/sdk-post"),
    ]
    rows = {
        "S2/2000": {"ok": True, "efficiency_window": 0.85},
        "S2/2000/sdk-post": {"ok": True, "efficiency_window": 0.87},
    }
    assert goals[0].judge(rows) == (0.85, "PASS")
    rows["S2/2000/sdk-post"]["efficiency_window"] = 0.89
    assert goals[0].judge(rows) == (0.85, "FAIL")
    rows["S2/2000/sdk-post"]["ok"] = False  # no reference: nothing to judge against
    assert goals[0].judge(rows) == (0.85, "n/a")


def test_s8_checks_reject_a_conversation_that_lost_its_history(
    bench: dict[str, ModuleType], tmp_path: Path
) -> None:
    sys.modules.pop("s8_live", None)
    import s8_live

    @dataclass
    class Sent:
        body: dict

    system = {"role": "system", "content": s8_live.SYSTEM}
    ask = {"role": "user", "content": "q"}
    answer = {"role": "assistant", "content": bench["gen_suite"].ANSWER}
    good = [Sent({"messages": [system, ask]}), Sent({"messages": [system, ask, answer, ask]})]
    s8_live.check_requests(good, 1, 2)
    changed = {"role": "assistant", "content": bench["gen_suite"].ANSWER + " "}
    with pytest.raises(s8_live.RunCheckError, match="byte-exact"):
        s8_live.check_requests([good[0], Sent({"messages": [system, ask, changed, ask]})], 1, 2)
    with pytest.raises(s8_live.RunCheckError, match="out of shape"):
        s8_live.check_requests([good[0], Sent({"messages": [system, ask, ask]})], 1, 2)
    with pytest.raises(s8_live.RunCheckError, match="3 requests for 2 turns"):
        s8_live.check_requests([*good, good[0]], 1, 2)
    out = tmp_path / "o.jsonl"
    out.write_text(json.dumps({"eval_id": "a", "status": "ok", "score": 1.0, "turns": [{}]}))
    with pytest.raises(s8_live.RunCheckError, match="expected 2 passing turns"):
        s8_live.check_live_results(out, 1, 2)
