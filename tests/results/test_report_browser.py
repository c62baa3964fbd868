"""The HTML report in a real browser: Debian's chromium driven by Playwright.

Every page is opened from ``file://`` with every request routed: anything else than a
``file://`` URL fails the test. A missing browser fails these tests in CI (``CI=true``)
with the command that installs it, and skips them elsewhere.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

import pytest

from agentv.results.report import build_report
from support.mixed_run import mixed_run as run_every_kind
from support.paths import BENCHMARKS, TESTS

#: every test here drives chromium: left out of `make test-fast`
pytestmark = pytest.mark.slow

BENCH_DIR = BENCHMARKS
ARTIFACTS = TESTS / ".artifacts"
CHROMIUM = os.environ.get("AGENTV_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
INSTALL = "apt-get update && apt-get install -y chromium"
HOSTILE = (
    "<script>window.__pwned=1</script>",
    '<img src=x onerror="window.__pwned=1">',
    "[x](javascript:window.__pwned=1)",
)


def _unavailable(reason: str) -> None:
    message = f"{reason}; the browser tests need it. Install it with: {INSTALL} (as root)"
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not (Path(CHROMIUM).exists() or shutil.which(CHROMIUM)):
        _unavailable(f"chromium is not installed ({CHROMIUM} is missing)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("the playwright package is missing (pip install -e '.[dev]')")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


class Page:
    """A page with its console errors, page errors and requests other than ``file://``."""

    def __init__(self, browser: Any) -> None:
        self.context = browser.new_context(viewport={"width": 1400, "height": 1000})
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.outside: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.context.route("**/*", self._route)

    def _route(self, route: Any) -> None:
        if route.request.url.startswith("file://"):
            route.continue_()
        else:
            self.outside.append(route.request.url)
            route.abort()

    def open(self, path: Path) -> Any:
        self.page.goto(path.resolve().as_uri())
        self.page.wait_for_selector("body[data-ready='1']")
        return self.page

    def shown(self) -> int:
        return int(self.page.get_attribute("#count", "data-shown") or "-1")

    def search(self, text: str, count: int) -> None:
        """Search for ``text`` and wait until the rows answer that search and there are
        ``count`` of them. The search box applies a query a moment after typing stops: a
        click before then can meet the table being redrawn between its press and release
        (the browser then sends the click to the table, not to a row)."""
        self.page.fill("#search", text)
        self.page.wait_for_function(
            "([q, n]) => { const c = document.getElementById('count').dataset;"
            " return c.query === q && c.shown === String(n); }",
            arg=[text, count],
        )

    def wait_shown(self, count: int) -> None:
        self.page.wait_for_function(
            "n => document.getElementById('count').dataset.shown === String(n)", arg=count
        )


@pytest.fixture
def page(browser: Any) -> Iterator[Page]:
    opened = Page(browser)
    yield opened
    opened.context.close()
    assert opened.outside == [], f"the report asked the network for {opened.outside}"
    assert opened.errors == [], f"console errors: {opened.errors}"


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.syspath_prepend(str(BENCH_DIR))
    sys.modules.pop("report_bench", None)
    import report_bench

    yield report_bench
    sys.modules.pop("report_bench", None)


def _tool_case() -> dict[str, Any]:
    chat = [
        {"role": "system", "content": "You are a weather bot."},
        {"role": "user", "content": "Weather in Oslo?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "call_1", "name": "get_weather", "arguments": {"city": "Oslo"}}],
        },
        {"role": "tool", "content": '{"rain": 0.85}', "tool_call_id": "call_1"},
        {"role": "user", "content": "So, umbrella?"},
    ]
    return {
        "eval_id": "tool-case",
        "dataset": "weather",
        "status": "ok",
        "passed": True,
        "score": 1.0,
        "hits": ["says yes"],
        "misses": [],
        "candidate_answer": "Yes, take an umbrella.",
        "expected_aspect_count": 1,
        "target": "claude",
        "timestamp": "2025-06-01T10:00:00.000Z",
        "repeat": 0,
        "lm_provider_request": {"chat_prompt": chat, "guideline_paths": []},
        "raw_request": {
            "question": "@[System]:\nYou are a weather bot.\n\n@[User]:\nWeather in Oslo?",
            "guidelines": "Always answer in one sentence.",
            "guideline_paths": ["/repo/guidelines/short.instructions.md"],
            "input_files": [],
            "chat_prompt": chat,
        },
        "evaluator_results": [
            {
                "name": "says-yes",
                "type": "contains",
                "score": 1.0,
                "hits": ["says yes"],
                "misses": [],
            }
        ],
        "duration_ms": 12.0,
        "attempts": 1,
    }


