"""Loading eval files: file resolution, repository root, guideline config, CRLF, caching."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentv.errors import InputError
from agentv.evalfile.files import FileStore, find_repo_root, search_roots
from agentv.evalfile.guidelines import DEFAULT_GUIDELINE_PATTERNS, is_guideline
from agentv.evalfile.loader import LoadContext, iter_cases, load_eval_file
from agentv.messages import FileSegment, GuidelineRef, TextSegment
from agentv.prompts.builder import build_prompt
from support.files import write

HEADER = "$schema: agentv-eval-v2\nevalcases:\n"


def one_file_case(value: str, case_id: str = "c") -> str:
    return f"""  - id: {case_id}
    outcome: ok
    input_messages:
      - role: user
        content:
          - type: file
            value: {value}
"""


def load_one(path: Path, **kwargs: object):
    loaded = load_eval_file(path, **kwargs)  # type: ignore[arg-type]
    assert not loaded.errors, [d.format() for d in loaded.errors]
    (case,) = loaded.cases
    return case


# --- resolution order -------------------------------------------------------------------------


def test_resolution_order_eval_folder_then_parents_then_root_then_cwd(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    eval_path = write(repo, "suite/deep/e.yaml", HEADER + one_file_case("data.txt"))
    candidates = {
        "suite/deep/data.txt": "from the eval folder",
        "suite/data.txt": "from the parent",
        "data.txt": "from the repository root",
    }
    for rel, text in candidates.items():
        write(repo, rel, text)
    work = repo / "work"
    write(repo, "work/data.txt", "from the working directory")
    monkeypatch.chdir(work)
    for rel, text in candidates.items():
        seg = load_one(eval_path).input_messages[0].segments[0]
        assert isinstance(seg, FileSegment)
        assert seg.text == text
        assert seg.resolved == (repo / rel).resolve()
        (repo / rel).unlink()  # next time the next candidate wins
    seg = load_one(eval_path).input_messages[0].segments[0]
    assert isinstance(seg, FileSegment) and seg.text == "from the working directory"


def test_search_roots_order_and_stop_at_repository_root(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    roots = search_roots(root / "a" / "b", root, tmp_path / "elsewhere")
    assert roots == [root / "a" / "b", root / "a", root, tmp_path / "elsewhere"]


def test_leading_slash_means_relative_to_search_roots(repo: Path) -> None:
    write(repo, "shared/notes.md", "root-relative")
    eval_path = write(repo, "suite/e.yaml", HEADER + one_file_case("/shared/notes.md"))
    seg = load_one(eval_path).input_messages[0].segments[0]
    assert isinstance(seg, FileSegment)
    assert seg.text == "root-relative"
    assert seg.path == "/shared/notes.md"  # shown as written


def test_missing_file_lists_every_place_looked_in(repo: Path) -> None:
    eval_path = write(repo, "suite/e.yaml", HEADER + one_file_case("nope.txt"))
    loaded = load_eval_file(eval_path)
    assert loaded.cases == []
    (diag,) = loaded.errors
    assert diag.message == "case 'c': referenced file not found: nope.txt"
    assert (diag.line, diag.column) == (9, 20)
    assert diag.hint is not None
    for folder in (repo / "suite", repo):
        assert str(folder / "nope.txt") in diag.hint


# --- repository root ------------------------------------------------------------------------


def test_repository_root_is_nearest_folder_with_git(tmp_path: Path) -> None:
    outer = tmp_path / "outer"
    (outer / ".git").mkdir(parents=True)
    inner = outer / "vendor" / "inner"
    inner.mkdir(parents=True)
    (inner / ".git").write_text("gitdir: ../../.git/modules/inner\n")  # a submodule: .git file
    (inner / "x").mkdir()
    assert find_repo_root(inner / "x", cwd=tmp_path) == inner.resolve()
    assert find_repo_root(outer / "vendor", cwd=tmp_path) == outer.resolve()


def test_repository_root_without_git_is_the_working_directory(tmp_path: Path) -> None:
    work = tmp_path / "work"
    (work / "evals").mkdir(parents=True)
    assert find_repo_root(work / "evals", cwd=work) == work.resolve()
    # outside the working directory: the eval file's own folder, never a wider one
    other = tmp_path / "other"
    other.mkdir()
    assert find_repo_root(other, cwd=work) == other.resolve()


# --- guideline config discovery and patterns ---------------------------------------------------


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("python.instructions.md", True),  # `**` spans zero folders
        ("docs/team/python.instructions.md", True),
        ("instructions/style.md", True),
        ("a/instructions/b/c.md", True),
        ("review.prompt.md", True),
        ("prompts/review.md", True),
        ("src/app.py", False),
        ("instructions.md", False),
        (".github/x.instructions.md", False),  # wildcards skip dot-folders (micromatch)
        ("../outside.instructions.md", False),
    ],
)
def test_default_patterns(path: str, expected: bool) -> None:
    assert is_guideline(path, DEFAULT_GUIDELINE_PATTERNS) is expected


def test_defaults_apply_without_config(repo: Path) -> None:
    write(repo, "suite/style.instructions.md", "Be brief.")
    eval_path = write(repo, "suite/e.yaml", HEADER + one_file_case("style.instructions.md"))
    case = load_one(eval_path)
    assert isinstance(case.input_messages[0].segments[0], GuidelineRef)


def test_nearest_config_wins(repo: Path) -> None:
    write(
        repo, ".agentv/config.yaml", '$schema: agentv-config-v2\nguideline_patterns: ["**/*.md"]\n'
    )
    write(
        repo,
        "suite/.agentv/config.yaml",
        '$schema: agentv-config-v2\nguideline_patterns: ["**/*.rules.txt"]\n',
    )
    write(repo, "suite/a.rules.txt", "rule")
    write(repo, "suite/b.md", "markdown")
    eval_path = write(
        repo,
        "suite/e.yaml",
        HEADER + one_file_case("a.rules.txt", "a") + one_file_case("b.md", "b"),
    )
    a, b = load_eval_file(eval_path).cases
    assert isinstance(a.input_messages[0].segments[0], GuidelineRef)
    assert isinstance(b.input_messages[0].segments[0], FileSegment)
    # without the nearer config, the root one applies
    (repo / "suite/.agentv/config.yaml").unlink()
    a, b = load_eval_file(eval_path).cases
    assert isinstance(a.input_messages[0].segments[0], FileSegment)
    assert isinstance(b.input_messages[0].segments[0], GuidelineRef)


def test_invalid_config_is_reported_and_skipped(repo: Path) -> None:
    write(
        repo, ".agentv/config.yaml", '$schema: agentv-config-v2\nguideline_patterns: ["**/*.md"]\n'
    )
    write(repo, "suite/.agentv/config.yaml", "$schema: agentv-config-v1\nguideline_patterns: []\n")
    write(repo, "suite/b.md", "markdown")
    eval_path = write(repo, "suite/e.yaml", HEADER + one_file_case("b.md"))
    loaded = load_eval_file(eval_path)
    (case,) = loaded.cases
    assert isinstance(case.input_messages[0].segments[0], GuidelineRef)  # the root config
    (diag,) = loaded.diagnostics
    assert diag.file == (repo / "suite/.agentv/config.yaml").resolve()
    assert diag.message == "`$schema` is 'agentv-config-v1'; expected 'agentv-config-v2'"


def test_config_above_repository_root_is_not_used(tmp_path: Path, monkeypatch) -> None:
    write(tmp_path, ".agentv/config.yaml", "$schema: agentv-config-v2\nguideline_patterns: []\n")
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    monkeypatch.chdir(repo)
    write(repo, "x.instructions.md", "guide")
    case = load_one(write(repo, "e.yaml", HEADER + one_file_case("x.instructions.md")))
    assert isinstance(case.input_messages[0].segments[0], GuidelineRef)  # defaults, not []


def test_explicit_empty_pattern_list_means_no_guidelines(repo: Path) -> None:
    write(repo, ".agentv/config.yaml", "$schema: agentv-config-v2\nguideline_patterns: []\n")
    write(repo, "style.instructions.md", "Be brief.\n")
    case = load_one(write(repo, "e.yaml", HEADER + one_file_case("style.instructions.md")))
    seg = case.input_messages[0].segments[0]
    assert isinstance(seg, FileSegment)  # an ordinary attachment
    assert case.guideline_files == ()
    prompt = build_prompt(case)
    assert prompt.guidelines == ""
    assert prompt.question == '<file path="style.instructions.md">\nBe brief.\n</file>'


def test_guideline_classified_by_repository_relative_path(repo: Path) -> None:
    # The pattern sees `docs/prompts/x.md` (relative to the root), whatever was written.
    write(repo, "docs/prompts/x.md", "guide")
    eval_path = write(repo, "docs/evals/e.yaml", HEADER + one_file_case("../prompts/x.md"))
    case = load_one(eval_path)
    assert isinstance(case.input_messages[0].segments[0], GuidelineRef)
    assert case.guideline_files[0].path == "../prompts/x.md"


# --- text handling ------------------------------------------------------------------------------


def test_crlf_is_normalised_in_eval_files_and_attachments(repo: Path) -> None:
    (repo / "notes.txt").write_bytes(b"line one\r\nline two\r\nkeep\rthis\r\n")
    eval_text = (
        HEADER
        + one_file_case("notes.txt")
        + "      - role: user\n        content: |\n          a\n          b\n"
    )
    (repo / "e.yaml").write_bytes(eval_text.replace("\n", "\r\n").encode())
    case = load_one(repo / "e.yaml")
    seg = case.input_messages[0].segments[0]
    assert isinstance(seg, FileSegment)
    assert seg.text == "line one\nline two\nkeep\rthis\n"  # a lone CR is kept
    text = case.input_messages[1].segments[0]
    assert isinstance(text, TextSegment) and text.value == "a\nb\n"


def test_byte_order_mark_is_not_content(repo: Path) -> None:
    (repo / "bom.txt").write_bytes(b"\xef\xbb\xbfhello")
    (repo / "e.yaml").write_bytes(b"\xef\xbb\xbf" + (HEADER + one_file_case("bom.txt")).encode())
    seg = load_one(repo / "e.yaml").input_messages[0].segments[0]
    assert isinstance(seg, FileSegment) and seg.text == "hello"


def test_attachment_that_is_not_utf8_makes_the_case_invalid(repo: Path) -> None:
    # The decode error is the case's error: the loader must not go on with no text.
    (repo / "bin.dat").write_bytes(b"ok \xff\xfe\x00")
    loaded = load_eval_file(write(repo, "e.yaml", HEADER + one_file_case("bin.dat")))
    assert loaded.cases == []
    (bad,) = loaded.invalid
    assert [d.message for d in bad.diagnostics] == [
        "case 'c': referenced file bin.dat is not UTF-8 text (byte 0xff on line 1)"
    ]


def test_file_referenced_by_1000_cases_is_read_once(repo: Path) -> None:
    write(repo, "shared.txt", "shared attachment")
    write(repo, "team.instructions.md", "shared guideline")
    cases = "".join(
        f"""  - id: case-{i}
    outcome: ok
    input_messages:
      - role: user
        content:
          - {{type: file, value: team.instructions.md}}
          - {{type: file, value: shared.txt}}
          - {{type: text, value: question {i}}}
