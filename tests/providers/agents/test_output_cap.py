"""A cli agent's answer is capped (issue 16): ``{OUTPUT_FILE}`` and stdout alike keep at
most ``max_output_bytes`` (10 MiB by default), never read more than that plus one byte,
and end with a marker saying so."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from agentv.providers.agents.cli import DEFAULT_MAX_ANSWER_BYTES, CliProvider, CliSettings
from agentv.system.process import cut_marker, decode_head
from support.cli import agentv_cli_peak
from support.files import write
from support.providers import ask

PY = shlex.quote(sys.executable)


def provider(**fields: Any) -> CliProvider:
    return CliProvider("capped", CliSettings.model_validate(fields))


def test_the_marker_names_the_cap() -> None:
    assert cut_marker(10 * 1024 * 1024) == "\n[agentv: output cut at 10 MiB]"
    assert cut_marker(4096) == "\n[agentv: output cut at 4 KiB]"
    assert cut_marker(1000) == "\n[agentv: output cut at 1000 bytes]"
    assert DEFAULT_MAX_ANSWER_BYTES == 10 * 1024 * 1024


def test_a_character_split_by_the_cut_is_dropped() -> None:
    assert decode_head("ab€".encode()[:4], cut=True) == "ab"
    assert decode_head("ab€".encode(), cut=True) == "ab€"
    assert decode_head(b"ab", cut=False) == "ab"


def test_max_output_bytes_must_be_positive() -> None:
    with pytest.raises(ValidationError, match="greater than or equal to 1"):
        CliSettings.model_validate({"command_template": "echo", "max_output_bytes": 0})
    assert (
        CliSettings.model_validate(
            {"command_template": "echo", "maxOutputBytes": 5}
        ).max_output_bytes
        == 5
    )


@pytest.mark.slow
async def test_an_output_file_beyond_the_cap_is_cut_with_a_marker() -> None:
    target = provider(
        command_template=f"{PY} -c \"print('€' * 3000, end='')\" > {{OUTPUT_FILE}}",
        max_output_bytes=1000,
    )
    response = await target.invoke(ask(question="q"))
    body, marker = response.text.split("\n")
    assert body == "€" * 333  # 999 bytes: the character the cut split is dropped
    assert "\n" + marker == "\n[agentv: output cut at 1000 bytes]"
    assert response.raw["truncated"] is True
    assert response.raw["answer_source"] == "output_file"


@pytest.mark.slow
async def test_stdout_beyond_the_cap_keeps_its_start_with_a_marker() -> None:
    target = provider(
        command_template=f"{PY} -c \"print('a' * 2048 + 'b' * 4096)\"",
        max_output_bytes=2048,
    )
    response = await target.invoke(ask(question="q"))
    assert response.text == "a" * 2048 + "\n[agentv: output cut at 2 KiB]"
    assert response.raw["truncated"] is True
    assert response.raw["answer_source"] == "stdout"


@pytest.mark.slow
async def test_an_answer_within_the_cap_is_whole_and_unmarked() -> None:
    target = provider(command_template="printf 'x%.0s' $(seq 100)", max_output_bytes=100)
    response = await target.invoke(ask(question="q"))
    assert response.text == "x" * 100
    assert response.raw["truncated"] is False


@pytest.mark.slow
async def test_the_default_cap_is_10_mib() -> None:
    target = provider(
        command_template=f"{PY} -c \"print('a' * (11 * 1024 * 1024), end='')\" > {{OUTPUT_FILE}}"
    )
    response = await target.invoke(ask(question="q"))
    assert response.text == "a" * (10 * 1024 * 1024) + "\n[agentv: output cut at 10 MiB]"


@pytest.mark.slow
def test_a_2_gib_output_file_is_read_no_further_than_the_cap(repo: Path) -> None:
    # The answer file is 2 GiB (sparse: no disk used); agentv reads 4 KiB of it and stays
    # small, where it used to read it whole (and die).
    write(
        repo,
        ".agentv/targets.yaml",
        "$schema: agentv-targets-v2.2\ntargets:\n"
        "  - name: default\n    provider: cli\n    max_output_bytes: 4096\n"
        "    command_template: truncate -s 2G {OUTPUT_FILE}\n",
    )
    write(
        repo,
        "evals/big.yaml",
        "$schema: agentv-eval-v2\nevalcases:\n"
        "  - id: big\n    outcome: anything\n"
        "    input_messages: [{role: user, content: hi}]\n"
        "    execution: {evaluators: [{type: contains, value: 'cut at'}]}\n",
    )
    proc, peak_kib = agentv_cli_peak(repo, "eval", "evals/big.yaml", "--out", "r.jsonl")
    assert proc.returncode == 0, proc.stderr
    assert peak_kib < 500 * 1024, f"agentv grew to {peak_kib // 1024} MiB"
    line = (repo / "r.jsonl").read_text(encoding="utf-8")
    assert len(line) < 100_000
    record = json.loads(line)
    assert record["candidate_answer"].endswith("\n[agentv: output cut at 4 KiB]")
    assert record["status"] == "ok"