def mixed_run(bench: Any, path: Path) -> list[dict[str, Any]]:
    """20 records: ok, failed, error and invalid on two targets, a tool-call conversation
    and three hostile answers."""
    records = [bench.make_record(n, target=("gpt", "claude")[n % 2]) for n in range(16)]
    for n, answer in enumerate(HOSTILE):
        records.append(bench.make_record(100 + n, target="gpt", status="failed", answer=answer))
    records.append(_tool_case())
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return records


def test_mixed_run_opens_offline_with_every_row_filters_search_and_a_screenshot(
    page: Page, bench: Any, tmp_path: Path
) -> None:
    records = mixed_run(bench, tmp_path / "run.jsonl")
    report = build_report([tmp_path / "run.jsonl"], tmp_path / "run.html").path
    p = page.open(report)
    assert page.shown() == len(records)
    assert p.locator("#rows tr").count() == len(records)
    assert "20 results" in p.text_content("#count")

    by_status: dict[str, int] = {}
    for r in records:
        by_status[r["status"]] = by_status.get(r["status"], 0) + 1
    assert set(by_status) == {"ok", "failed", "error", "invalid"}
    for status, count in by_status.items():
        p.select_option("#filter-status", status)
        page.wait_shown(count)
        statuses = p.locator("#rows tr td:nth-child(6)").all_text_contents()
        assert statuses == [status] * count
    p.select_option("#filter-status", "")
    page.wait_shown(len(records))

    p.select_option("#filter-target", "claude")
    claude = sum(1 for r in records if r["target"] == "claude")
    page.wait_shown(claude)
    assert set(p.locator("#rows tr td:nth-child(3)").all_text_contents()) == {"claude"}
    p.select_option("#filter-target", "")
    page.wait_shown(len(records))

    page.search("case-000007", 1)  # an id
    assert p.text_content("#rows tr td:nth-child(1)") == "case-000007"
    page.search("TAKE AN UMBRELLA", 1)  # an answer, any case
    assert p.text_content("#rows tr td:nth-child(1)") == "tool-case"
    page.search("", len(records))

    p.click("th[data-key='score']")  # ascending, then descending
    p.click("th[data-key='score']")
    cells = p.locator("#rows tr td:nth-child(5)").all_text_contents()
    scores = [float(s) for s in cells if s not in ("–", "-")]
    assert scores == sorted(scores, reverse=True)
    # errors are not scores: a run that errored or was invalid shows none
    ungraded = sum(1 for r in records if r["status"] not in ("ok", "failed"))
    assert len(cells) - len(scores) == ungraded > 0
    assert p.get_attribute("th[data-key='score']", "aria-sort") == "descending"

    ARTIFACTS.mkdir(exist_ok=True)
    p.screenshot(path=str(ARTIFACTS / "report-mixed-run.png"), full_page=True)
    assert (ARTIFACTS / "report-mixed-run.png").stat().st_size > 10_000


def test_a_case_shows_its_messages_in_order_tool_calls_and_evaluators(
    page: Page, bench: Any, tmp_path: Path
) -> None:
    mixed_run(bench, tmp_path / "run.jsonl")
    p = page.open(build_report([tmp_path / "run.jsonl"], tmp_path / "run.html").path)
    page.search("tool-case", 1)
    p.click("#rows tr")
    p.wait_for_selector("#detail:not([hidden]) .message")
    roles = p.locator("#detail .message .role").all_text_contents()
    assert [r.split(" · ")[0] for r in roles] == [
        "1. system",
        "2. user",
        "3. assistant",
        "4. tool",
        "5. user",
    ]
    assert "result of tool call call_1" in roles[3]
    detail = p.text_content("#detail-body")
    assert "tool call: get_weather (id call_1)" in detail
    assert '"city": "Oslo"' in detail
    assert "Always answer in one sentence." in detail  # guidelines
    assert "Yes, take an umbrella." in detail  # the answer
    assert "says-yes (contains) — score 1.000" in detail
    ARTIFACTS.mkdir(exist_ok=True)
    p.screenshot(path=str(ARTIFACTS / "report-case-detail.png"))
    p.keyboard.press("Escape")
    assert p.locator("#detail").is_hidden()

    # a judged case: its judge's prompt and system prompt are there
    page.search("case-000000", 1)
    p.click("#rows tr")
    p.wait_for_selector("#detail:not([hidden]) .evaluator")
    p.click("#detail summary")
    detail = p.text_content("#detail-body")
    assert "quality (llm_judge) — score 0.900" in detail
    assert "[[ ## candidate_answer ## ]]" in detail
    assert "You are an expert evaluator." in detail