"""
        for i in range(1000)
    )
    eval_path = write(repo, "e.yaml", HEADER + cases)
    store = FileStore()
    loaded = load_eval_file(eval_path, context=LoadContext(store=store))
    assert len(loaded.cases) == 1000
    assert store.reads == 2
    assert {c.guideline_files[0].text for c in loaded.cases} == {"shared guideline"}
    # a second file in the same run reuses the cache too
    load_eval_file(
        write(repo, "f.yaml", HEADER + one_file_case("shared.txt")),
        context=LoadContext(store=store),
    )
    assert store.reads == 2


# --- security -------------------------------------------------------------------------------------


def test_reference_outside_repository_root_is_refused(tmp_path: Path, monkeypatch) -> None:
    secret = write(tmp_path, "secret/id_rsa", "PRIVATE KEY")
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    monkeypatch.chdir(repo)
    eval_path = write(
        repo,
        "e.yaml",
        HEADER
        + one_file_case("../secret/id_rsa", "relative")
        + one_file_case(str(secret), "absolute"),
    )
    loaded = load_eval_file(eval_path)
    assert loaded.cases == []
    messages = [d.message for d in loaded.errors]
    assert messages == [
        f"case 'relative': referenced file ../secret/id_rsa resolves outside the repository root ({secret})",
        f"case 'absolute': referenced file {secret} resolves outside the repository root ({secret})",
    ]
    assert "--allow-outside-root" in (loaded.errors[0].hint or "")
    allowed = load_eval_file(eval_path, context=LoadContext(allow_outside_root=True))
    assert [c.id for c in allowed.cases] == ["relative", "absolute"]


def test_symlink_out_of_the_repository_is_refused(tmp_path: Path, monkeypatch) -> None:
    secret = write(tmp_path, "outside.env", "TOKEN=abc")
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    monkeypatch.chdir(repo)
    os.symlink(secret, repo / "innocent.txt")
    loaded = load_eval_file(write(repo, "e.yaml", HEADER + one_file_case("innocent.txt")))
    assert loaded.cases == []
    assert "resolves outside the repository root" in loaded.errors[0].message


# --- other fields ---------------------------------------------------------------------------------


def test_eval_id_filter_dataset_and_reference_answer(repo: Path) -> None:
    write(repo, "answer.txt", "from a file\n")
    eval_path = write(
        repo,
        "suite/My Evals.yml",
        HEADER
        + """  - id: a
    outcome: ok
    input_messages: [{role: user, content: hi}]
    expected_messages:
      - role: assistant
        content: "  verbatim  "
  - id: b
    outcome: ok
    input_messages: [{role: user, content: hi}]
    expected_messages:
      - role: assistant
        content:
          - {type: text, value: see}
          - {type: file, value: answer.txt}
