"""Check before spending: everything about a run's targets and judges that can be known is
known before the first request. A targets file with an error (a misspelled or invalid
setting, a judge_target naming no target) is refused as a whole, by `validate` and by a
run alike; an unknown provider kind stops only what uses that target."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentv.errors import ConfigError, InputError
from agentv.providers.mock import MockProvider
from agentv.targets import DryRun, TargetPool, load_targets_file, validate_targets_file
from agentv.targets import pool as registry_module
from support.files import write

HEADER = "$schema: agentv-targets-v2.2\ntargets:\n"

TARGETS = (
    HEADER
    + """\
  - name: good
    provider: mock
    response: hello
  - name: typo
    provider: opneai
    model: gpt-4o
  - name: bad-setting
    provider: openai
    model: gpt-4o
    temperature: sk-not-a-number
  - name: lost-judge
    provider: mock
    judge_target: jduge
  - name: judged
    provider: mock
    judge_target: keyless-judge
  - name: keyless-judge
    provider: openai
    model: gpt-4o
    api_key: ${{ AGENTV_TEST_JUDGE_KEY }}
  - name: judged-by-typo
    provider: mock
    judgeTarget: typo
  - provider: mock
"""
)


#: the same file without its errors: only the unknown provider, a warning until used
USABLE = TARGETS.replace(
    """  - name: bad-setting
    provider: openai
    model: gpt-4o
    temperature: sk-not-a-number
  - name: lost-judge
    provider: mock
    judge_target: jduge
