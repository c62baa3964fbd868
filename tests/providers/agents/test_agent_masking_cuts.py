"""Masking comes before shortening in what agents leave: a key placed across every cut
point of the end of an agent's stderr (its error, the error's ``stderr_tail``, a successful
answer's raw record), of an answer cut at ``max_output_bytes`` (stdout and the output file)
and of a process's capped output leaves no part of itself behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentv.errors import AgentProcessError
from agentv.providers.agents.cli import CliProvider, CliSettings
from agentv.system.process import run_process
from support.masking import FILL, KEY, OFFSETS, across, clean
from support.providers import ask

#: every test here starts agents as processes: left out of `make test-fast`
pytestmark = pytest.mark.slow


def cli(command: str, **fields: object) -> CliProvider:
    """A ``cli`` target given KEY in a credential-named variable."""
    settings = CliSettings.model_validate(
        {"command_template": command, "env": {"SERVICE_API_KEY": KEY}, **fields}
    )
    return CliProvider("agent", settings)


async def test_an_agents_stderr_is_masked_before_its_end_is_kept(tmp_path: Path) -> None:
    # the error quotes the last 1500 characters; its stderr_tail keeps the last 2000
    size = 2600
    source = tmp_path / "err.txt"
    target = cli(f"cat {source} >&2; exit 1")
    for offset in OFFSETS:
        source.write_text(across(size, [size - 2000, size - 1500], offset))
        with pytest.raises(AgentProcessError) as info:
            await target.invoke(ask("hi"))
        head = "CLI command exited with code 1: "
        assert str(info.value).startswith(head + "…")
        assert clean(str(info.value)[len(head) :]), offset
        assert clean(info.value.stderr_tail), offset


async def test_a_successful_agents_raw_stderr_is_masked_before_its_end_is_kept(
    tmp_path: Path,
) -> None:
    size = 4500
    source = tmp_path / "err.txt"
    target = cli(f"cat {source} >&2; echo done")
    for offset in OFFSETS:
        source.write_text(across(size, [size - 4000], offset))
        response = await target.invoke(ask("hi"))
        assert clean(response.raw["stderr"]), offset
        assert response.text == "done"


@pytest.mark.parametrize("source", ["stdout", "output_file"])
async def test_an_answer_cut_at_max_output_bytes_keeps_no_part_of_a_key(
    tmp_path: Path, source: str
) -> None:
    cap = 1000
    answer = tmp_path / "answer.txt"
    command = f"cat {answer}" if source == "stdout" else f"cp {answer} {{OUTPUT_FILE}}"
    target = cli(command, max_output_bytes=cap)
    for offset in OFFSETS:
        answer.write_text(across(3000, [cap], offset))
        response = await target.invoke(ask("hi"))
        # the key is masked whole, where the cut would have halved it: not one character
        # of it is left
        kept, marker = response.text.split("\n")
        assert set(kept) == {FILL, "*"} and kept.endswith("***"), offset
        assert marker == "[agentv: output cut at 1000 bytes]"
        assert response.raw["truncated"] is True


async def test_a_process_output_cap_never_halves_a_key(tmp_path: Path) -> None:
    # stderr keeps its last 1000 bytes, stdout (an answer) its first 1000
    source = tmp_path / "out.txt"
    for offset in OFFSETS:
        source.write_text(across(3000, [1000, 2000], offset))
        result = await run_process(
            f"cat {source}; cat {source} >&2", max_output=1000, stdout_head=1000, secrets=[KEY]
        )
        assert result.stdout_truncated and result.stderr_truncated
        # not one character of the key at either cut: masked whole, or not kept at all
        assert set(result.stdout) == {FILL, "*"} and result.stdout.endswith("***"), offset
        assert set(result.stderr) == {FILL, "*"}, offset
        assert result.stdout.startswith(FILL) and result.stderr.endswith(FILL)