""",
    )
    loaded = load_eval_file(eval_path)
    assert loaded.dataset == "My Evals"
    a, b = loaded.cases
    assert a.reference_answer == "  verbatim  "
    assert b.reference_answer == "see from a file\n"
    only = load_eval_file(eval_path, eval_id="b")
    assert [c.id for c in only.cases] == ["b"]
    assert only.total_cases == 2


def test_tool_calls_and_results_load(repo: Path) -> None:
    eval_path = write(
        repo,
        "e.yaml",
        HEADER
        + """  - id: t
    outcome: ok
    execution:
      target: other
      evaluators:
        - {type: contains, value: "4"}
        - {type: code, script: python3 check.py}
    input_messages:
      - role: user
        content: What is 2+2?
      - role: assistant
        content: ""
        tool_calls:
          - {id: c1, name: add, arguments: {a: 2, b: 2}}
          - {id: c2, name: add, arguments: '{"a": 1}'}
      - role: tool
        tool_call_id: c1
        name: add
        content: "4"
""",
    )
    write(repo, "check.py", "print('{\"score\": 1}')\n")  # the script must exist (checked)
    case = load_one(eval_path)
    calls = case.input_messages[1].tool_calls
    assert [(c.id, c.name, c.arguments) for c in calls] == [
        ("c1", "add", {"a": 2, "b": 2}),
        ("c2", "add", {"a": 1}),
    ]
    tool = case.input_messages[2]
    assert (tool.role, tool.tool_call_id, tool.name) == ("tool", "c1", "add")
    assert case.target == "other"
    assert [e.type for e in case.evaluators] == ["contains", "code"]
    assert case.evaluators[1].cwd == repo.resolve()  # code evaluators run beside the eval file
    chat = build_prompt(case).messages
    assert chat[2].tool_calls == calls and chat[3].tool_call_id == "c1"


def test_duplicate_case_ids_are_an_error_on_the_later_cases(repo: Path) -> None:
    case = "  - {id: same, outcome: ok, input_messages: [{role: user, content: hi}]}\n"
    loaded = load_eval_file(write(repo, "e.yaml", HEADER + case + case + case))
    assert [(c.id, c.line) for c in loaded.cases] == [("same", 3)]  # the first one runs
    assert [(d.line, d.message) for d in loaded.errors] == [
        (4, "case id 'same' is used more than once (first on line 3)"),
        (5, "case id 'same' is used more than once (first on line 3)"),
    ]
    assert [(bad.index, bad.id, bad.line) for bad in loaded.invalid] == [
        (1, "same", 4),
        (2, "same", 5),
    ]
    assert loaded.invalid[0].reason == "case id 'same' is used more than once (first on line 3)"


def test_unusable_file_reports_its_cases_problems_too(repo: Path) -> None:
    eval_path = write(
        repo,
        "e.yaml",
        "evalcases:\n  - id: a\n    outcome: ok\n    input_messages:\n      - role: usr\n        content: hi\n",
    )
    with pytest.raises(InputError) as info:
        load_eval_file(eval_path)
    assert [(d.line, d.message) for d in info.value.diagnostics] == [
        (1, "missing `$schema`"),
        (5, "case 'a': invalid role 'usr'"),
    ]


# --- invalid cases --------------------------------------------------------------------------


BAD_ROLE = "  - id: {id}\n    outcome: ok\n    input_messages: [{{role: usr, content: hi}}]\n"
OK = "  - id: {id}\n    outcome: ok\n    input_messages: [{{role: user, content: hi}}]\n"


def test_cases_with_errors_are_kept_as_invalid(repo: Path) -> None:
    text = (
        HEADER
        + OK.format(id="a")
        + BAD_ROLE.format(id="b")
        + "  - just text\n"
        + "  - {outcome: ok, input_messages: [{role: user, content: hi}]}\n"
        + "  - {id: '  ', outcome: ok, input_messages: [{role: user, content: hi}]}\n"
        + "  - id: warned\n    outcome: ok\n    input_messages: [{role: tool, content: x}]\n"
        + "dataset: late\n"
    )
    loaded = load_eval_file(write(repo, "e.yaml", text))
    assert [(c.id, c.line, c.dataset) for c in loaded.cases] == [
        ("a", 3, "late"),
        ("warned", 12, "late"),  # a warning alone does not make a case invalid
    ]
    assert [(b.index, b.id, b.line, b.dataset) for b in loaded.invalid] == [
        (1, "b", 6, "late"),
        (2, None, 9, "late"),  # not a mapping: no id
        (3, None, 10, "late"),  # no id
        (4, None, 11, "late"),  # a blank id is not usable
    ]
    assert loaded.invalid[0].reason == "case 'b': invalid role 'usr'"
    # every error printed belongs to exactly one invalid case
    errors = [d for bad in loaded.invalid for d in bad.diagnostics]
    assert errors == loaded.errors
    assert all(d.severity == "error" for d in errors)
    assert [d.message for d in loaded.warnings] == [
        "case 'warned': tool message has no `tool_call_id`; it will be sent to LM APIs as a "
        "user turn starting with @[Tool]:"
    ]


def test_invalid_cases_follow_the_eval_id_filter(repo: Path) -> None:
    text = HEADER + BAD_ROLE.format(id="a") + BAD_ROLE.format(id="b") + OK.format(id="c")
    path = write(repo, "e.yaml", text)
    assert [b.id for b in load_eval_file(path, eval_id="b").invalid] == ["b"]
    only_c = load_eval_file(path, eval_id="c")
    assert only_c.invalid == [] and [c.id for c in only_c.cases] == ["c"]


def test_invalid_cases_are_kept_when_the_others_are_streamed(repo: Path) -> None:
    text = HEADER + "".join((BAD_ROLE if i in (3, 7) else OK).format(id=f"c{i}") for i in range(10))
    path = write(repo, "e.yaml", text + OK.format(id="c0"))  # and a duplicate id at the end
    loaded = load_eval_file(path, keep_limit=2)
    assert loaded.streamed and loaded.cases == [] and loaded.case_count == 8
    assert [(b.index, b.id) for b in loaded.invalid] == [(3, "c3"), (7, "c7"), (10, "c0")]
    again = list(iter_cases(loaded))
    assert [c.id for c in again] == [f"c{i}" for i in range(10) if i not in (3, 7)]
    assert [c.line for c in again[:2]] == [3, 6]
    assert again == load_eval_file(path).cases


# --- the file-level `execution:` block (the original AgentV's files) ------------------------


EXECUTION = """execution:
  target: fast
  evaluators:
    - {type: contains, value: hi}