def test_hostile_answers_show_as_text_and_run_nothing(
    page: Page, bench: Any, tmp_path: Path
) -> None:
    mixed_run(bench, tmp_path / "run.jsonl")
    p = page.open(build_report([tmp_path / "run.jsonl"], tmp_path / "run.html").path)
    for n, hostile in enumerate(HOSTILE):
        page.search(f"case-{100 + n:06d}", 1)
        assert p.text_content("#rows tr td.answer") == hostile
        p.click("#rows tr")
        p.wait_for_selector("#detail:not([hidden])")
        assert hostile in p.locator("#detail pre").all_text_contents()
        p.keyboard.press("Escape")
    assert p.locator("#rows img, #detail img, #rows a, #detail a").count() == 0
    assert p.locator("script").count() == 4  # meta, one index, the code, one detail chunk
    assert p.evaluate("typeof window.__pwned") == "undefined"


def test_several_runs_side_by_side_match_cases_and_average_repeats(
    page: Page, bench: Any, tmp_path: Path
) -> None:
    base = [bench.make_record(n, target="gpt", status="ok") for n in range(3)]
    new = [bench.make_record(n, target="gpt", status="failed") for n in range(2)]
    new += [bench.make_record(1, target="gpt", status="ok", repeat=1)]  # a repeat of case 1
    new += [bench.make_record(9, target="gpt", status="ok")]  # only in the new run
    (tmp_path / "base.jsonl").write_text("".join(json.dumps(r) + "\n" for r in base))
    (tmp_path / "new.jsonl").write_text("".join(json.dumps(r) + "\n" for r in new))
    report = build_report(
        [tmp_path / "base.jsonl", tmp_path / "new.jsonl"], tmp_path / "both.html"
    ).path
    p = page.open(report)
    assert page.shown() == 4  # cases 0, 1, 2 and 9
    heads = p.locator("#head th").all_text_contents()
    assert heads[3:] == [
        "score · base.jsonl",
        "status · base.jsonl",
        "score · new.jsonl",
        "status · new.jsonl",
        "Δ last − first",
    ]
    cells = {
        row[0]: row[3:]
        for row in (
            p.locator(f"#rows tr:nth-child({i}) td").all_text_contents() for i in range(1, 5)
        )
    }
    ok_score, failed_score = base[0]["score"], new[0]["score"]
    assert cells["case-000001"][2] == f"{(new[1]['score'] + new[2]['score']) / 2:.3f}"
    assert cells["case-000001"][3] == "failed"  # the worst of its repeats
    assert cells["case-000000"][:4] == [
        f"{ok_score:.3f}",
        "ok",
        f"{failed_score:.3f}",
        "failed",
    ]
    assert cells["case-000009"][:2] == ["–", "–"]
    page.search("case-000001", 1)
    p.click("#rows tr")
    p.wait_for_selector("#detail:not([hidden]) .message")
    sections = p.locator("#detail .run-section > h3").all_text_contents()
    assert sections == ["base.jsonl", "new.jsonl"]
    assert p.locator("#detail .run-section:nth-of-type(2) > details").count() == 2


def test_report_bench_smoke(bench: Any, browser: Any, tmp_path: Path) -> None:
    """``make bench-report`` at a small size: the same code path, figures of the right shape."""
    figures = bench.run(300, 1, tmp_path, browser)
    assert figures["cases"] == 300
    assert 0 < figures["size_ratio"] < bench.GOAL_SIZE_RATIO
    for key in ("build_s", "first_rows_s", "loaded_s", "search_s", "filter_s", "detail_s"):
        assert figures[key] > 0
    assert "first rows" in bench.table(figures)


