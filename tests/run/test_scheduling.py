"""Per-target scheduling: the gate's pauses, token buckets, and whole runs against a
rate-limited loopback server (the whole target pauses, nothing fails, a limit of 20 a second
is reached, the judge is held to its own target's limit while the candidate runs freely)."""

from __future__ import annotations

import asyncio
import math
import re
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from agentv.providers.llm import RETRYABLE_CLIENT_ERRORS
from agentv.run.scheduling import OPENING_LIMIT, TargetGate, TokenBucket
from support.cli import agentv_cli
from support.clock import Clock
from support.fakes import BucketLimit, FakeLLMServer, Fault, RecordedRequest
from support.files import write
from support.results import rows
from support.targets import openai_target, write_targets


def test_token_bucket_paces_and_corrects() -> None:
    clock = Clock()
    bucket = TokenBucket(60, clock)  # one a second, a minute's worth at once
    assert bucket.wait_for(60) == 0
    bucket.take(60)
    assert bucket.wait_for(1) == 1.0
    clock.now += 0.5
    assert bucket.wait_for(1) == 0.5
    bucket.give_back(10)
    assert bucket.wait_for(10) == 0


async def test_a_paused_gate_lets_nothing_through_until_the_pause_ends() -> None:
    gate = TargetGate(4)
    gate.throttled(0.3)
    loop = asyncio.get_running_loop()
    started = loop.time()
    await gate.acquire()
    assert loop.time() - started >= 0.28
    gate.release()


async def test_the_gate_never_has_more_in_flight_than_its_limit() -> None:
    gate = TargetGate(3)

    async def one() -> None:
        await gate.acquire()
        await asyncio.sleep(0.01)
        gate.release()

    await asyncio.gather(*(one() for _ in range(30)))
    assert gate.peak == 3 and gate.stats.requests == 30


def test_deterministic_client_errors_are_not_retried() -> None:
    assert frozenset({408, 409, 425, 429}) == RETRYABLE_CLIENT_ERRORS


def _cases(n: int, *, judged: bool = False) -> str:
    evaluators = "" if judged else ", evaluators: [{type: contains, value: fake}]"
    return "$schema: agentv-eval-v2\nevalcases:\n" + "".join(
        f"  - {{id: c{i}, outcome: ok, input_messages: [{{role: user, content: q{i}}}]{evaluators}}}\n"
        for i in range(n)
    )


@pytest.mark.slow
def test_a_rate_limited_target_pauses_as_a_whole_and_loses_no_case(repo: Path) -> None:
    with FakeLLMServer(limit_rps=8, limit_burst=4) as server:
        write_targets(repo, openai_target(server.url, retry_initial_delay_ms=50))
        write(repo, "evals/many.yaml", _cases(30))
        # as many workers as the opening lets go at once: however busy the machine (late
        # to read the first 429), no more than those ten can be on their way at a pause
        workers = str(OPENING_LIMIT)
        proc = agentv_cli(repo, "eval", "evals/", "--workers", workers, "--out", "r.jsonl")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        records = rows(repo / "r.jsonl")
        assert len(records) == 30 and {r["status"] for r in records} == {"ok"}
        assert server.limited_at, "the limit was never reached: the test proves nothing"
        limited = set(server.limited_at)
        accepted = sorted(r.received_at for r in server.requests if r.received_at not in limited)
        # never more than the rate allows plus the burst, in any second
        assert max(sum(1 for t in accepted if s <= t < s + 1.0) for s in accepted) <= 8 + 4
        # after a 429, the whole target waits out the Retry-After: the requests that reach
        # the server before it has passed are only those that were on their way already
        # (at most the ten at once, in all)
        throttled = [r for r in server.requests if r.fault is not None and r.fault.status == 429]
        windows = [(r.received_at, r.fault.retry_after or 0.0) for r in throttled]  # type: ignore[union-attr]
        assert max(asked for _, asked in windows) >= 0.05  # at least one real pause
        received = [r.received_at for r in server.requests]
        early = {t for t0, asked in windows for t in received if t0 + 0.001 < t < t0 + asked}
        assert len(early) <= OPENING_LIMIT, sorted(t - received[0] for t in early)
        assert "Throttled targets:" in proc.stdout


