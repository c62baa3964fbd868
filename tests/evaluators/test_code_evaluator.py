"""The code evaluator, with real scripts run through the shell in temporary folders."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import sys
import time
from pathlib import Path

import pytest

from agentv.evaluators.grading import grade_case, run_evaluator
from agentv.messages import FileSegment, GuidelineFile, GuidelineRef, TextSegment
from agentv.system.masking import Masker, masking_scope
from support.evaluator_kit import code, make_case, make_ctx, msg, user
from support.masking import KEY, OFFSETS, across, clean, fragments

PY = shlex.quote(sys.executable)


def script(folder: Path, name: str, body: str) -> str:
    """Write a Python script into ``folder`` and return the shell command that runs it."""
    (folder / name).write_text(body, encoding="utf-8")
    return f"{PY} {name}"


def _alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie waiting to be reaped counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    except OSError:  # pragma: no cover - no /proc: fall back to a signal probe
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return state not in ("Z", "X")


async def _wait_for(path: Path, seconds: float = 10.0) -> str:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists() and path.read_text(encoding="utf-8").strip():
            return path.read_text(encoding="utf-8").strip()
        await asyncio.sleep(0.02)
    raise AssertionError(f"{path} was never written")


ECHO_PAYLOAD = """
import json, sys
payload = json.load(sys.stdin)
with open("payload.json", "w", encoding="utf-8") as f:
    json.dump(payload, f)
print(json.dumps({"score": 0.5, "hits": ["got it"], "misses": [], "reasoning": "echo"}))
"""


@pytest.mark.slow
async def test_payload_on_stdin(tmp_path: Path) -> None:
    guide = tmp_path / "style.instructions.md"
    data = tmp_path / "data.csv"
    messages = [
        msg("system", TextSegment("Be exact.")),
        msg("user", GuidelineRef("style.instructions.md", guide), TextSegment("Sum this:")),
        msg("user", FileSegment("data.csv", data, "1,2\n")),
    ]
    config = code(script(tmp_path, "echo.py", ECHO_PAYLOAD), tmp_path)
    case = make_case(
        tmp_path,
        messages=messages,
        outcome="Adds up.",
        reference="3",
        guideline_files=[GuidelineFile("style.instructions.md", guide, "rules")],
        input_files=[data],
        evaluators=[config],
    )
    ctx = make_ctx(case, "The sum is 3 ✓")
    result = await run_evaluator(ctx, config)
    assert result.error is None, result.error
    assert (result.score, result.hits, result.reasoning) == (0.5, ["got it"], "echo")

    payload = json.loads((tmp_path / "payload.json").read_text(encoding="utf-8"))
    segments = [
        {"type": "text", "value": "Be exact."},
        {"type": "text", "value": "Sum this:"},
        {"type": "file", "path": "data.csv", "text": "1,2\n", "resolved_path": str(data)},
    ]
    files = [str(guide), str(data)]
    assert payload == {
        "question": ctx.prompt.question,
        "expected_outcome": "Adds up.",
        "reference_answer": "3",
        "candidate_answer": "The sum is 3 ✓",
        "guideline_paths": [str(guide)],
        "input_files": files,
        "input_segments": segments,
        "task": ctx.prompt.question,
        "outcome": "Adds up.",
        "expected": "3",
        "output": "The sum is 3 ✓",
        "system_message": "Be exact.",
        "attachments": files,
        "user_segments": segments,
        "trajectory": None,  # this context has none: its target cannot say
    }
    # the question is the one the candidate got: role markers for this conversation
    assert payload["question"].startswith("@[System]:\nBe exact.\n\n@[User]:\n")
    assert list(payload)[:7] == [
        "question",
        "expected_outcome",
        "reference_answer",
        "candidate_answer",
        "guideline_paths",
        "input_files",
        "input_segments",
    ]
    assert result.raw_request == {"script": config.spec.script, "cwd": str(tmp_path)}


CWD_AND_ENV = """
import json, os
print(json.dumps({"score": 1, "hits": [os.getcwd(), os.environ.get("AGENTV_TEST_MARK", "")]}))
"""


@pytest.mark.slow
async def test_cwd_and_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    workdir = tmp_path / "checks"
    workdir.mkdir()
    monkeypatch.setenv("AGENTV_TEST_MARK", "inherited")
    config = code(script(workdir, "where.py", CWD_AND_ENV), workdir)
    result = await run_evaluator(make_ctx(make_case(tmp_path), "x"), config)
    assert result.hits == [str(workdir), "inherited"]


@pytest.mark.slow
async def test_default_cwd_is_the_eval_files_folder(tmp_path: Path) -> None:
    config = code(script(tmp_path, "where.py", CWD_AND_ENV), None)
    result = await run_evaluator(make_ctx(make_case(tmp_path), "x"), config)
    assert result.error is None
    assert result.hits[0] == str(tmp_path)


@pytest.mark.slow
async def test_script_is_a_shell_command_line(tmp_path: Path) -> None:
    config = code("""echo '{"score": 0.2, "misses": ["from the shell"]}' | cat""", tmp_path)
    result = await run_evaluator(make_ctx(make_case(tmp_path), "x"), config)
    assert (result.score, result.misses, result.expected_aspect_count) == (
        0.2,
        ["from the shell"],
        1,
    )


@pytest.mark.slow
async def test_output_is_parsed_tolerantly(tmp_path: Path) -> None:
    body = """
