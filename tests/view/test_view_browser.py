"""The workbench (``agentv view``) in a real browser: Debian's chromium driven by
Playwright, against the real command serving a store of three runs of two eval files.

Every request the page makes is routed: anything but the workbench's own address fails
the test. A missing browser fails these tests in CI (``CI=true``) and skips them
elsewhere, as the report's browser tests do.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.cli import agentv_cli, start_agentv
from support.paths import TESTS

#: every test here runs `agentv view` as a process, most drive chromium: left out of
#: `make test-fast`
pytestmark = pytest.mark.slow

CHROMIUM = os.environ.get("AGENTV_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run"]
TOOLS = TESTS.parent / "tools"
REVIEWER = "Ada Reviewer"


def _unavailable(reason: str) -> None:
    message = f"{reason}; the browser tests need it: apt-get install -y chromium"
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example project (tools/view_example.py) with its three runs in its store."""
    root = tmp_path_factory.mktemp("history")
    sys.path.insert(0, str(TOOLS))
    try:
        import view_example

        view_example.make_history(root)
    finally:
        sys.path.remove(str(TOOLS))
        sys.modules.pop("view_example", None)
    return root


class Server:
    """``agentv view`` running in ``project``, until stopped."""

    def __init__(self, project: Path, *args: str) -> None:
        self.process = start_agentv(project, "view", "--no-open", "--reviewer", REVIEWER, *args)
        assert self.process.stdout is not None
        first = self.process.stdout.readline()
        assert first.startswith("agentv view: http://"), first + self.process.stderr.read()
        self.url = first.split(": ", 1)[1].strip()
        self.origin = self.url.split("/?")[0].rstrip("/")
        self.port = int(self.origin.rsplit(":", 1)[1])

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()