@pytest.mark.slow
def test_a_target_limited_to_20_a_second_answering_at_once_gets_its_limit(repo: Path) -> None:
    # the server answers at once, so the pace alone holds the requests; the burst of 20
    # is free at the start, and a run at exactly the limit has a goodput of 1
    with FakeLLMServer(limit=BucketLimit(20, 20)) as server:
        write_targets(repo, openai_target(server.url))
        write(repo, "evals/many.yaml", _cases(100))
        proc = agentv_cli(repo, "eval", "evals/", "--workers", "50", "--out", "r.jsonl")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert {r["status"] for r in rows(repo / "r.jsonl")} == {"ok"}
        accepted = sorted(r.received_at for r in server.requests if r.fault is None)
        assert len(accepted) == 100 and server.limited_at
        window = accepted[-1] - server.requests[0].received_at + 1 / 20
        assert 100 / window / 20 >= 0.9, (window, len(server.limited_at))


@pytest.mark.slow
def test_the_judge_is_throttled_by_its_own_target_while_the_candidate_runs_freely(
    repo: Path,
) -> None:
    verdict = '{"score": 1, "hits": [], "misses": [], "reasoning": "ok"}'

    def reply(rec: RecordedRequest) -> str:
        return verdict

    with (
        FakeLLMServer() as model,
        FakeLLMServer(reply=reply, limit_rps=4, limit_burst=1) as judge,
    ):
        write(
            repo,
            ".agentv/targets.yaml",
            "$schema: agentv-targets-v2.2\ntargets:\n"
            f"  - {{name: m, provider: openai, base_url: '{model.url}/v1', api_key: k-12345678,"
            " model: m, workers: 8, judge_target: j}\n"
            f"  - {{name: j, provider: openai, base_url: '{judge.url}/v1', api_key: k-12345678,"
            " model: j, workers: 8, retry_initial_delay_ms: 50}\n",
        )
        write(repo, "evals/judged.yaml", _cases(8, judged=True))
        proc = agentv_cli(repo, "eval", "evals/", "--target", "m", "--out", "r.jsonl")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert {r["status"] for r in rows(repo / "r.jsonl")} == {"ok"}
        assert judge.limited_at  # the judge was rate limited...
        candidate = [r.received_at for r in model.requests]
        judged = [
            r.received_at for r in judge.requests if r.received_at not in set(judge.limited_at)
        ]
        # ...while the candidate's target was never refused, so never paused: each of its
        # requests went when its case began, and the last before the judge was done
        assert len(candidate) == 8 and max(candidate) < max(judged)
        assert max(judged) - min(candidate) > 1.0
        throttled = re.findall(r"^  (\w+): \d+ requests, \d+ throttled", proc.stdout, re.M)
        assert throttled == ["j"], proc.stdout


@pytest.mark.slow
def test_one_429_pauses_every_request_of_the_target_for_its_retry_after(repo: Path) -> None:
    with FakeLLMServer() as server:
        server.script(Fault.rate_limited(retry_after=0.6))  # the first answer only
        write_targets(repo, openai_target(server.url, workers=4))
        write(repo, "evals/many.yaml", _cases(12))
        proc = agentv_cli(repo, "eval", "evals/", "--out", "r.jsonl")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        received = sorted(r.received_at for r in server.requests)
        limited = next(r for r in server.requests if r.fault is not None)
        t0 = limited.received_at
        # only requests already on their way when the 429 came (at most the others of the
        # four at once) reach the server before the Retry-After has passed
        assert len([t for t in received if t0 < t < t0 + 0.55]) <= 3, received
        assert len(received) == 13 and max(received) > t0 + 0.55


@pytest.mark.slow
def test_a_round_of_429s_without_a_wait_cuts_the_target_once(repo: Path) -> None:
    # the server answers after a second, so all eight requests are out before the first 429
    # comes back; four of them are refused with "Retry-After: 0"
    with FakeLLMServer(delay_ms=1000) as server:
        server.script(*[Fault.rate_limited(retry_after=0)] * 4)
        write_targets(repo, openai_target(server.url, workers=8))
        write(repo, "evals/many.yaml", _cases(8))
        proc = agentv_cli(repo, "eval", "evals/", "--out", "r.jsonl")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert {r["status"] for r in rows(repo / "r.jsonl")} == {"ok"}
        first = sorted(server.requests, key=lambda r: r.received_at)[:8]
        answered = min(r.answered_at or math.inf for r in server.requests)
        assert max(r.received_at for r in first) < answered  # one round, sent before any answer
        assert len(server.requests) == 12
        # the four refusals are news of one round: the pace starts from the four the
        # server accepted (how many at once follows from it and the answers' time, 1 s),
        # not from what four cuts in a row would leave
        found = re.search(
            r"default: 12 requests, 4 throttled \(429/503\), paused 0\.0 s, down to (\d+) at once",
            proc.stdout,
        )
        assert found is not None, proc.stdout
        assert int(found.group(1)) >= 3