def test_large_attachments_are_put_back_and_agent_requests_shown(
    page: Page, tmp_path: Path
) -> None:
    digest = "ab" * 32
    ref = f"<<agentv:large_content {digest}>>"
    big = "BIG FILE LINE\n" * 3
    agent = _tool_case() | {"eval_id": "agent-case", "target": "codex"}
    agent["raw_request"] = {
        "question": f"Read this:\n{ref}",
        "guidelines": "",
        "guideline_paths": [],
        "input_files": [],
        "command": "codex exec --json",
        "cwd": "/repo",
    }
    agent["large_content"] = {digest: big}
    agent.pop("lm_provider_request")
    agent["agent_provider_request"] = {"question": "repeated"}
    invalid = {  # an invalid case with no usable id and no target
        "dataset": "broken",
        "status": "invalid",
        "passed": False,
        "score": 0.0,
        "hits": [],
        "misses": ["Invalid: bad YAML"],
        "candidate_answer": "",
        "expected_aspect_count": 0,
        "timestamp": "2025-06-01T10:00:00.000Z",
        "attempts": 0,
        "eval_file": "/repo/evals/broken.yaml",
        "line": 3,
        "error": "bad YAML",
    }
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(agent) + "\n" + json.dumps(invalid) + "\n")
    p = page.open(build_report([path], tmp_path / "r.html").path)
    assert page.shown() == 2
    p.click("#rows tr:nth-child(1)")
    p.wait_for_selector("#detail:not([hidden])")
    detail = p.text_content("#detail-body")
    assert "Read this:\n" + big in p.locator("#detail pre").all_text_contents()
    assert ref not in detail
    assert "1 large attachment(s) put back" in detail
    assert "No message list" in detail
    assert "codex exec --json" in detail  # what the agent target ran
    p.keyboard.press("Escape")
    p.click("#rows tr:nth-child(2)")
    p.wait_for_selector("#detail:not([hidden])")
    assert p.text_content("#detail-title") == "(no id)"
    assert "bad YAML" in p.text_content("#detail-body")


def test_how_an_answer_ended_and_the_settings_sent_are_shown(page: Page, tmp_path: Path) -> None:
    cut = _tool_case() | {"eval_id": "cut-case", "candidate_answer": "Yes, take"}
    cut["finish_reason"], cut["finish_reason_raw"] = "length", "max_tokens"
    cut["raw_request"] = cut["raw_request"] | {
        "settings": {"model": "claude-x", "max_tokens": 3, "temperature": 0.0},
        "token_limit": {"param": "max_tokens", "value": 3},
    }
    ignored = _tool_case() | {"eval_id": "ignored-case", "token_limit_ignored": True}
    ignored["finish_reason"], ignored["finish_reason_raw"] = "stop", "stop"
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(cut) + "\n" + json.dumps(ignored) + "\n")
    p = page.open(build_report([path], tmp_path / "r.html").path)
    page.search("cut-case", 1)
    p.click("#rows tr")
    p.wait_for_selector("#detail:not([hidden])")
    warning = p.locator("#detail .warn")
    assert warning.all_text_contents() == ["length (max_tokens): cut at the output token limit"]
    detail = p.text_content("#detail-body")
    assert "settings sentmodel: claude-x, max_tokens: 3, temperature: 0" in detail
    p.keyboard.press("Escape")
    page.search("ignored-case", 1)
    p.click("#rows tr")
    p.wait_for_selector("#detail:not([hidden])")
    assert "answer endedstop" in p.text_content("#detail-body")
    assert p.locator("#detail .warn").all_text_contents() == [
        "ignored by the server: more output tokens than the limit sent"
    ]


def test_an_empty_results_file_gives_an_empty_table(page: Page, tmp_path: Path) -> None:
    (tmp_path / "r.jsonl").write_text("")
    p = page.open(build_report([tmp_path / "r.jsonl"], tmp_path / "r.html").path)
    assert page.shown() == 0
    assert p.text_content("#page") == "no rows"


