"""``provider: cli``: quoting, answers, chat prompt file, env, cwd, timeouts, healthchecks."""

from __future__ import annotations

import json
import shlex
import socket
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from agentv.cases import EvalCase
from agentv.errors import AgentProcessError, ProviderError, ProviderTimeout
from agentv.messages import Message, TextSegment
from agentv.prompts.builder import PromptSettings, build_prompt
from agentv.providers.agents.cli import CliProvider, CliSettings
from agentv.providers.base import request_for_case
from support.providers import ask

PY = shlex.quote(sys.executable)

HOSTILE = [
    "'; touch PWNED; '",
    "$(touch PWNED)",
    "`touch PWNED`",
    "two\nlines; touch PWNED",
    '" && touch PWNED && "',
    "\x01\x02\x7f\x1b[31m\xff\xfe\u202e ${HOME} %s {PROMPT} \\ \t end",
]

# Writes each argument it receives to $ARGV_FILE as raw bytes, NUL-separated.
RECORDER = """
import os, sys
with open(os.environ["ARGV_FILE"], "wb") as fh:
    fh.write(b"\\0".join(os.fsencode(a) for a in sys.argv[1:]))
"""


def provider(name: str = "my-cli", **fields: Any) -> CliProvider:
    return CliProvider(name, CliSettings.model_validate(fields))


@pytest.fixture
def recorder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Path]:
    script = tmp_path / "recorder.py"
    script.write_text(RECORDER)
    argv_file = tmp_path / "argv.bin"
    monkeypatch.setenv("ARGV_FILE", str(argv_file))
    return f"{PY} {shlex.quote(str(script))}", argv_file


def recorded(argv_file: Path) -> list[bytes]:
    return argv_file.read_bytes().split(b"\0")


def no_pwned(*folders: Path) -> None:
    for folder in folders:
        assert not (folder / "PWNED").exists(), f"injected command ran in {folder}"


# --- quoting ------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("hostile", HOSTILE)
async def test_prompt_and_guidelines_reach_the_child_byte_for_byte(
    repo: Path, tmp_path: Path, recorder: tuple[str, Path], hostile: str
) -> None:
    command, argv_file = recorder
    work = tmp_path / "work"
    work.mkdir()
    target = provider(command_template=f"{command} {{PROMPT}} {{GUIDELINES}}", cwd=str(work))
    guidelines = f"guide {hostile}"
    await target.invoke(ask(question=hostile, guidelines=guidelines, eval_id="x"))
    assert recorded(argv_file) == [hostile.encode(), guidelines.encode()]
    no_pwned(work, repo)


@pytest.mark.slow
async def test_hostile_file_names_reach_the_child_intact(
    repo: Path, tmp_path: Path, recorder: tuple[str, Path]
) -> None:
    command, argv_file = recorder
    folder = tmp_path / "files"
    folder.mkdir()
    names = [n.replace("/", "_") + ".txt" for n in HOSTILE if "\x00" not in n]
    paths = []
    for name in names:
        path = folder / name
        path.write_text("x")
        paths.append(path)
    target = provider(
        command_template=f"{command} {{FILES}}", files_format="--in={path} --name={basename}"
    )
    guideline = folder / "style.instructions.md"
    guideline.write_text("g")
    await target.invoke(
        ask(question="q", input_files=[*paths, paths[0]], guideline_paths=[guideline], eval_id="x")
    )
    expected = []
    for path in [guideline, *paths]:  # guideline files first, duplicates dropped
        expected += [f"--in={path}".encode(), f"--name={path.name}".encode()]
    assert recorded(argv_file) == expected
    no_pwned(repo, folder)


@pytest.mark.slow
async def test_eval_id_attempt_and_empty_files(recorder: tuple[str, Path]) -> None:
    command, argv_file = recorder
    target = provider(command_template=f"{command} {{EVAL_ID}} {{ATTEMPT}} {{FILES}} end")
    await target.invoke(ask(question="q", eval_id="case; rm -rf /", attempt=2))
    assert recorded(argv_file) == [b"case; rm -rf /", b"2", b"end"]


