"""Whole runs of cases from data (docs/eval-files.md, "Cases from data"): vars x rows
counted and keyed, a run killed and resumed running only what is missing, Hugging Face
datasets read offline from disk."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from support.cli import agentv_cli, start_agentv
from support.files import write
from support.results import rows
from support.targets import write_targets

#: every test here starts agentv (or a script) as a process: left out of `make test-fast`
pytestmark = pytest.mark.slow

ANSWER = """\
import sys
from pathlib import Path

prompt = sys.argv[1]
with open("asked.log", "a", encoding="utf-8") as log:
    log.write(prompt.replace("\\n", " ") + "\\n")
if Path("block").exists() and "Oslo" in prompt:
    import time
    time.sleep(120)  # the run is killed while this case waits
capital = prompt.split("capital of ")[-1].rstrip("?")
print(f"The capital is {capital.upper()}.")
"""

#: a command-line agent: answer.py (above) answers each prompt, one case at a time
AGENT = {"command_template": "python3 answer.py {PROMPT}", "workers": 1}

SUITE = """\
$schema: agentv-eval-v2
dataset: caps
vars:
  tone: [formal, casual]
rows:
  path: data/caps.csv
  id: "{{ city | lower }}"
template:
  outcome: Names {{ city }}.
  input_messages:
    - role: user
      content: ({{ tone }}) What is the capital of {{ city }}?
  evaluators:
    - type: contains
      value: "{{ city | upper }}"
"""

CITIES = ["Paris", "Rome", "Lima", "Oslo", "Quito", "Riga"]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / ".git").mkdir()
    write_targets(tmp_path, {"name": "default", "provider": "cli", **AGENT})
    write(tmp_path, "answer.py", ANSWER)
    write(tmp_path, "evals/caps.yaml", SUITE)
    write(tmp_path, "evals/data/caps.csv", "city\n" + "".join(f"{c}\n" for c in CITIES))
    return tmp_path


def all_ids() -> set[str]:
    return {f"{c.lower()}[tone={t}]" for c in CITIES for t in ("formal", "casual")}


def test_vars_times_rows_run_every_combination_once(project: Path) -> None:
    done = agentv_cli(project, "eval", "evals/caps.yaml", "--out", "r.jsonl", "--quiet")
    assert done.returncode == 0, done.stderr
    records = rows(project / "r.jsonl")
    assert len(records) == 12
    assert {r["eval_id"] for r in records} == all_ids()
    by_id = {r["eval_id"]: r for r in records}
    lima = by_id["lima[tone=casual]"]
    assert (lima["status"], lima["vars"], lima["row"]) == (
        "ok",
        {"tone": "casual"},
        {"source": str(project / "evals/data/caps.csv"), "number": 3, "line": 4},
    )


def test_the_summary_the_report_and_compare_group_runs_by_variable(project: Path) -> None:
    # casual answers fail: the city is asked for in lower case, never said
    casual = SUITE.replace(
        '"{{ city | upper }}"', "\"{{ city | upper if tone == 'formal' else city | lower }}\""
    )
    write(project, "evals/caps.yaml", casual)
    done = agentv_cli(
        project, "eval", "evals/caps.yaml", "--out", "a.jsonl", "--summary-json", "a.json"
    )
    assert "tone=formal" in done.stdout and "tone=casual" in done.stdout
    groups = json.loads((project / "a.json").read_text(encoding="utf-8"))["vars"]
    assert [(g["variable"], g["value"], g["runs"], g["ok"], g["mean"]) for g in groups] == [
        ("tone", "formal", 6, 6, 1.0),
        ("tone", "casual", 6, 0, 0.0),
    ]
    write(project, "evals/caps.yaml", SUITE)  # now every answer passes
    agentv_cli(project, "eval", "evals/caps.yaml", "--out", "b.jsonl", "--quiet")
    compared = agentv_cli(project, "compare", "a.jsonl", "b.jsonl", "--format", "json")
    by_var = json.loads(compared.stdout)["vars"]
    assert [
        (v["value"], v["base"]["mean"], v["new"]["mean"], v["mean_change"]) for v in by_var
    ] == [
        ("formal", 1.0, 1.0, 0.0),
        ("casual", 0.0, 1.0, 1.0),
    ]
    report = agentv_cli(project, "report", "a.jsonl", "-o", "a.html")
    assert report.returncode == 0, report.stderr
    page = (project / "a.html").read_text(encoding="utf-8")
    assert '"variable":"tone","value":"casual","runs":6' in page.replace(" ", "")


def _lines(path: Path) -> int:
    if not path.exists():
        return 0
    return sum(1 for line in path.read_text(encoding="utf-8").splitlines() if line.endswith("}"))


def test_a_killed_run_resumed_runs_only_what_is_missing(project: Path) -> None:
    (project / "block").write_text("", encoding="utf-8")
    out = project / "r.jsonl"
    run = start_agentv(
        project,
        "eval",
        "evals/caps.yaml",
        "--out",
        "r.jsonl",
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60  # a hang guard
        # the three cities before Oslo, in both tones, are done; then Oslo's case blocks
        while _lines(out) < 6 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _lines(out) >= 6
    finally:
        os.killpg(run.pid, signal.SIGKILL)
        run.wait(timeout=30)
    before = {r["eval_id"] for r in rows(out) if r.get("eval_id")} if out.exists() else set()
    assert before and before < all_ids()
    (project / "block").unlink()
    (project / "asked.log").unlink()
    done = agentv_cli(project, "eval", "evals/caps.yaml", "--resume", "r.jsonl", "--quiet")
    assert done.returncode == 0, done.stderr
    asked = (project / "asked.log").read_text(encoding="utf-8").splitlines()
    prompts = {
        f"{c.lower()}[tone={t}]": f"({t}) What is the capital of {c}?"
        for c in CITIES
        for t in ("formal", "casual")
    }
    assert sorted(asked) == sorted(prompts[cid] for cid in all_ids() - before)
    records = [r for r in rows(out) if r.get("eval_id")]
    assert sorted(r["eval_id"] for r in records) == sorted(all_ids())


HF_SUITE = """\
$schema: agentv-eval-v2
rows:
  hf: {hf}
  id: city