def test_a_missing_browser_fails_in_ci_and_skips_elsewhere(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="apt-get install -y chromium"):
        _unavailable("chromium is not installed")
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match="apt-get install -y chromium"):
        _unavailable("chromium is not installed")


def test_a_live_conversation_shows_turn_by_turn_with_tools_grades_and_where_it_stopped(
    page: Page, tmp_path: Path
) -> None:
    import agentv

    (tmp_path / ".git").mkdir()
    (tmp_path / "live.yaml").write_text(
        """\
$schema: agentv-eval-v2
evalcases:
  - id: trip
    outcome: Plans a trip.
    aggregation: min
    on_turn_failure: stop
    input_messages: [{role: system, content: You plan trips.}]
    tools:
      - name: get_forecast
        parameters: {type: object, properties: {city: {type: string}}}
        result: {chance_of_rain: 0.85}
    turns:
      - content: Weather in Oslo?
        evaluators: [{type: contains, value: rain}]
      - content: And where do I stay?
        evaluators: [{type: contains, value: hotel}]
      - content: Never sent.
"""
    )

    def planner(messages: list[dict[str, Any]]) -> Any:
        if messages[-1]["role"] == "user" and "Oslo" in messages[-1]["content"]:
            return {
                "text": "",
                "tool_calls": [{"name": "get_forecast", "arguments": {"city": "Oslo"}}],
            }
        if messages[-1]["role"] == "tool":
            return "85% chance of rain: take an umbrella."
        return "Somewhere nice."  # no hotel: the second turn fails and the conversation stops

    out = tmp_path / "live.jsonl"
    # in a thread of its own: the sync Playwright API keeps an event loop on this one
    with ThreadPoolExecutor(1) as pool:
        run = pool.submit(
            agentv.run_eval, "live.yaml", target=agentv.PythonTarget(planner), out=out, cwd=tmp_path
        ).result()
    assert run.results[0].status == "failed"
    p = page.open(build_report([out], tmp_path / "live.html").path)
    page.search("trip", 1)
    p.click("#rows tr")
    p.wait_for_selector("#detail:not([hidden]) .turns")
    heads = p.locator("#detail .turns .turn > h4").all_text_contents()
    assert heads == ["turn 1 — score 1.000 · ok", "turn 2 — score 0.000 · failed"]
    first, second = p.locator("#detail .turns .turn").all()
    assert "Weather in Oslo?" in first.text_content()
    assert "tool call get_forecast" in first.text_content()
    assert '"chance_of_rain": 0.85' in first.text_content()
    assert "85% chance of rain: take an umbrella." in first.text_content()
    assert "Somewhere nice." in second.text_content()
    assert "Never sent." not in p.text_content("#detail .turns")
    stopped = p.locator("#detail .turns > .warn").all_text_contents()
    assert len(stopped) == 1 and stopped[0].startswith("Stopped at turn 2")
    assert "aggregation: min" in p.text_content("#detail .turns h3")
    ARTIFACTS.mkdir(exist_ok=True)
    p.screenshot(path=str(ARTIFACTS / "report-live-conversation.png"))


def test_a_turn_graded_by_its_outcome_shows_the_judges_verdict(page: Page, tmp_path: Path) -> None:
    import agentv

    (tmp_path / ".git").mkdir()
    (tmp_path / ".agentv").mkdir()
    (tmp_path / ".agentv" / "targets.yaml").write_text(
        """\
$schema: agentv-targets-v2.2
targets:
  - {name: default, provider: mock, response: Lisbon is lovely in May., judge_target: judge}
  - name: judge
    provider: mock
    response: '{"score": 0.75, "hits": ["names Lisbon"], "misses": ["no dates"], "reasoning": "Close."}'
"""
    )
    (tmp_path / "live.yaml").write_text(
        """\
$schema: agentv-eval-v2
evalcases:
  - id: trip
    outcome: Plans a trip.
    turns:
      - content: Three days in Lisbon?
        outcome: Suggests a plan for Lisbon.
"""
    )
    out = tmp_path / "live.jsonl"
    with ThreadPoolExecutor(1) as pool:  # the sync Playwright API keeps this thread's loop
        pool.submit(agentv.run_eval, "live.yaml", out=out, cwd=tmp_path).result()
    p = page.open(build_report([out], tmp_path / "live.html").path)
    page.search("trip", 1)
    p.click("#rows tr")
    p.wait_for_selector("#detail:not([hidden]) .turns")
    assert p.locator("#detail .turns .turn > h4").all_text_contents() == [
        "turn 1 — score 0.750 · failed"
    ]
    verdict = p.locator("#detail .turns .turn .verdict")
    assert [b.strip() for b in verdict.locator(":scope > div > b").all_text_contents()] == [
        "hits",
        "misses",
        "reasoning",
    ]
    assert verdict.locator("ul.hits li").all_text_contents() == ["names Lisbon"]
    assert verdict.locator("ul.misses li").all_text_contents() == ["no dates"]
    assert verdict.locator(":scope > div > pre").all_text_contents() == ["Close."]
    assert verdict.locator("details > summary").all_text_contents() == ["the judge's request"]
    judge = verdict.locator("details .judge")
    assert judge.locator("h4").all_text_contents() == [
        "Judge's system prompt",
        "Judge's prompt",
        "Judge's reply",
    ]
    prompt = judge.locator("pre").nth(1).text_content()
    assert prompt is not None and "Suggests a plan for Lisbon." in prompt


