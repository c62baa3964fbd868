"""What aliases and merges may repeat in one YAML document: one budget for every YAML file
agentv reads (eval, targets, config, JSON Schema and results files). Each bomb below was
reproduced against the real command line first (past 5 GB, or a minute of `validate`); here
the commands run with their memory capped at 1 GB, so a command that tried to build the
bomb would die of MemoryError instead of naming the line."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from agentv.yaml import budget
from agentv.yaml.budget import ExpansionTooLargeError
from agentv.yaml.stream import stream_yaml
from support.cli import agentv_cli
from support.files import write
from support.targets import mock_target, write_targets

CASE = "  - id: a\n    outcome: x\n    input_messages: [{role: user, content: hi}]\n"
#: the memory a command may use here; each bomb describes gigabytes
CAP_MB = 1024


def laughs(levels: int, indent: str = "") -> str:
    """``l0: &l0 [lol x10]``, then each level listing the previous one ten times."""
    lines = [f"{indent}l0: &l0 [{', '.join(['lol'] * 10)}]"]
    for i in range(1, levels):
        lines.append(f"{indent}l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]")
    return "\n".join(lines) + "\n"


def merges(levels: int) -> str:
    """``mN: &mN {<<: [*mN-1], xN: [*mN-1, *mN-1]}``: each level three times the last."""
    lines = ["m0: &m0 {x0: [a, b]}"]
    for i in range(1, levels):
        lines.append(f"m{i}: &m{i} {{<<: [*m{i - 1}], x{i}: [*m{i - 1}, *m{i - 1}]}}")
    return "\n".join(lines) + "\n"


# --- the reader ---------------------------------------------------------------------------


def test_a_billion_laughs_is_refused_at_the_alias_that_crosses_the_budget() -> None:
    with pytest.raises(ExpansionTooLargeError) as caught:
        stream_yaml(laughs(10))
    # 10 + 100 + 1,000 + 10,000 + 100,000 values: the fifth level's aliases cross a million
    assert caught.value.problem_mark is not None
    assert caught.value.problem_mark.line == 5
    assert "more than 1,000,000 values" in str(caught.value.problem)
    assert "*l4" in str(caught.value.problem)


def test_merge_bombs_are_counted_as_what_they_repeat() -> None:
    with pytest.raises(ExpansionTooLargeError, match="values"):
        stream_yaml(merges(30))


def test_repeated_text_counts_its_characters(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(budget, "MAX_ALIAS_CHARS", 1000)
    text = "t: &t " + "x" * 100 + "\nall: [" + ", ".join(["*t"] * 10) + "]\n"
    assert len(stream_yaml(text).data["all"]) == 10  # exactly 1,000 characters repeated
    with pytest.raises(ExpansionTooLargeError, match="1,000 characters of text"):
        stream_yaml(text.replace("]\n", ", *t]\n"))


def test_the_budget_is_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(budget, "MAX_ALIAS_VALUES", 33)

    def text(aliases: int) -> str:
        return "a: &a [x, y]\nb: [" + ", ".join(["*a"] * aliases) + "]\n"

    # `*a` repeats a list of two scalars: 3 values; eleven of them are 33
    assert stream_yaml(text(11)).data["b"] == [["x", "y"]] * 11
    with pytest.raises(ExpansionTooLargeError):
        stream_yaml(text(12))


def test_anchors_a_real_suite_uses_are_read_as_pyyaml_reads_them() -> None:
    # one evaluator list shared by 2,000 cases: 22,000 values repeated, well inside
    text = (
        "defaults: &checks\n  - {type: contains, value: a}\n  - {type: regex, value: '^b'}\n"
        "evalcases:\n"
        + "".join(
            f"  - {{id: c{i}, execution: {{evaluators: *checks}}, <<: *base{i % 2}}}\n"
            for i in range(2000)
        )
    )
    text = "b0: &base0 {outcome: x}\nb1: &base1 {outcome: y}\n" + text
    assert stream_yaml(text).data == yaml.safe_load(text)


def test_text_without_aliases_is_not_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(budget, "MAX_ALIAS_CHARS", 10)
    monkeypatch.setattr(budget, "MAX_ALIAS_VALUES", 10)
    text = "a: [" + ", ".join(["long text here"] * 100) + "]\n"
    assert len(stream_yaml(text).data["a"]) == 100


# --- every file agentv reads, through the command line --------------------------------------


def _project(root: Path) -> Path:
    (root / ".git").mkdir(parents=True, exist_ok=True)
    write_targets(root, mock_target())
    return root


@pytest.mark.slow
def test_an_alias_bomb_inside_an_is_json_schema(tmp_path: Path) -> None:
    project = _project(tmp_path)
    schema = laughs(10, indent="            ")
    text = (
        "$schema: agentv-eval-v2\nevalcases:\n"
        + CASE
        + "    execution:\n      evaluators:\n        - type: is_json\n          schema:\n"
        + schema
    )
    write(project, "evals/bomb.yaml", text)
    assert len(text) < 1000  # the 929 bytes
    for command in (["validate", "evals"], ["eval", "evals/bomb.yaml", "--dry-run"]):
        proc = agentv_cli(project, *command, memory_mb=CAP_MB, timeout=120)
        assert proc.returncode == 1, proc.stderr
        out = proc.stdout + proc.stderr
        assert "bomb.yaml:15:" in out  # l4, the fifth level
        assert "aliases repeat more than 1,000,000 values in this document" in out
        assert "Traceback" not in out and "MemoryError" not in out


@pytest.mark.slow
def test_a_merge_bomb_and_a_repeated_megabyte(tmp_path: Path) -> None:
    project = _project(tmp_path)
    write(
        project,
        "evals/merge.yaml",
        "$schema: agentv-eval-v2\n" + merges(30) + "evalcases:\n" + CASE,
    )
    big = "x" * 1_000_000
    write(
        project,
        "evals/text.yaml",
        f"$schema: agentv-eval-v2\nt: &t {big}\nevalcases:\n  - id: a\n    outcome: x\n"
        "    input_messages:\n" + "      - {role: user, content: *t}\n" * 5000,
    )
    proc = agentv_cli(project, "validate", "evals", memory_mb=CAP_MB, timeout=120)
    assert proc.returncode == 1
    assert "merge.yaml:13:" in proc.stdout  # m11: past a million values
    assert "text.yaml:74:" in proc.stdout  # the 68th alias of a megabyte: past 64 MiB
    assert "64 MiB of text repeated by aliases" in proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    ("rel", "head"),
    [
        (".agentv/targets.yaml", "$schema: agentv-targets-v2.2\ntargets: []\n"),
        (".agentv/config.yaml", "$schema: agentv-config-v2\n"),
        ("schemas/answer.yaml", ""),
    ],
    ids=["targets", "config", "schema-file"],
)
def test_targets_config_and_schema_files_have_the_same_budget(
    tmp_path: Path, rel: str, head: str
) -> None:
    project = _project(tmp_path)
    write(project, rel, head + laughs(10))
    write(
        project,
        "evals/e.yaml",
        "$schema: agentv-eval-v2\nevalcases:\n"
        + CASE
        + "    execution:\n      evaluators:\n"
        + "        - {type: is_json, schema: ../schemas/answer.yaml}\n",
    )
    if not rel.startswith("schemas"):
        write(project, "schemas/answer.yaml", "type: object\n")
    proc = agentv_cli(project, "validate", "evals", rel, memory_mb=CAP_MB, timeout=120)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "aliases repeat more than 1,000,000 values" in out
    assert "Traceback" not in out and "MemoryError" not in out