@pytest.fixture
def server(project: Path) -> Iterator[Server]:
    running = Server(project)
    yield running
    running.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not (Path(CHROMIUM).exists() or shutil.which(CHROMIUM)):
        _unavailable(f"chromium is not installed ({CHROMIUM} is missing)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("the playwright package is missing")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


class Page:
    """A browser page that may ask the workbench only; its console errors are kept."""

    def __init__(self, browser: Any, origin: str) -> None:
        self.origin = origin
        self.context = browser.new_context(viewport={"width": 1300, "height": 900})
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.outside: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.context.route("**/*", self._route)

    def _route(self, route: Any) -> None:
        if route.request.url.startswith(self.origin + "/"):
            route.continue_()
        else:
            self.outside.append(route.request.url)
            route.abort()

    def open(self, url: str) -> Any:
        self.page.goto(url)
        self.page.wait_for_selector("body[data-ready='1']")
        return self.page

    def close(self) -> None:
        self.context.close()
        assert self.outside == [], f"the workbench asked the network for {self.outside}"
        assert self.errors == [], f"console errors: {self.errors}"


def _texts(page: Any, selector: str) -> list[str]:
    return [t.strip() for t in page.locator(selector).all_inner_texts()]


def _listening(port: int) -> list[str]:
    """The local addresses of every socket listening on ``port`` (from /proc/net)."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            address, state = fields[1], fields[3]
            host, hex_port = address.rsplit(":", 1)
            if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                found.append(host)
    return found


def test_the_workbench_in_a_browser(project: Path, browser: Any) -> None:
    server = Server(project)
    try:
        # nothing listens anywhere but on 127.0.0.1 (0100007F in /proc/net/tcp)
        assert _listening(server.port) == ["0100007F"]
        view = Page(browser, server.origin)
        page = view.open(server.url)
        # the list shows the three runs, newest first
        assert page.get_attribute("#run-count", "data-count") == "3"
        assert page.locator("#runs tbody tr").evaluate_all(
            "rows => rows.map(r => r.dataset.run)"
        ) == [
            "3",
            "2",
            "1",
        ]
        # open the second run, filter to its failures
        page.click("#runs a[href='/runs/2']")
        page.wait_for_selector("body[data-ready='1']")
        assert page.get_attribute("#count", "data-matched") == "5"
        page.select_option("select[name=status]", "failed")
        page.wait_for_url("**/runs/2?*status=failed*")
        page.wait_for_selector("body[data-ready='1']")
        assert _texts(page, "#records tbody td.id a") == ["japan", "tracking", "remembers-name"]
        assert set(_texts(page, "#records tbody .status")) == {"failed"}
        # open the live conversation: its turns, as sent and answered
        page.click("#records a:text('remembers-name')")
        page.wait_for_selector("#turns")
        assert _texts(page, "#turns .turn .role-user pre") == ["Hi, I'm Ada.", "What is my name?"]
        answer = "Hello! Returns are free within 30 days. Paris."
        assert _texts(page, "#turns .turn .role-assistant pre") == [answer, answer]
        assert page.inner_text("#no-reviews") == "Nobody has reviewed this answer yet."
        # review it
        record_url = page.url
        page.check("input[name=verdict][value=fail]")
        page.fill("input[name=score]", "0.1")
        page.fill("textarea[name=comment]", "Forgets the name. <b>not bold</b>")
        page.click("#review-form button[type=submit]")
        page.wait_for_selector("#saved")
        rows = page.locator("#review-list tbody tr td")
        assert [t.strip() for t in rows.all_inner_texts()][:4] == [
            "fail",
            "0.10",
            "Forgets the name. <b>not bold</b>",
            REVIEWER,
        ]
        view.close()
    finally:
        server.stop()
    # restart the server: the review is still there
    again = Server(project)
    try:
        view = Page(browser, again.origin)
        page = view.open(again.origin + record_url.removeprefix(server.origin).split("?")[0])
        assert [t.strip() for t in page.locator("#review-list tbody tr td").all_inner_texts()][
            :4
        ] == [
            "fail",
            "0.10",
            "Forgets the name. <b>not bold</b>",
            REVIEWER,
        ]
        # the run's page counts it, and the queue no longer lists it
        page = view.open(again.origin + "/runs/2")
        assert page.inner_text("[data-figure=reviewed]") == "1"
        page = view.open(again.origin + "/queue")
        queued = page.locator("#queue tbody tr").evaluate_all(
            "rows => rows.map(r => [r.dataset.reason, r.cells[1].querySelector('a').textContent,"
            " r.dataset.run])"
        )
        # a judge and a check disagree (run 2: the judge's 0.75 fails, "30 days" is there),
        # a judge near its threshold (run 1: 0.9 against 0.8), then the flaky cases, newest
        # run first; the answer just reviewed is no longer waiting
        assert queued[:2] == [["disagree", "refund-window", "2"], ["near", "refund-window", "1"]]
        assert [q[2] for q in queued[2:]] == ["3", "2", "2", "1", "1", "1"]
        assert sorted(map(tuple, queued[2:])) == [
            ("flaky", "japan", "1"),
            ("flaky", "japan", "2"),
            ("flaky", "japan", "3"),
            ("flaky", "remembers-name", "1"),
            ("flaky", "tracking", "1"),
            ("flaky", "tracking", "2"),
        ]
        # compare two runs
        page = view.open(again.origin + "/")
        page.select_option("select[name=base]", "1")
        page.select_option("select[name=new]", "2")
        page.click("form[action='/compare'] button")
        page.wait_for_selector("#counts")
        counts = page.locator("#counts b").evaluate_all(
            "bs => Object.fromEntries(bs.map(b => [b.dataset.count, Number(b.textContent)]))"
        )
        assert counts == {"improved": 0, "regressed": 4, "unchanged": 1, "new": 0, "missing": 0}
        assert _texts(page, "#changed tbody td:first-child") == [
            "japan",
            "refund-window",
            "remembers-name",
            "tracking",
        ]
        # a case's history: flaky, with each run
        page.click("#changed a:text('japan')")
        page.wait_for_selector("#history")
        assert page.inner_text("#flaky") == "flaky"
        assert len(_texts(page, "#history tbody tr")) == 3
        # judges against people
        page = view.open(again.origin + "/calibrate")
        # the live conversation's evaluators are its turns': the case's verdict is compared
        cells = _texts(page, "#calibration tbody tr td")
        assert cells == [
            "case verdict",
            "case",
            "1",
            "100.0%",
            "-",
            "0",
            "0",
            "0",
            "1",
            "only 1 label(s): review at least 20 for figures to trust",
        ]
        view.close()
    finally:
        again.stop()


def _post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, str]:
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_a_post_without_the_token_or_from_elsewhere_is_refused(
    server: Server, project: Path
) -> None:
    url = server.origin + "/runs/1/records/1/review"
    form = "application/x-www-form-urlencoded"
    body = b"verdict=pass&reviewer=mallory"
    assert _post(url, body, {"Content-Type": form, "Origin": server.origin}) == (
        403,
        "refused: the page's token is missing or stale; reload the page\n",
    )
    page = urllib.request.urlopen(server.origin + "/runs/1/records/1", timeout=30).read().decode()
    token = page.split('name="csrf" value="')[1].split('"')[0]
    signed = body + b"&csrf=" + token.encode()
    assert _post(url, signed, {"Content-Type": form, "Origin": "http://evil.example"}) == (
        403,
        "refused: the request did not come from the workbench's own page\n",
    )
    assert _post(url, signed, {"Content-Type": form}) == (
        403,
        "refused: the request did not come from the workbench's own page\n",
    )
    assert _post(url, signed, {"Content-Type": form, "Origin": server.origin})[0] == 200
    # a Host other than the workbench's (another site's name pointed here) is refused
    request = urllib.request.Request(server.origin + "/", headers={"Host": "evil.example"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code == 400


def test_what_results_hold_is_shown_as_text(project: Path, browser: Any, tmp_path: Path) -> None:
    hostile = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=1">'
    results = tmp_path / "hostile.jsonl"
    results.write_text(
        json.dumps(
            {
                "eval_id": "<img src=x onerror=window.__pwned=1>",
                "status": "ok",
                "score": 1.0,
                "candidate_answer": hostile,
                "raw_request": {"chat_prompt": [{"role": "user", "content": hostile}]},
            }
        )
        + "\n"
    )
    store = tmp_path / "hostile.sqlite"
    done = agentv_cli(tmp_path, "runs", "import", str(results), "--store", str(store))
    assert done.returncode == 0, done.stderr
    running = Server(project, "--store", str(store))
    try:
        view = Page(browser, running.origin)
        page = view.open(running.origin + "/runs/1")
        assert _texts(page, "#records tbody td.id a") == ["<img src=x onerror=window.__pwned=1>"]
        page = view.open(running.origin + "/runs/1/records/1")
        assert page.inner_text("#answer") == hostile
        assert page.evaluate("window.__pwned") is None
        assert page.locator("main img, main script").count() == 0
        with urllib.request.urlopen(running.origin + "/runs/1/records/1", timeout=30) as response:
            csp = response.headers["Content-Security-Policy"]
        assert csp == (
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
            "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
        )
        view.close()
    finally:
        running.stop()


def test_another_host_needs_the_token(project: Path, tmp_path: Path) -> None:
    # 127.0.0.2 is another address of the loopback range: served like any other host
    # would be, with a token, and still on this machine only
    running = Server(project, "--host", "0.0.0.0", "--token", "s3cret-token")
    try:
        assert running.url.endswith("/?token=s3cret-token")
        assert _listening(running.port) == ["00000000"]
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"http://127.0.0.1:{running.port}/", timeout=30)
        assert refused.value.code == 401
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
        with opener.open(f"http://127.0.0.1:{running.port}/?token=s3cret-token", timeout=30) as r:
            assert r.url == f"http://127.0.0.1:{running.port}/"  # the token moved to a cookie
            assert "Runs" in r.read().decode()
        with opener.open(f"http://127.0.0.1:{running.port}/runs/1", timeout=30) as r:
            assert r.status == 200
    finally:
        running.stop()