def test_a_simulated_conversation_tells_the_user_and_the_model_apart(
    page: Page, tmp_path: Path
) -> None:
    import agentv

    (tmp_path / ".git").mkdir()
    (tmp_path / ".agentv").mkdir()
    (tmp_path / ".agentv" / "targets.yaml").write_text(
        "$schema: agentv-targets-v2.2\ntargets:\n"
        "  - {name: customer, provider: mock, response: My kettle broke.}\n"
    )
    (tmp_path / "sim.yaml").write_text(
        """\
$schema: agentv-eval-v2
evalcases:
  - id: kettle
    outcome: Helps.
    input_messages: [{role: system, content: You are support.}]
    user:
      target: customer
      persona: A customer.
      goal: A new kettle.
      first_message: Hello.
      max_turns: 2
    turn_evaluators: [{type: contains, value: kettle}]
    evaluators: [{type: contains, value: kettle}]
"""
    )

    def agent(messages: list[dict[str, Any]]) -> str:
        return f"About your kettle: noted ({len(messages)} messages so far)."

    out = tmp_path / "sim.jsonl"
    with ThreadPoolExecutor(1) as pool:  # the sync Playwright API keeps a loop on this one
        pool.submit(
            agentv.run_eval, "sim.yaml", target=agentv.PythonTarget(agent), out=out, cwd=tmp_path
        ).result()
    record = json.loads(out.read_text().splitlines()[0])
    assert len(record.get("turns", [])) == 2, record
    p = page.open(build_report([out], tmp_path / "sim.html").path)
    page.search("kettle", 1)
    p.click("#rows tr")
    p.wait_for_selector("#detail:not([hidden]) .turns")
    note = p.text_content("#detail .turns .simulated")
    assert note == "Simulated user: customer, 2 turn(s), ended by max_turns"
    speakers = p.locator("#detail .turns .turn .message > b").all_text_contents()
    assert speakers == [
        "simulated user (first message)",
        "answer",
        "simulated user",
        "answer",
    ]
    assert "My kettle broke." in p.text_content("#detail .turns")


