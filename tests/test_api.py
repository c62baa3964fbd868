"""The public Python API: ``agentv.__all__`` pinned, ``run_eval`` equal to the CLI's results,
``arun_eval`` inside a running event loop. (The manual's example, docs/python-api.md, is
run as written by tests/test_docs.py.)"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import agentv
from agentv.results.record import EvalResult
from support.cli import agentv_cli
from support.files import write

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"

#: The promise: changing this list is a decision, made here on purpose.
PUBLIC_NAMES = [
    "AgentVError",
    "Calibration",
    "ClusterLostError",
    "Comparison",
    "ConfigError",
    "Diagnostic",
    "Estimate",
    "EvalResult",
    "EvalRun",
    "InputError",
    "NoCasesError",
    "PreparedRun",
    "Preview",
    "ProviderError",
    "PythonTarget",
    "Regrade",
    "Report",
    "ResultsFile",
    "RunOptions",
    "SetupError",
    "StoredRun",
    "Summary",
    "Validation",
    "__version__",
    "aregrade",
    "arun_eval",
    "calibrate",
    "compare",
    "estimate",
    "load_eval_file",
    "prepare_run",
    "preview",
    "read_results",
    "regrade",
    "render",
    "report",
    "run_eval",
    "runs",
    "validate",
    "write_junit",
]

VERDICT = '{"score": 0.75, "hits": ["on topic"], "misses": ["terse"], "reasoning": "fine"}'
MOCK_TARGETS = f"""
  - name: mock
    provider: mock
    response: "Take an umbrella: 85 % chance of rain. Use user.get('email'). An empty list."
    judge_target: mock_judge
  - name: mock_judge
    provider: mock
    response: '{VERDICT}'
"""


def test_all_is_pinned_and_every_name_resolves() -> None:
    import agentv.api

    assert agentv.__all__ == PUBLIC_NAMES
    # one table: every name is the front door's, which imports it from where it is defined
    assert set(PUBLIC_NAMES) - {"__version__"} <= set(agentv.api.__all__)
    for name in agentv.__all__:
        assert getattr(agentv, name) is not None
        if name != "__version__":
            assert getattr(agentv, name) is getattr(agentv.api, name)
    assert dir(agentv) == PUBLIC_NAMES
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = agentv.nope  # type: ignore[attr-defined]


@pytest.mark.slow
def test_import_stays_light() -> None:
    # `agentv --version` must not pay for pydantic or the SDKs: the names load on first use.
    code = "import sys, agentv; print(any(m in sys.modules for m in ('pydantic', 'openai')))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "False"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A copy of the examples as their own repository, with two mock targets added."""
    root = tmp_path / "project"
    shutil.copytree(EXAMPLES, root / "examples")
    (root / ".git").mkdir()
    targets = root / "examples" / ".agentv" / "targets.yaml"
    targets.write_text(targets.read_text(encoding="utf-8") + MOCK_TARGETS, encoding="utf-8")
    return root


def _comparable(record: dict[str, Any]) -> dict[str, Any]:
    """A record without the values that differ from run to run (times)."""
    out = {
        k: v
        for k, v in record.items()
        if k not in ("timestamp", "duration_ms", "latency_ms", "queued_ms")
    }
    for entry in out.get("evaluator_results", []):
        entry.pop("latency_ms", None)
        raw = entry.get("evaluator_raw_request") or {}
        raw.pop("duration_ms", None)
    for turn in out.get("turns") or []:  # a live conversation's turns: their times
        turn.pop("latency_ms", None)
        for request in turn.get("requests", []):
            request.pop("latency_ms", None)
        for entry in turn.get("evaluator_results", []):
            entry.pop("latency_ms", None)
    return out


@pytest.mark.slow
def test_run_eval_results_equal_the_cli_results_file(project: Path) -> None:
    run = agentv.run_eval("examples/", target="mock", cwd=project)
    cli_out = project / "cli.jsonl"
    proc = agentv_cli(project, "eval", "examples/", "--target", "mock", "--out", str(cli_out))
    assert proc.returncode == 7, proc.stderr
    lines = [json.loads(line) for line in cli_out.read_text(encoding="utf-8").splitlines()]

    assert run.out is None  # out=None: no results file
    assert not (project / ".agentv" / "results").exists()
    assert all(isinstance(r, EvalResult) for r in run.results)
    api = {r.eval_id: _comparable(r.model_dump(mode="json")) for r in run.results}
    cli = {line["eval_id"]: _comparable(line) for line in lines}
    assert len(api) == len(run.results) == 5
    assert api == cli
    # the model reads a results line back unchanged
    for line in lines:
        assert EvalResult.model_validate(line).model_dump(mode="json") == line

    summary = run.summary
    assert (summary.total, summary.errors) == (5, 0)
    assert summary.mean == pytest.approx(sum(r.score for r in run.results) / 5)
    judged = next(r for r in run.results if r.eval_id == "debug-missing-email")
    assert judged.target == "mock"
    assert any(e.get("score") == 0.75 for e in judged.evaluator_results or [])