""",
    "",
).replace("  - provider: mock\n", "")


@pytest.fixture
def targets_path(repo: Path) -> Path:
    return write(repo, ".agentv/targets.yaml", USABLE).resolve()


def _registry(repo: Path, **options: object) -> tuple[TargetPool, Path]:
    return TargetPool(cwd=repo, **options), write(repo, "evals/suite.yaml", "")  # type: ignore[arg-type]


def test_validate_warns_of_an_unknown_provider_and_reports_other_entry_errors(
    repo: Path,
) -> None:
    path = write(repo, "all.yaml", TARGETS)
    diags = {(d.line, d.severity): d.message for d in validate_targets_file(path)}
    assert diags == {
        (7, "warning"): (
            "target 'typo': 'opneai' is not a known provider; "
            "a run that uses target 'typo' will fail"
        ),
        (12, "error"): (
            "target 'bad-setting': invalid `temperature`: Input should be a valid number, "
            "unable to parse string as a number"
        ),
        (15, "error"): "target 'lost-judge': judge_target 'jduge' is not a target in this file",
        (26, "error"): "target has no `name`",
    }
    assert not any("sk-not-a-number" in message for message in diags.values())


def test_a_run_refuses_a_file_with_errors_with_what_validate_says(repo: Path) -> None:
    path = write(repo, "all.yaml", TARGETS)
    with pytest.raises(InputError) as info:
        load_targets_file(path)
    assert info.value.diagnostics == validate_targets_file(path)  # each problem, located
    registry, eval_file = _registry(repo, targets_path=path)
    with pytest.raises(InputError):  # even for a target that is fine itself
        registry.target(eval_file, repo, "good")


def test_a_run_loads_a_file_whose_only_problem_is_an_unknown_provider(
    targets_path: Path,
) -> None:
    tfile = load_targets_file(targets_path)
    usable = {name: t.usable for name, t in tfile.targets.items()}
    assert usable == {
        "good": True,
        "typo": False,
        "judged": True,
        "keyless-judge": True,  # its variable is only read when it is built
        "judged-by-typo": True,
    }
    typo = tfile.targets["typo"]
    assert (typo.kind, typo.provider) == ("", "opneai")
    assert [d.line for d in typo.problems] == [7]
    # what a run says about the file: a warning, at its line
    assert [(d.severity, d.line) for d in tfile.diagnostics] == [("warning", 7)]


def test_an_unused_broken_target_does_not_stop_another(repo: Path, targets_path: Path) -> None:
    registry, eval_file = _registry(repo)
    good = registry.target(eval_file, repo, "good")
    assert isinstance(good.provider, MockProvider)
    registry.check_judge(good)  # no judge_target: judges itself
    assert registry.judge(good) is good.provider
    warning = next(d for d in registry.diagnostics if d.line == 7)
    assert warning.severity == "warning"
    assert "'typo'" in warning.message and "'opneai'" in warning.message


def test_a_used_target_with_an_unknown_provider_names_target_file_and_line(
    repo: Path, targets_path: Path
) -> None:
    registry, eval_file = _registry(repo)
    with pytest.raises(ConfigError) as info:
        registry.target(eval_file, repo, "typo")
    assert str(info.value) == (
        f"target 'typo' in {targets_path} cannot be used: "
        "line 7: 'opneai' is not a known provider (did you mean 'openai'?)"
    )


def test_a_judge_that_cannot_be_used(repo: Path, targets_path: Path) -> None:
    registry, eval_file = _registry(repo)
    target = registry.target(eval_file, repo, "judged-by-typo")
    with pytest.raises(ConfigError) as info:
        registry.check_judge(target)
    assert str(info.value) == (
        f"target 'judged-by-typo' in {targets_path} cannot be judged: its judge_target: "
        f"target 'typo' in {targets_path} cannot be used: "
        "line 7: 'opneai' is not a known provider (did you mean 'openai'?)"
    )


def test_check_judge_reports_an_unset_key_before_anything_is_sent(
    repo: Path, targets_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENTV_TEST_JUDGE_KEY", raising=False)
    built: list[str] = []
    real = registry_module.create_provider

    def counting(definition, *args, **kwargs):  # type: ignore[no-untyped-def]
        built.append(definition.name)
        return real(definition, *args, **kwargs)

    monkeypatch.setattr(registry_module, "create_provider", counting)
    registry, eval_file = _registry(repo)
    target = registry.target(eval_file, repo, "judged")
    with pytest.raises(ConfigError) as info:
        registry.check_judge(target)
    message = str(info.value)
    assert message.startswith(
        f"target 'judged' in {targets_path} cannot be judged: its judge_target: "
        f"target 'keyless-judge' in {targets_path} cannot be used: field 'api_key' uses "
        "environment variable AGENTV_TEST_JUDGE_KEY, which is not set"
    )
    assert target.judge is None  # nothing was built, so nothing could be sent
    assert [t.name for t in registry.all_targets()] == ["judged"]
    # asked again for every case on the target: the failure is kept, not rebuilt
    for _ in range(3):
        with pytest.raises(ConfigError, match="AGENTV_TEST_JUDGE_KEY"):
            registry.check_judge(target)
    assert built == ["judged", "keyless-judge"]

    # once the key is set, a new run builds the judge (once)
    monkeypatch.setenv("AGENTV_TEST_JUDGE_KEY", "sk-test")
    registry, eval_file = _registry(repo)
    target = registry.target(eval_file, repo, "judged")
    registry.check_judge(target)
    registry.check_judge(target)
    assert registry.judge(target).name == "keyless-judge"
    assert built.count("keyless-judge") == 2


def test_a_dry_run_judges_with_its_mock(repo: Path, targets_path: Path) -> None:
    registry, eval_file = _registry(repo, dry_run=DryRun())
    target = registry.target(eval_file, repo, "judged")
    registry.check_judge(target)
    judge = registry.judge(target)
    assert judge.kind == "mock" and judge is not target.provider
    assert '"score": 1.0' in judge.settings.response  # a valid verdict, not the answer mock
    assert target.name == "judged-dry-run"
    with pytest.raises(ConfigError, match="cannot be used"):  # the file still says so
        registry.target(eval_file, repo, "typo")


def test_a_preview_refuses_a_broken_target_and_shows_the_others(
    repo: Path, targets_path: Path
) -> None:
    registry, eval_file = _registry(repo, preview=True)
    assert registry.target(eval_file, repo, "good").name == "good"
    with pytest.raises(ConfigError, match=r"line 7: 'opneai' is not a known provider"):
        registry.target(eval_file, repo, "typo")


def test_an_entry_error_in_a_file_with_a_name_used_twice_stops_the_file(repo: Path) -> None:
    from agentv.errors import InputError

    path = write(repo, "t.yaml", HEADER + "  - {name: a, provider: mock}\n" * 2)
    with pytest.raises(InputError, match="duplicate target name 'a'"):
        load_targets_file(path)