def test_a_trajectory_and_the_evaluators_weights_and_gates_are_shown(
    page: Page, tmp_path: Path
) -> None:
    import agentv

    (tmp_path / ".git").mkdir()
    (tmp_path / "tools.yaml").write_text(
        """\
$schema: agentv-eval-v2
evalcases:
  - id: umbrella
    outcome: Checks the forecast once, then answers.
    input_messages: [{role: user, content: Umbrella in Oslo?}]
    tools:
      - name: get_forecast
        parameters: {type: object, properties: {city: {type: string}}}
        result: {chance_of_rain: 0.85}
    evaluators:
      - {name: answer, type: contains, value: umbrella, weight: 4}
      - {name: forecast, type: tool_used, tool: get_forecast, args: {city: Oslo}}
      - {name: once, type: repeated_calls, required: true}
"""
    )

    def bot(messages: list[dict[str, Any]]) -> Any:
        results = [m for m in messages if m["role"] == "tool"]
        if len(results) < 2:  # asks twice: the required `once` misses
            return {
                "text": "",
                "tool_calls": [{"name": "get_forecast", "arguments": {"city": "Oslo"}}],
            }
        return "Take an umbrella."

    out = tmp_path / "tools.jsonl"
    with ThreadPoolExecutor(1) as pool:
        run = pool.submit(
            agentv.run_eval, "tools.yaml", target=agentv.PythonTarget(bot), out=out, cwd=tmp_path
        ).result()
    (result,) = run.results
    assert (result.status, result.failed_required) == ("failed", ["once"])
    p = page.open(build_report([out], tmp_path / "tools.html").path)
    card = p.text_content("#runs .run") or ""
    assert "failed by a required evaluator" in card
    assert "tool calls (trajectories)" in card
    rows_ = p.locator("#runs table.evaluators tbody tr").all()
    assert [r.locator("td").all_text_contents() for r in rows_] == [
        ["answer", "contains", "4", "no", "–", "1.000", "–", "0"],
        ["forecast", "tool_used", "1", "no", "–", "1.000", "–", "0"],
        ["once", "repeated_calls", "1", "yes", "0.80", "0.000", "0 / 1", "1"],
    ]
    p.click("#rows tr")
    p.wait_for_selector("#detail:not([hidden]) .trajectory")
    assert p.text_content("#detail .trajectory h3") == "Trajectory (2 tool calls)"
    steps = p.locator("#detail .trajectory li.step").all()
    assert len(steps) == 2
    first = steps[0].text_content() or ""
    assert first.startswith("get_forecast · turn 1 · ")
    assert '"city": "Oslo"' in first and '{"chance_of_rain": 0.85}' in first
    weighing = p.locator("#detail .evaluator .weighing").all_text_contents()
    assert weighing == ["weight 4", "required · threshold 0.80 · missed: the run fails"]
    grade = p.text_content("#detail section:has(h3:text('Grade'))") or ""
    assert "Failed by required evaluator(s), whatever the mean: once" in grade
    ARTIFACTS.mkdir(exist_ok=True)
    p.screenshot(path=str(ARTIFACTS / "report-trajectory.png"))


# --- the figures shown are the summary's ---------------------------------------------------
# The page's number formats, as JavaScript makes them (toFixed rounds the exact binary value,
# a half up), so that each figure read off the page is compared whole with --summary-json's.


def _fixed(x: float, digits: int) -> str:
    """``x.toFixed(digits)``."""
    return f"{Decimal(x).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP):f}"


def _score(x: float | None) -> str:
    return "–" if x is None else _fixed(x, 3)


def _pct(x: float | None) -> str:
    return "–" if x is None else _fixed(100 * x, 1) + "%"


def _int(x: int) -> str:
    assert isinstance(x, int)
    return f"{x:,}"


def _usd(x: float) -> str:
    if x == 0:
        return "$0"
    if x >= 1:
        return "$" + _fixed(x, 2)
    if x >= 0.0001:
        return "$" + _fixed(x, 4)
    assert x >= 1e-6, x  # toPrecision(2) writes smaller ones with an exponent
    exact = Decimal(x)
    return "$" + f"{exact.quantize(Decimal(1).scaleb(exact.adjusted() - 1), ROUND_HALF_UP):f}"


def _seconds(s: float) -> str:
    assert s < 3600, s
    if s < 60:
        return _fixed(s, 1) + " s"
    return f"{int(s // 60)} min {int(s % 60):02d} s"


def _tokens(t: dict[str, int]) -> str:
    return f"{_int(t['input'])} / {_int(t['output'])}"


def _number(x: float) -> str:
    """``String(x)`` of a JavaScript number."""
    return str(int(x)) if float(x).is_integer() else repr(x)