@pytest.mark.slow
async def test_shell_expansions_are_not_placeholders(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOME_VALUE", "from-env")
    target = provider(command_template="printf '%s' \"${SOME_VALUE}\"")
    response = await target.invoke(ask(question="q"))
    assert response.text == "from-env"


# --- the answer --------------------------------------------------------------------------------


@pytest.mark.slow
async def test_answer_is_the_output_file_which_is_then_removed() -> None:
    target = provider(
        command_template="printf 'from file\\r\\nline 2\\n' > {OUTPUT_FILE}; echo ignored"
    )
    response = await target.invoke(ask(question="q", eval_id="c1"))
    assert response.text == "from file\nline 2\n"
    assert response.raw["answer_source"] == "output_file"
    output_file = Path(response.sent["output_file"])
    assert "c1" in output_file.name
    assert not output_file.exists()
    assert not output_file.parent.exists()


@pytest.mark.slow
async def test_answer_is_stdout_when_no_output_file_was_written() -> None:
    target = provider(command_template="echo hello {PROMPT}")
    response = await target.invoke(ask(question="world"))
    assert response.text == "hello world"
    assert response.raw["answer_source"] == "stdout"
    assert response.raw["exit_code"] == 0
    assert response.sent["command"] == "echo hello world"


@pytest.mark.slow
async def test_chat_prompt_file_holds_the_conversation_with_roles() -> None:
    case = EvalCase(
        id="multi",
        dataset="d",
        eval_file=Path("e.yaml"),
        outcome="o",
        input_messages=(
            Message("system", (TextSegment("Be terse."),)),
            Message("user", (TextSegment("Hi"),)),
            Message("assistant", (TextSegment("Hello!"),)),
            Message("user", (TextSegment("What is 2+2?"),)),
        ),
    )
    target = provider(command_template="cat {CHAT_PROMPT_FILE} > {OUTPUT_FILE}")
    prompt = build_prompt(case, PromptSettings.of(target))
    response = await target.invoke(request_for_case(case, prompt))
    messages = json.loads(response.text)
    assert [(m["role"], m["content"]) for m in messages] == [
        ("system", "Be terse."),
        ("user", "Hi"),
        ("assistant", "Hello!"),
        ("user", "What is 2+2?"),
    ]
    assert response.sent["chat_prompt"] == messages
    assert not Path(response.sent["chat_prompt_file"]).exists()


@pytest.mark.slow
async def test_chat_prompt_file_of_a_plain_question_holds_its_two_messages() -> None:
    target = provider(command_template="cat {CHAT_PROMPT_FILE}")
    response = await target.invoke(ask(question="Q?", guidelines="Be kind"))
    messages = json.loads(response.text)
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[0]["content"].endswith("[[ ## Guidelines ## ]]\n\nBe kind")
    assert messages[1]["content"] == "Q?"


# --- environment, cwd, failures -----------------------------------------------------------------


@pytest.mark.slow
async def test_env_is_applied_on_top_of_the_inherited_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("INHERITED", "parent")
    monkeypatch.setenv("OVERRIDDEN", "parent")
    target = provider(
        command_template='printf \'%s %s %s %s\' "$INHERITED" "$OVERRIDDEN" "$EXTRA" "$PORT"',
        env={"OVERRIDDEN": "target", "EXTRA": "x", "PORT": 8080},
    )
    response = await target.invoke(ask(question="q"))
    assert response.text == "parent target x 8080"
    assert response.sent["env"] == ["EXTRA", "OVERRIDDEN", "PORT"]  # names, never values


@pytest.mark.slow
async def test_cwd_is_where_the_command_runs(tmp_path: Path) -> None:
    response = await provider(command_template="pwd", cwd=str(tmp_path)).invoke(ask(question="q"))
    assert Path(response.text).resolve() == tmp_path.resolve()
    with pytest.raises(ProviderError, match=r"working directory .* does not exist"):
        await provider(command_template="pwd", cwd=str(tmp_path / "nope")).invoke(ask(question="q"))


@pytest.mark.slow
async def test_timeout_is_reported_as_a_timeout() -> None:
    target = provider(command_template="sleep 30", timeout_seconds=0.5)
    with pytest.raises(ProviderTimeout, match="CLI command timed out after 1s"):
        await target.invoke(ask(question="q"))
    # the run's own limit applies too, whichever is smaller
    target = provider(command_template="sleep 30", timeout_seconds=100)
    with pytest.raises(ProviderTimeout):
        await target.invoke(ask(question="q", timeout=0.5))


@pytest.mark.slow
async def test_non_zero_exit_reports_code_and_stderr() -> None:
    target = provider(command_template="echo partial; echo 'model exploded' >&2; exit 4")
    with pytest.raises(AgentProcessError) as info:
        await target.invoke(ask(question="q"))
    assert str(info.value) == "CLI command exited with code 4: model exploded"
    assert info.value.exit_code == 4
    assert info.value.target == "my-cli"


@pytest.mark.slow
async def test_secrets_never_reach_records_or_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-0123456789")
    target = provider(
        command_template="echo --token tok-0123456789 {PROMPT}",
        env={"OTHER_API_KEY": "sk-abcdefghij"},
    )
    response = await target.invoke(ask(question="q"))
    assert "tok-0123456789" not in json.dumps(response.sent)
    assert "***" in response.sent["command"]
    failing = provider(
        command_template="echo sk-abcdefghij >&2; exit 1", env={"OTHER_API_KEY": "sk-abcdefghij"}
    )
    with pytest.raises(AgentProcessError) as info:
        await failing.invoke(ask(question="q"))
    assert "sk-abcdefghij" not in str(info.value)
    assert "sk-abcdefghij" not in info.value.stderr_tail


# --- healthchecks -------------------------------------------------------------------------------


@pytest.mark.slow
async def test_failed_command_healthcheck_stops_with_a_clear_message(tmp_path: Path) -> None:
    counter = tmp_path / "count"
    check = f"echo run >> {shlex.quote(str(counter))}; echo 'database is down' >&2; exit 3"
    target = provider(
        command_template="echo answer",
        healthcheck={"type": "command", "commandTemplate": check},
    )
    with pytest.raises(ProviderError) as info:
        await target.healthcheck()
    message = "CLI healthcheck failed for 'my-cli': healthcheck command exited with code 3: "
    assert str(info.value) == message + "database is down"
    # remembered: later calls fail the same way without running the check again
    with pytest.raises(ProviderError, match="healthcheck failed for 'my-cli'"):
        await target.invoke(ask(question="q"))
    with pytest.raises(ProviderError):
        await target.healthcheck()
    assert counter.read_text().splitlines() == ["run"]


@pytest.mark.slow
async def test_passing_command_healthcheck_runs_once(tmp_path: Path) -> None:
    counter = tmp_path / "count"
    target = provider(
        command_template="echo answer",
        healthcheck={
            "type": "command",
            "command_template": f"echo {{EVAL_ID}} >> {shlex.quote(str(counter))}",
            "cwd": str(tmp_path),
        },
    )
    await target.healthcheck()
    assert (await target.invoke(ask(question="q"))).text == "answer"
    assert counter.read_text().splitlines() == ["healthcheck"]


@pytest.mark.slow
async def test_healthcheck_command_timeout(tmp_path: Path) -> None:
    target = provider(
        command_template="echo answer",
        healthcheck={"type": "command", "command_template": "sleep 30", "timeout_seconds": 0.3},
    )
    with pytest.raises(ProviderError, match="healthcheck command timed out"):
        await target.healthcheck()


class _Health(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(503 if self.path.startswith("/down") else 200)
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def health_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Health)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


async def test_http_healthcheck(health_server: str) -> None:
    ok = provider(command_template="echo a", healthcheck={"type": "http", "url": health_server})
    await ok.healthcheck()
    down = provider(
        "web-agent",
        command_template="echo a",
        healthcheck={"type": "HTTP", "url": f"{health_server}/down?key=hidden"},
    )
    with pytest.raises(ProviderError) as info:
        await down.healthcheck()
    assert str(info.value).startswith("CLI healthcheck failed for 'web-agent': GET ")
    assert "HTTP 503" in str(info.value)
    assert "hidden" not in str(info.value)  # the query string may hold a token


async def test_http_healthcheck_connection_refused(health_server: str) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    target = provider(
        command_template="echo a",
        healthcheck={"type": "http", "url": f"http://127.0.0.1:{port}/", "timeoutSeconds": 2},
    )
    with pytest.raises(ProviderError, match=r"healthcheck failed for 'my-cli': GET .* failed"):
        await target.healthcheck()


# --- settings -----------------------------------------------------------------------------------


def test_settings_accept_camel_case_aliases() -> None:
    settings = CliSettings.model_validate(
        {
            "commandTemplate": "run {PROMPT}",
            "attachmentsFormat": "-f {path}",
            "timeoutSeconds": "12",
            "healthcheck": {"type": "command", "commandTemplate": "true", "timeoutSeconds": 3},
        }
    )
    assert settings.command_template == "run {PROMPT}"
    assert settings.files_format == "-f {path}"
    assert settings.timeout_seconds == 12
    assert settings.healthcheck is not None and settings.healthcheck.type == "command"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"command_template": "run {QUESTION}"}, "unsupported placeholder '{QUESTION}'"),
        ({"command_template": "run {QUESTION}"}, "Supported placeholders: PROMPT, GUIDELINES"),
        ({"command_template": "   "}, "must be a non-empty command line"),
        ({}, "command_template"),
        ({"command_template": "x", "timeout_seconds": 0}, "greater than zero seconds"),
        ({"command_template": "x", "healthcheck": "yes"}, "must be a mapping"),
        ({"command_template": "x", "healthcheck": {"type": "ping"}}, "'http' or 'command'"),
        ({"command_template": "x", "healthcheck": {"type": "http"}}, "url"),
        (
            {"command_template": "x", "healthcheck": {"type": "command", "commandTemplate": "{X}"}},
            "unsupported placeholder '{X}'",
        ),
        ({"command_template": "x", "env": ["A=1"]}, "must be a mapping"),
        ({"command_template": "x", "shell": "bash"}, "shell"),
    ],
)
def test_settings_errors_say_what_is_wrong(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError) as info:
        CliSettings.model_validate(fields)
    assert message in str(info.value)