template:
  outcome: Names {{{{ city }}}}.
  input_messages:
    - role: user
      content: What is the capital of {{{{ city }}}}?
  evaluators:
    - type: contains
      value: "{{{{ city | upper }}}}"
"""


def test_hugging_face_datasets_are_read_offline_from_disk(project: Path, tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    data = datasets.Dataset.from_dict({"city": ["Paris", "Rome"]})
    data.save_to_disk(str(project / "evals" / "data" / "saved"))
    folder = project / "evals" / "data" / "files"
    folder.mkdir()
    data.to_parquet(str(folder / "train.parquet"))
    write(project, "evals/saved.yaml", HF_SUITE.format(hf="data/saved"))
    write(project, "evals/files.yaml", HF_SUITE.format(hf="data/files"))
    offline = {
        "HF_DATASETS_OFFLINE": "1",
        "HF_HUB_OFFLINE": "1",
        "HF_HOME": str(tmp_path / "hf-home"),  # the library's cache, kept in the test
    }
    for suite in ("saved", "files"):
        done = agentv_cli(
            project, "eval", f"evals/{suite}.yaml", "--out", f"{suite}.jsonl", env=offline
        )
        assert done.returncode == 0, done.stderr
        records = sorted(rows(project / f"{suite}.jsonl"), key=lambda r: r["row"]["number"])
        assert [(r["eval_id"], r["status"], r["row"]["number"]) for r in records] == [
            ("Paris", "ok", 1),
            ("Rome", "ok", 2),
        ]
        assert records[0]["row"]["source"] == f"hf:data/{suite}"
    validated = agentv_cli(project, "validate", "evals/saved.yaml", env=offline)
    assert validated.returncode == 0, validated.stdout
    assert "eval file, 2 cases" in validated.stdout