"""


def test_file_execution_gives_the_defaults_of_the_cases(repo: Path) -> None:
    text = (
        "$schema: agentv-eval-v2\n"
        + EXECUTION
        + "evalcases:\n"
        + OK.format(id="plain")
        + "  - id: own\n    outcome: ok\n    input_messages: [{role: user, content: hi}]\n"
        "    execution:\n      target: slow\n      evaluators: [{type: equals, value: x}]\n"
        + "  - id: own-list\n    outcome: ok\n    input_messages: [{role: user, content: hi}]\n"
        "    execution: {target: slow}\n    evaluators: []\n"
    )
    loaded = load_eval_file(write(repo, "e.yaml", text))
    assert not loaded.diagnostics
    assert loaded.target == "fast"  # cases without a target of their own run there
    assert [(c.id, c.target, [e.type for e in c.evaluators]) for c in loaded.cases] == [
        ("plain", None, ["contains"]),
        ("own", "slow", ["equals"]),  # the case's own always wins
        ("own-list", "slow", []),  # an empty list of its own too
    ]


def test_top_level_target_wins_over_execution_target(repo: Path) -> None:
    text = (
        "$schema: agentv-eval-v2\ntarget: main\n" + EXECUTION + "evalcases:\n" + OK.format(id="a")
    )
    loaded = load_eval_file(write(repo, "e.yaml", text))
    assert loaded.target == "main"
    (warning,) = loaded.warnings
    assert warning.message == (
        "`execution.target` 'fast' disagrees with the file's `target` 'main'; 'main' is used"
    )
    same = text.replace("target: main", "target: fast")
    assert load_eval_file(write(repo, "same.yaml", same)).diagnostics == []


def test_file_execution_written_after_the_cases(repo: Path) -> None:
    text = HEADER + OK.format(id="a") + OK.format(id="b") + EXECUTION
    path = write(repo, "e.yaml", text)
    for loaded in (load_eval_file(path), load_eval_file(path, keep_limit=1)):
        assert loaded.target == "fast"
        cases = list(iter_cases(loaded))
        assert [[e.type for e in c.evaluators] for c in cases] == [["contains"], ["contains"]]


def test_file_execution_problems_make_the_file_unusable(repo: Path) -> None:
    text = (
        "$schema: agentv-eval-v2\nexecution:\n  targt: x\n  evaluators:\n"
        "    - {type: contain, value: hi}\nevalcases:\n" + OK.format(id="a")
    )
    with pytest.raises(InputError) as info:
        load_eval_file(write(repo, "e.yaml", text))
    assert [(d.line, d.message, d.hint) for d in info.value.diagnostics] == [
        (
            3,
            "`execution.evaluators[0].type`: unknown evaluator type 'contain'",
            "did you mean 'contains'? valid choices: llm_judge, code, contains, icontains, "
            "equals, regex, is_json, latency, cost, tool_used, tool_not_used, tool_trajectory, "
            "tool_call_f1, step_count, repeated_calls, file_exists, file_contains, command, "
            "diff",
        ),
        (
            3,
            "`execution.targt`: unknown key 'targt'",
            "did you mean 'target'? valid keys here: target, evaluators",
        ),
    ]
    text = "$schema: agentv-eval-v2\nexecution: fast\nevalcases:\n" + OK.format(id="a")
    with pytest.raises(InputError) as info:
        load_eval_file(write(repo, "e.yaml", text))
    assert [d.message for d in info.value.diagnostics] == ["`execution` must be a mapping"]


def test_grader_is_not_a_key_of_agentv(repo: Path) -> None:
    text = "$schema: agentv-eval-v2\ngrader: llm_judge\nevalcases:\n" + OK.format(id="a")
    with pytest.raises(InputError) as info:
        load_eval_file(write(repo, "e.yaml", text))
    (diag,) = info.value.diagnostics
    assert (diag.line, diag.message, diag.hint) == (
        2,
        "unknown key 'grader'",
        "did you mean `evaluator`?",
    )
    case = "  - {id: a, grader: code, outcome: ok, input_messages: [{role: user, content: hi}]}\n"
    loaded = load_eval_file(write(repo, "c.yaml", HEADER + case))
    (diag,) = loaded.errors
    assert (diag.message, diag.hint) == (
        "case 'a': unknown key 'grader'",
        "did you mean `evaluator`?",
    )


def test_file_block_with_a_misnamed_value_gets_one_message(repo: Path) -> None:
    write(repo, "ctx.md", "x")
    case = (
        "  - id: a\n    outcome: ok\n    input_messages:\n      - role: user\n"
        "        content:\n          - {type: file, path: ctx.md}\n"
        "          - {type: text, text: hi, extra: 1}\n"
    )
    loaded = load_eval_file(write(repo, "e.yaml", HEADER + case))
    assert [(d.line, d.column, d.message, d.hint) for d in loaded.diagnostics] == [
        (
            8,
            26,
            "case 'a': file block needs `value`, not `path`",
            "write `{type: file, value: ...}`",
        ),
        # two keys besides `type`: which one was meant is not known; both problems are said
        (
            9,
            13,
            "case 'a': missing required key `value`",
            "add `value:` (the text, or the file path)",
        ),
        (9, 26, "case 'a': unknown key 'text'", "valid keys here: type, value"),
        (9, 36, "case 'a': unknown key 'extra'", "valid keys here: type, value"),
    ]