def test_run_eval_writes_the_results_file_when_asked(project: Path) -> None:
    run = agentv.run_eval(["examples/tool-use.yaml"], target="mock", out="out/r.jsonl", cwd=project)
    assert run.out == project / "out" / "r.jsonl"
    (line,) = run.out.read_text(encoding="utf-8").splitlines()
    assert json.loads(line) == run.results[0].model_dump(mode="json")


@pytest.mark.slow
async def test_arun_eval_inside_a_running_event_loop(project: Path) -> None:
    run = await agentv.arun_eval("examples/brainstorm.yaml", target="mock", cwd=project)
    assert [r.eval_id for r in run.results] == ["brainstorm-cli-names"]
    with pytest.raises(RuntimeError, match=r"use `await arun_eval\(\.\.\.\)`"):
        agentv.run_eval("examples/brainstorm.yaml", target="mock", cwd=project)


def test_a_case_that_cannot_load_has_an_invalid_result(project: Path) -> None:
    bad = write(
        project,
        "examples/bad.yaml",
        "$schema: agentv-eval-v2\nevalcases:\n  - id: x\n    outcom: typo\n"
        "    input_messages: [{role: user, content: hi}]\n",
    )
    run = agentv.run_eval(bad, target="mock", cwd=project)
    (result,) = run.results
    assert (result.eval_id, result.status, result.passed, result.score) == (
        "x",
        "invalid",
        False,
        0,
    )
    assert "unknown key 'outcom'" in (result.error or "")
    assert result.line == 3 and result.eval_file == str(bad)
    assert run.summary.invalid == 1 and not run.clean


def test_no_cases_is_an_error_with_the_reasons(project: Path) -> None:
    with pytest.raises(agentv.NoCasesError) as caught:
        agentv.run_eval("examples/", target="mock", eval_id="nope", cwd=project)
    assert str(caught.value).startswith("no case with id 'nope' in ")


def test_load_eval_file_returns_cases_and_diagnostics(project: Path) -> None:
    loaded = agentv.load_eval_file(project / "examples" / "code-review.yaml")
    assert [c.id for c in loaded.cases] == ["review-inventory"]
    assert loaded.errors == []


@pytest.mark.slow
def test_render_returns_what_the_cli_prints(project: Path) -> None:
    views = agentv.render("examples/tool-use.yaml", target="mock", cwd=project)
    proc = agentv_cli(
        project, "render", "examples/tool-use.yaml", "--target", "mock", "--format=json"
    )
    assert proc.returncode == 0, proc.stderr
    assert views == json.loads(proc.stdout)
    (view,) = views
    assert view["target"] == "mock" and view["sent_messages"][0]["role"] == "system"
    agent_view = agentv.render("examples/tool-use.yaml", mode="agent", cwd=project)[0]
    assert agent_view["mode"] == "agent" and "target" not in agent_view


def test_render_of_an_unusable_file_raises_with_its_problems(project: Path) -> None:
    write(project, "examples/broken.yaml", "$schema: agentv-eval-v2\nevalcases: [\n")
    with pytest.raises(agentv.InputError) as caught:
        agentv.render("examples/broken.yaml", cwd=project)
    assert any("invalid YAML" in d.message for d in caught.value.diagnostics)


def test_an_unknown_run_option_is_named_with_the_one_meant(project: Path) -> None:
    with pytest.raises(
        agentv.ConfigError, match=r"^unknown run option 'worker'; did you mean 'workers'\?$"
    ):
        agentv.run_eval("examples/", target="mock", worker=2, cwd=project)  # type: ignore[call-arg]
    with pytest.raises(agentv.ConfigError, match=r"^repeat must be at least 1 \(got 0\)$"):
        agentv.prepare_run("examples/", target="mock", repeat=0, cwd=project)
    assert set(agentv.RunOptions.__annotations__) >= {"target", "workers", "out", "resume"}


def test_errors_tell_the_file_the_settings_and_the_machine_apart() -> None:
    assert issubclass(agentv.NoCasesError, agentv.InputError)
    assert issubclass(agentv.SetupError, agentv.ConfigError)
    assert not issubclass(agentv.ConfigError, agentv.InputError)
    assert not issubclass(agentv.InputError, agentv.ConfigError)
    from agentv.errors import ResultsFileError

    assert issubclass(ResultsFileError, agentv.SetupError)


def test_a_missing_variable_is_a_setup_error(project: Path) -> None:
    write(
        project,
        "examples/.agentv/targets.yaml",
        "$schema: agentv-targets-v2.2\ntargets:\n  - name: needs-key\n    provider: openai\n"
        "    model: m\n    api_key: ${{ AGENTV_TEST_UNSET_KEY }}\n",
    )
    with pytest.raises(agentv.SetupError, match="AGENTV_TEST_UNSET_KEY, which is not set"):
        agentv.prepare_run("examples/tool-use.yaml", target="needs-key", cwd=project)