import json
print("loading model...")
print("checking", 3, "items")
print(json.dumps({"score": 1, "hits": ["h1", "h2", "h3", "h4", "h5", " "], "misses": ["m1"]}))
"""
    result = await run_evaluator(
        make_ctx(make_case(tmp_path), "x"), code(script(tmp_path, "noisy.py", body), tmp_path)
    )
    assert result.error is None
    assert result.score == 1.0
    assert result.hits == ["h1", "h2", "h3", "h4", "h5"]  # no cap of 4 for scripts
    assert result.expected_aspect_count == 6


@pytest.mark.slow
async def test_non_zero_exit_is_a_failure_with_stderr_tail(tmp_path: Path) -> None:
    body = """
import sys
print('{"score": 1}')
sys.stderr.write("x" * 2000 + "\\nTraceback: KeyError: 'answer'\\n")
sys.exit(3)
"""
    config = code(script(tmp_path, "crash.py", body), tmp_path, name="crashy")
    result = await run_evaluator(make_ctx(make_case(tmp_path), "x"), config)
    assert result.score == 0.0 and result.hits == []
    assert result.error is not None
    assert result.error.startswith(f"`{config.spec.script}` exited with code 3; stderr: …")
    assert result.error.endswith("Traceback: KeyError: 'answer'")
    assert len(result.error) < 700  # the tail, not all of stderr
    assert result.misses == [f"Evaluator 'crashy' failed: {result.error}"]
    assert result.raw_request is not None and result.raw_request["script"] == config.spec.script


@pytest.mark.slow
async def test_non_zero_exit_without_stderr_still_fails(tmp_path: Path) -> None:
    config = code("""echo '{"score": 1}'; exit 1""", tmp_path)
    result = await run_evaluator(make_ctx(make_case(tmp_path), "x"), config)
    assert result.score == 0.0
    assert result.error == f"`{config.spec.script}` exited with code 1"


@pytest.mark.slow
async def test_script_killed_by_a_signal_says_which(tmp_path: Path) -> None:
    config = code("echo 'about to go' >&2; kill -KILL $$", tmp_path)
    result = await run_evaluator(make_ctx(make_case(tmp_path), "x"), config)
    assert result.score == 0.0
    assert (
        result.error == f"`{config.spec.script}` was killed by signal SIGKILL; stderr: about to go"
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("echo 'all good!'", "numeric `score` on stdout (it printed 'all good!')"),
        ("""echo '{"hits": ["no score"]}'""", "did not print a JSON object with a numeric"),
        ("""echo '{"score": "high"}'""", "did not print a JSON object with a numeric"),
        ("true", "`true` printed nothing on stdout (expected a JSON object"),
        ("echo 'oops' >&2", "with a numeric `score`); stderr: oops"),
    ],
)
async def test_unparsable_output_is_a_failure(tmp_path: Path, command: str, expected: str) -> None:
    result = await run_evaluator(make_ctx(make_case(tmp_path), "x"), code(command, tmp_path))
    assert result.score == 0.0
    assert result.error is not None and expected in result.error


async def test_missing_cwd_is_a_failure(tmp_path: Path) -> None:
    config = code("true", tmp_path / "gone")
    result = await run_evaluator(make_ctx(make_case(tmp_path), "x"), config)
    assert result.error is not None
    assert result.error.startswith(f"cannot run `true` in {tmp_path / 'gone'}:")


SPAWNS_GRANDCHILD = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
with open("grandchild.pid", "w") as f:
    f.write(str(child.pid))
time.sleep(60)
"""