@pytest.mark.slow
def test_a_case_waiting_to_retry_a_500_leaves_its_turn_to_the_next_cases(repo: Path) -> None:
    with FakeLLMServer(delay_ms=100) as server:
        server.script(Fault.server_error())  # the first answer only
        write_targets(repo, openai_target(server.url, workers=1, retry_initial_delay_ms=1000))
        write(repo, "evals/many.yaml", _cases(3))
        proc = agentv_cli(repo, "eval", "evals/", "--out", "r.jsonl")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert {r["status"] for r in rows(repo / "r.jsonl")} == {"ok"}
        asked = [r.body["messages"][-1]["content"] for r in server.requests]
        # the other two cases ran while the first waited (0.75 s or more) to retry...
        assert asked == ["q0", "q1", "q2", "q0"]
        # ...and the target never had more requests in flight than its `workers`
        received = sorted(r.received_at for r in server.requests)
        assert all(later - earlier >= 0.09 for earlier, later in pairwise(received))
        assert "Throttled targets:" not in proc.stdout  # a 500 slows nothing down


@pytest.mark.slow
@pytest.mark.parametrize(
    ("settings", "why"),
    [
        ({"max_retries": 0}, "its last attempt"),
        ({"retry_max_delay_ms": 300}, "a wait longer than retry_max_delay_ms"),
    ],
)
def test_a_429_that_is_not_retried_still_pauses_the_target(
    repo: Path, settings: dict[str, int], why: str
) -> None:
    with FakeLLMServer(delay_ms=20) as server:
        server.script(Fault.rate_limited(retry_after=0.6))  # the first answer only
        write_targets(repo, openai_target(server.url, workers=4, **settings))
        write(repo, "evals/many.yaml", _cases(12))
        proc = agentv_cli(repo, "eval", "evals/", "--out", "r.jsonl")
        records = rows(repo / "r.jsonl")
        failed = [r for r in records if r["status"] != "ok"]
        assert len(records) == 12 and len(failed) == 1, why  # that one request is not retried
        t0 = next(r for r in server.requests if r.fault is not None).received_at
        received = sorted(r.received_at for r in server.requests)
        # the other cases wait out the server's word (at most retry_max_delay_ms) instead
        # of meeting the same refusal at once: only those already on their way (at most the
        # others of the four at once) come sooner
        assert len([t for t in received if t0 < t < t0 + 0.25]) <= 3, why
        assert len(received) == 12
        assert "default: 12 requests, 1 throttled (429/503)" in proc.stdout, why


async def test_a_freed_turn_sends_its_next_request_before_the_answer_that_freed_it_is_graded(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # answers come back in bunches: the request waiting for the turn an answer freed goes
    # out before that answer is graded and recorded (benchmarks/README.md, S8)
    import agentv
    import agentv.run.sending as sending

    order: list[str] = []
    grade_case = sending.grade_case

    async def graded(ctx: Any, *args: Any, **kwargs: Any) -> Any:
        order.append(f"{ctx.case.id} graded")
        return await grade_case(ctx, *args, **kwargs)

    async def app(messages: list[dict[str, Any]]) -> str:
        order.append(f"{messages[-1]['content']} sent")
        await asyncio.sleep(0.01)  # the other case stands in line meanwhile
        return "fake answer"

    monkeypatch.setattr(sending, "grade_case", graded)
    write(repo, "evals/two.yaml", _cases(2))
    run = await agentv.arun_eval(
        "evals/two.yaml", target=agentv.PythonTarget(app), workers=1, cwd=repo
    )
    assert [r.status for r in run.results] == ["ok", "ok"]
    assert order == ["q0 sent", "q1 sent", "c0 graded", "c1 graded"]