def _shown_figures(s: dict[str, Any]) -> list[list[str]]:
    """The run card's figures, (label, value), in order, as the page must show them."""
    out = [["runs", _int(s["total"])]]
    if s["eval_cases"] != s["total"]:
        out.append(["eval cases", _int(s["eval_cases"])])
    order = ["ok", "failed", "error", "invalid", "skipped"]
    out += [[name, _int(s["statuses"].get(name, 0))] for name in order]
    out += [[name, _int(n)] for name, n in s["statuses"].items() if name not in order]
    out.append(["mean score (graded runs)", _score(s["mean"])])
    out.append(["pass rate (graded runs)", _pct(s["pass_rate"])])
    out.append(["tokens in / out", _tokens(s["tokens"])])
    if s["tokens"].get("reused_input") or s["tokens"].get("reused_output"):
        reused = {"input": s["tokens"]["reused_input"], "output": s["tokens"]["reused_output"]}
        out.append(["reused from cache in / out", _tokens(reused)])
    judge = s["judge_tokens"]
    if judge and (judge["input"] or judge["output"]):
        out.append(["judge tokens in / out", _tokens(judge)])
    if judge and (judge.get("reused_input") or judge.get("reused_output")):
        reused = {"input": judge["reused_input"], "output": judge["reused_output"]}
        out.append(["judge tokens reused in / out", _tokens(reused)])
    cost = s["cost"]
    if cost:
        parties = [f"{p} {_usd(v['usd'])}" for p, v in cost["by_party"].items()]
        label = "cost spent" + (f" ({', '.join(parties)})" if len(parties) > 1 else "")
        out.append([label, _usd(cost["usd"])])
        if cost.get("reused_usd"):
            out.append(["cost reused, not spent again", _usd(cost["reused_usd"])])
        if cost["unpriced_runs"]:
            out.append(["runs with tokens of no known price", _int(cost["unpriced_runs"])])
    out.append(["wall time (from timestamps)", _seconds(s["time"]["wall_seconds"])])
    out.append(["case time, summed", _seconds(s["time"]["case_seconds"])])
    if s["trajectory_calls"]:
        out.append(["tool calls (trajectories)", _int(s["trajectory_calls"])])
    if s["required_failures"]:
        out.append(["failed by a required evaluator", _int(s["required_failures"])])
    return out


def _cells(p: Any, selector: str) -> list[list[str]]:
    return p.eval_on_selector_all(
        selector, "rows => rows.map(r => Array.from(r.cells, c => c.textContent))"
    )


def test_the_page_shows_the_summary_json_figures_whole(page: Page, tmp_path: Path) -> None:
    """A mixed run (every status, three targets, repeats, live turns, simulated users,
    trajectories, costs spent and reused: tests/support/mixed_run.py): every figure of the
    run's card, its targets' and evaluators' tables and its histogram is --summary-json's
    number, at the page's precision."""
    run = run_every_kind(tmp_path / "mixed")
    s = json.loads(run.summary_json.read_text(encoding="utf-8"))
    p = page.open(run.report)
    figures = p.eval_on_selector_all(
        "#runs .run .figure",
        "fs => fs.map(f => [f.lastChild.textContent, f.firstChild.textContent])",
    )
    assert figures == _shown_figures(s)
    assert s["trajectory_calls"] and s["required_failures"] and s["cost"]["reused_usd"]
    assert p.text_content("#count") == f"{_int(s['total'])} results"
    time = s["time"]
    assert f"from {time['started']} to {time['ended']} (UTC)" in (p.text_content("#runs") or "")
    names = ", ".join(t["target"] for t in s["targets"])
    assert p.locator("#runs .run p", has_text="targets: ").text_content() == f"targets: {names}"
    assert _cells(p, "#runs table.targets tbody tr") == [
        [
            t["target"],
            _int(t["runs"]),
            _score(t["mean"]),
            _pct(t["pass_rate"]),
            *(_int(t[k]) for k in ("ok", "failed", "errors", "invalid", "skipped")),
            _tokens(t["tokens"]),
        ]
        for t in s["targets"]
    ]
    assert _cells(p, "#runs table.evaluators tbody tr") == [
        [
            e["name"],
            e["type"],
            "mixed" if e["weight"] is None else _number(e["weight"]),
            "yes" if e["required"] else "no",
            "–" if e["threshold"] is None else _fixed(e["threshold"], 2),
            _score(e["mean"]),
            f"{_int(e['passed'])} / {_int(e['judged'])}" if e["judged"] else "–",
            _int(e["failed_cases"]),
        ]
        for e in s["evaluators"]
    ]
    assert p.locator("#runs .hist-labels span").all_text_contents() == [
        f"{_fixed(b['start'], 1)}–{_fixed(b['end'], 1)} ({_int(b['count'])})"
        for b in s["histogram"]
    ]