@pytest.mark.slow
async def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    config = code(script(tmp_path, "slow.py", SPAWNS_GRANDCHILD), tmp_path)
    started = time.monotonic()
    result = await run_evaluator(make_ctx(make_case(tmp_path), "x", timeout=2.0), config)
    assert time.monotonic() - started < 20  # far less than the script's 60 s
    assert result.score == 0.0
    assert result.error is not None and result.error.startswith(
        "code evaluator timed out after 2 s and was stopped"
    )
    grandchild = int((tmp_path / "grandchild.pid").read_text(encoding="utf-8"))
    deadline = time.monotonic() + 30  # a hang guard: over at once when it holds
    while _alive(grandchild) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert not _alive(grandchild)


@pytest.mark.slow
async def test_background_child_left_behind_does_not_hold_up_grading(tmp_path: Path) -> None:
    config = code("""sleep 60 & echo $! > bg.pid; echo '{"score": 1}'""", tmp_path)
    started = time.monotonic()
    result = await run_evaluator(make_ctx(make_case(tmp_path), "x", timeout=120), config)
    assert time.monotonic() - started < 20
    assert (result.score, result.error) == (1.0, None)
    background = int((tmp_path / "bg.pid").read_text(encoding="utf-8"))
    deadline = time.monotonic() + 30  # a hang guard: over at once when it holds
    while _alive(background) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert not _alive(background)


@pytest.mark.slow
async def test_spec_timeout_wins_over_the_run_timeout(tmp_path: Path) -> None:
    config = code("sleep 30", tmp_path, timeout_seconds=0.5)
    result = await run_evaluator(make_ctx(make_case(tmp_path), "x", timeout=600), config)
    assert result.error is not None and "timed out after 0.5 s" in result.error
    fast = code("""sleep 0.2; echo '{"score": 1}'""", tmp_path, timeout_seconds=0)
    assert (await run_evaluator(make_ctx(make_case(tmp_path), "x", timeout=0.01), fast)).score == 1


@pytest.mark.slow
async def test_cancellation_stops_the_script(tmp_path: Path) -> None:
    config = code(script(tmp_path, "slow.py", SPAWNS_GRANDCHILD), tmp_path)
    case = make_case(tmp_path, evaluators=[config])
    task = asyncio.create_task(grade_case(make_ctx(case, "x")))
    grandchild = int(await _wait_for(tmp_path / "grandchild.pid"))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    deadline = time.monotonic() + 30  # a hang guard: over at once when it holds
    while _alive(grandchild) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert not _alive(grandchild)


@pytest.mark.slow
async def test_large_payload_and_script_that_ignores_stdin(tmp_path: Path) -> None:
    big = "word " * 200_000  # ~1 MB answer: more than a pipe buffer
    ignores = code("""echo '{"score": 1}'""", tmp_path)
    assert (await run_evaluator(make_ctx(make_case(tmp_path), big), ignores)).score == 1
    body = (
        "import json, sys\n"
        "d = json.load(sys.stdin)\n"
        "print(json.dumps({'score': len(d['output']) / 2e6}))\n"
    )
    reads = code(script(tmp_path, "size.py", body), tmp_path)
    result = await run_evaluator(make_ctx(make_case(tmp_path), big), reads)
    assert result.score == pytest.approx(0.5)


async def test_default_code_evaluator_falls_back_to_the_judge(tmp_path: Path) -> None:
    case = make_case(tmp_path, messages=[user("hi")], default_evaluator="code")
    grade = await grade_case(make_ctx(case, "x", judge=None))
    # no script to run: the judge is used, and without a judge that is a judge failure
    assert grade.judge_failed
    assert grade.evaluator_results is None


@pytest.mark.slow
@pytest.mark.parametrize("stream", ["stderr", "stdout"])
async def test_output_is_masked_before_it_is_cut(tmp_path: Path, stream: str) -> None:
    # a key across every cut point: of the last 500 characters of a failed script's stderr,
    # and of the first 200 of a script that printed no verdict
    source = tmp_path / "out.txt"
    if stream == "stderr":
        config, cuts = code(f"cat {source} >&2; exit 1", tmp_path), [800 - 500]
    else:
        config, cuts = code(f"cat {source}", tmp_path), [200]
    for offset in OFFSETS:
        source.write_text(across(800, cuts, offset))
        with masking_scope(Masker([KEY])) as scope:  # the run's secrets, as a run sets them
            result = await run_evaluator(make_ctx(make_case(tmp_path), "x"), config)
        assert result.error is not None and "…" in result.error
        assert fragments(result.error) == [], offset
        shown = result.error.split("stderr: ")[-1] if stream == "stderr" else result.error
        if stream == "stdout":
            shown = shown.split("(it printed '")[1].rstrip("')")
        assert clean(shown), offset
        assert scope.masked  # the case's record will say masked_secrets: true