@pytest.mark.slow
def test_read_compare_report_and_junit_of_real_runs(project: Path) -> None:
    base = agentv.run_eval("examples/", target="mock", out="base.jsonl", cwd=project)
    new = agentv.run_eval(
        "examples/", target="mock", out="new.yaml", output_format="yaml", cwd=project
    )
    assert base.out is not None and new.out is not None
    # read back: the same records the runs returned, whichever the format
    for run in (base, new):
        read = agentv.read_results(run.out)  # type: ignore[arg-type]
        assert read.diagnostics == []
        assert {r.eval_id: r.score for r in read.results} == {
            r.eval_id: r.score for r in run.results
        }
    assert agentv.read_results(new.out).format == "yaml"  # type: ignore[arg-type]
    # a line that is not a result is reported with its number, never raised
    with base.out.open("a", encoding="utf-8") as fh:
        fh.write("not json\n")
    read = agentv.read_results(base.out)
    assert len(read.results) == 5
    assert [(d.line, d.severity) for d in read.diagnostics] == [(6, "warning")]
    assert read.diagnostics[0].message == "not a result: not JSON"
    # compare: the same mock answers, so nothing changed
    comparison = agentv.compare(project / "new.yaml", project / "new.yaml")
    assert isinstance(comparison, agentv.Comparison)
    assert comparison.counts["unchanged"] == 5 and comparison.regressed == ()
    assert comparison.to_dict()["counts"] == comparison.counts
    with pytest.raises(agentv.InputError, match=r"base\.jsonl:6: not a result \(not JSON\)"):
        agentv.compare(base.out, new.out)
    # the report and JUnit of the YAML run
    written = agentv.report(new.out, out=project / "r.html")
    assert isinstance(written, agentv.Report)
    assert (written.path, written.records) == (project / "r.html", 5)
    assert "agentv-index-0" in written.path.read_text(encoding="utf-8")
    junit = agentv.write_junit(new.out, project / "ci" / "junit.xml")
    assert junit.read_text(encoding="utf-8").count("<testcase ") == 5


def test_validate_and_preview_return_their_problems(project: Path) -> None:
    checked = agentv.validate("examples/", cwd=project)
    assert isinstance(checked, agentv.Validation)
    assert checked.valid and checked.errors == []
    assert {r.kind for r in checked.files} >= {"eval", "targets"}
    write(project, "examples/broken.yaml", "$schema: agentv-eval-v2\nevalcases: [\n")
    checked = agentv.validate("examples/", cwd=project)
    assert not checked.valid
    assert [Path(str(d.file)).name for d in checked.errors] == ["broken.yaml"]
    shown = agentv.preview("examples/broken.yaml", cwd=project)
    assert isinstance(shown, agentv.Preview)
    assert shown.failed and shown.cases == []
    assert any("invalid YAML" in d.message for d in shown.diagnostics)


def _documented(obj: Any) -> dict[str, Any]:
    """The sections of ``obj``'s docstring as the Python API page parses them."""
    found: dict[str, Any] = {}
    if obj.docstring is None:
        return found
    options = {"returns_multiple_items": False, "returns_named_value": False}
    for section in obj.docstring.parse("google", **options):
        found[section.kind.value] = section.value
    return found


def _check_function(where: str, function: Any) -> list[str]:
    problems = []
    sections = _documented(function)
    params = [p.name for p in function.parameters if p.name not in ("self", "cls")]
    named = [p.name.lstrip("*") for p in sections.get("parameters", [])]
    if named != params:
        problems.append(f"{where}: Args {named} != parameters {params}")
    returns = function.returns
    if returns is not None and str(returns) != "None" and "property" not in function.labels:
        given = sections.get("returns")
        if not given:
            problems.append(f"{where}: no Returns")
        elif given[0].annotation is not None and str(given[0].annotation) != str(returns):
            # a colon in the description's first line makes its start a type
            problems.append(f"{where}: Returns starts with {given[0].annotation!r}")
    return problems


@pytest.mark.slow  # griffe asks git where the package is kept
def test_every_public_function_and_method_documents_its_arguments_and_result() -> None:
    # docs/python-api.md renders these docstrings (Google style, mkdocs.yml)
    import griffe

    package = griffe.load("agentv", search_paths=[str(ROOT / "src")], resolve_aliases=True)
    problems: list[str] = []
    for name in PUBLIC_NAMES:
        if name == "__version__":
            continue
        obj = package[name]
        obj = obj.final_target if obj.is_alias else obj
        assert obj.docstring is not None, name
        if obj.is_function:
            problems += _check_function(name, obj)
        elif obj.is_class:
            listed = {a.name for a in _documented(obj).get("attributes", [])}
            for member_name, member in obj.members.items():
                if member_name.startswith("_") or member_name == "model_config":
                    continue
                if member.is_function and member.docstring is not None:
                    problems += _check_function(f"{name}.{member_name}", member)
                elif member.docstring is None and member_name not in listed:
                    problems.append(f"{name}.{member_name}: not documented")
    assert problems == []
