"""`agentv init`: an example eval that runs offline, .gitignore lines added once, nothing
overwritten."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentv.cli.init import GITIGNORE_LINES, update_gitignore
from support.cli import agentv_cli, invoke_cli
from support.files import write
from support.results import rows as results_rows


def init(folder: Path) -> str:
    """``agentv init FOLDER``'s output (it must succeed)."""
    result = invoke_cli("init", str(folder))
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.mark.slow
def test_example_eval_runs_offline_and_scores_every_case(repo: Path) -> None:
    out = init(repo)
    for rel in (".agentv/config.yaml", ".agentv/targets.yaml", ".env.example"):
        assert f"Created {rel}" in out
    assert "Created evals/example.yaml" in out
    assert "Created .gitignore" in out
    # a fresh machine: no key
    no_keys = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY")
    proc = agentv_cli(repo, "eval", "evals/", "--out", "r.jsonl", unset=no_keys)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    records = [json.loads(line) for line in (repo / "r.jsonl").read_text().splitlines()]
    assert len(records) >= 2
    for record in records:
        assert record.get("error") is None, record
        assert record["score"] == 1.0, record
        assert record["target"] == "mock"
        for entry in record["evaluator_results"]:
            assert entry.get("error") is None and entry["score"] == 1.0, entry
    types = {e["type"] for r in records for e in r["evaluator_results"]}
    assert {"contains", "llm_judge"} <= types  # the judge is the offline mock_judge

    validate = agentv_cli(repo, "validate", "evals/", ".agentv/", unset=no_keys)
    assert validate.returncode == 0, validate.stdout + validate.stderr
    assert "warning" not in validate.stdout + validate.stderr


def test_init_twice_changes_nothing(repo: Path) -> None:
    init(repo)
    before = {p: p.read_bytes() for p in repo.rglob("*") if p.is_file()}
    out = init(repo)
    assert "Nothing to do" in out
    assert "Kept existing evals/example.yaml (not overwritten)" in out
    assert {p: p.read_bytes() for p in repo.rglob("*") if p.is_file()} == before
    assert (
        repo / ".gitignore"
    ).read_text() == ".agentv/results/\n.agentv/cache/\n.agentv/runs.sqlite*\n"


def test_existing_gitignore_gets_the_missing_lines_once(repo: Path) -> None:
    write(repo, ".gitignore", "node_modules/\n*.pyc")  # no trailing newline
    out = init(repo)
    assert "Added .agentv/results/, .agentv/cache/, .agentv/runs.sqlite* to .gitignore" in out
    expected = "node_modules/\n*.pyc\n.agentv/results/\n.agentv/cache/\n.agentv/runs.sqlite*\n"
    assert (repo / ".gitignore").read_text() == expected
    init(repo)
    assert (repo / ".gitignore").read_text() == expected


def test_only_missing_lines_are_added(tmp_path: Path) -> None:
    # the same folder written another way counts as present
    write(tmp_path, ".gitignore", "/.agentv/cache\r\n")
    assert update_gitignore(tmp_path) == [".agentv/results/", ".agentv/runs.sqlite*"]
    assert (tmp_path / ".gitignore").read_bytes() == (
        b"/.agentv/cache\r\n.agentv/results/\r\n.agentv/runs.sqlite*\r\n"
    )
    assert update_gitignore(tmp_path) == []
    write(tmp_path, "other/.gitignore", "")
    assert update_gitignore(tmp_path / "other") == list(GITIGNORE_LINES)
    assert (tmp_path / "other/.gitignore").read_text() == (
        ".agentv/results/\n.agentv/cache/\n.agentv/runs.sqlite*\n"
    )


def test_existing_files_are_kept(repo: Path) -> None:
    write(repo, "evals/example.yaml", "# mine\n")
    write(repo, ".agentv/targets.yaml", "# mine too\n")
    out = init(repo)
    assert "Kept existing evals/example.yaml (not overwritten)" in out
    assert "Kept existing .agentv/targets.yaml (not overwritten)" in out
    assert (repo / "evals/example.yaml").read_text() == "# mine\n"
    assert (repo / ".agentv/targets.yaml").read_text() == "# mine too\n"


@pytest.mark.slow
def test_the_csv_starter_suite_runs_offline_a_case_per_row(repo: Path) -> None:
    result = invoke_cli("init", str(repo), "--csv")
    assert result.exit_code == 0, result.output
    assert "Created evals/questions.yaml" in result.stdout
    assert "Created evals/data/questions.csv" in result.stdout
    proc = agentv_cli(repo, "eval", "evals/questions.yaml", "--out", "q.jsonl", timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    records = results_rows(repo / "q.jsonl")
    records.sort(key=lambda r: r["row"]["number"])  # written as they end
    rows = (repo / "evals/data/questions.csv").read_text(encoding="utf-8").splitlines()[1:]
    assert [r["eval_id"] for r in records] == [row.split(",")[0] for row in rows]
    assert [r["row"]["line"] for r in records] == [2, 3, 4]
    assert all(r["status"] == "ok" for r in records)
