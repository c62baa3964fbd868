"""A case is named by its dataset and id everywhere (results, ``--resume``, ``compare``,
``--eval-id``, ``regrade``): the same (dataset, id) in two eval files of one run is
refused with a located error, as the same id twice in one file is, instead of being
counted as repeats of one case (docs/eval-files.md, the `dataset` key). Through the real
command line on real files."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.cli import agentv_cli
from support.files import write
from support.results import rows
from support.targets import mock_target, write_targets

#: every test here starts agentv (or a script) as a process: left out of `make test-fast`
pytestmark = pytest.mark.slow


def _suite(dataset: str, value: str) -> str:
    return (
        f"$schema: agentv-eval-v2\n{dataset}evalcases:\n"
        "  - id: one\n    outcome: x\n    input_messages: [{role: user, content: hi}]\n"
        f"    evaluators: [{{type: contains, value: {value}}}]\n"
        "  - id: greet\n    outcome: x\n    input_messages: [{role: user, content: hi}]\n"
        f"    evaluators: [{{type: contains, value: {value}}}]\n"
    )


def _project(repo: Path, second_dataset: str = "") -> None:
    write_targets(repo, mock_target(response="Paris"))
    write(repo, "evals/a/basic.yaml", _suite("", "Paris"))
    write(repo, "evals/b/basic.yaml", _suite(second_dataset, "Rome"))


def test_the_same_case_in_two_files_is_refused_before_anything_runs(repo: Path) -> None:
    _project(repo)
    ran = agentv_cli(repo, "eval", "evals", "--out", "r.jsonl", "--repeat", "2")
    assert ran.returncode == 1, ran.stdout
    assert not (repo / "r.jsonl").exists() or (repo / "r.jsonl").read_text() == ""
    for line, case, first in ((3, "one", 3), (7, "greet", 7)):
        assert (
            f"evals/b/basic.yaml:{line}: error: case {case!r} of dataset 'basic' is also in "
            f"evals/a/basic.yaml (line {first})"
        ) in ran.stderr
    assert "give one of the files its own `dataset:`" in ran.stderr

    checked = agentv_cli(repo, "validate", "evals")
    assert checked.returncode == 1
    assert (
        "evals/b/basic.yaml:7: case 'greet' of dataset 'basic' is also in "
        "evals/a/basic.yaml (line 7)"
    ) in checked.stdout + checked.stderr


def test_each_file_its_own_dataset_runs_every_case(repo: Path) -> None:
    _project(repo, second_dataset="dataset: rome\n")
    ran = agentv_cli(repo, "eval", "evals", "--out", "r.jsonl", "--repeat", "2")
    assert ran.returncode == 7, ran.stdout + ran.stderr  # rome's greet fails
    runs = sorted(
        (r["dataset"], r["eval_id"], r["repeat"], r["status"]) for r in rows(repo / "r.jsonl")
    )
    assert runs == [
        ("basic", "greet", 0, "ok"),
        ("basic", "greet", 1, "ok"),
        ("basic", "one", 0, "ok"),
        ("basic", "one", 1, "ok"),
        ("rome", "greet", 0, "failed"),
        ("rome", "greet", 1, "failed"),
        ("rome", "one", 0, "failed"),
        ("rome", "one", 1, "failed"),
    ]
