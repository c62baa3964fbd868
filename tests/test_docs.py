"""The manual's examples work: every page of docs/ (and README.md) is run as written.

Conventions in the Markdown (an HTML comment on the line right before a fenced block;
docs/testing.md, "The manual's examples"):

- ``<!-- file: PATH -->``: the block is a file; the test writes it to PATH in the page's
  project folder (a fresh temporary folder per page) when it reaches the block.
- ``<!-- run -->`` (or ``<!-- run exit=N -->``) before a ``sh`` block: each command (one a
  line, ``\\`` continues a line, comments ignored) runs in the page's project, in order, with
  this environment's ``bin`` folder first on PATH and no API key set; each must exit 0 (or
  N). Before a ``python`` block: the block runs with this Python, in the project.
- ``<!-- skip: REASON -->``: a shell block that cannot run here (it needs a key, a cluster),
  said why. On getting-started.md every shell block is run or skipped with a reason.
- ``<!-- fragment -->``: a YAML (or JSON) block that is a deliberate part of something; it
  must still parse.

Blocks are processed in page order. Then every YAML block is checked: an eval file (or a
case, or a list of messages, wrapped into one) must load without errors; a targets file (or
a list of targets, or one target, wrapped into one) and a config file must pass
``agentv validate``; any other YAML must be marked as a fragment. JSON blocks must parse.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
BIN = Path(sys.executable).parent  # the venv's bin folder: agentv, mkdocs, python
PAGES = [*sorted(DOCS.rglob("*.md")), ROOT / "README.md"]
#: each command, and an option (or argument) its reference must show
COMMANDS = {
    "eval": "--resume",
    "validate": "--allow-outside-root",
    "render": "--mode",
    "init": "[PATH]",
    "compare": "--fail-on-regression",
    "report": "--open",
    "runs": "--since",
    "runs-import": "PATHS...",
    "view": "--no-open",
    "calibrate": "--format",
    "reviews-export": "--out",
    "reviews-import": "--reviewer",
}

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<lang>[\w+-]*)[^\n]*$")
_MARKER = re.compile(r"^\s*<!--\s*(?P<kind>run|file|fragment|skip)\b(?P<arg>.*?)-->\s*$")
_ANY_MARKER = re.compile(r"^\s*<!--\s*(run|file|fragment|skip)")


@dataclass
class Block:
    """One fenced block of a page, with the marker on the line before it."""

    page: Path
    line: int  # 1-based line of the opening fence
    lang: str
    text: str
    kind: str | None = None  # run, file, fragment, skip
    arg: str = ""

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of ``page``, in order (nested and indented fences included)."""
    lines = page.read_text(encoding="utf-8").splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        indent, fence = opening["indent"], opening["fence"]
        body: list[str] = []
        j = i + 1
        while j < len(lines):
            stripped = lines[j].strip()
            if stripped.startswith(fence[0] * len(fence)) and not stripped.strip(fence[0]):
                break
            body.append(lines[j][len(indent) :] if lines[j].startswith(indent) else lines[j])
            j += 1
        block = Block(page, i + 1, opening["lang"].lower(), "\n".join(body) + "\n")
        before = lines[i - 1] if i > 0 else ""
        marker = _MARKER.match(before)
        if marker is not None:
            block.kind, block.arg = marker["kind"], marker["arg"].strip()
        elif _ANY_MARKER.match(before):
            raise AssertionError(f"{block.where}: unreadable marker {before.strip()!r}")
        out.append(block)
        i = j + 1
    return out


# --- running a page -------------------------------------------------------------------------

_SECRET = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|^OPENAI_|^ANTHROPIC_|^GEMINI_|^AZURE_|^GOOGLE_")


def clean_env() -> dict[str, str]:
    """This environment without any key, CI variable or Ray address; bin first on PATH."""
    env = {k: v for k, v in os.environ.items() if not _SECRET.search(k)}
    for name in ("GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY", "RAY_ADDRESS", "VIRTUAL_ENV"):
        env.pop(name, None)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["COLUMNS"] = "100"
    return env


def commands(text: str) -> list[str]:
    """A shell block's commands: one a line, ``\\`` continuing it; comments left out."""
    out: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = pending + raw
        if line.rstrip().endswith("\\"):
            pending = line.rstrip()[:-1] + " "
            continue
        pending = ""
        if line.strip() and not line.strip().startswith("#"):
            out.append(line.strip())
    assert not pending, f"a command ends with a line continuation: {pending!r}"
    return out


def expected_exit(block: Block) -> int:
    match = re.fullmatch(r"(?:exit=(\d+))?", block.arg)
    assert match is not None, f"{block.where}: write `<!-- run -->` or `<!-- run exit=N -->`"
    return int(match[1] or 0)


def run_block(block: Block, project: Path, env: dict[str, str]) -> list[str]:
    """Run a ``<!-- run -->`` block; the problems found (empty: every command did as said)."""
    want = expected_exit(block)
    if block.lang in ("sh", "bash", "shell", "console"):
        steps = [(c, ["sh", "-c", c]) for c in commands(block.text)]
    elif block.lang == "python":
        steps = [("the Python block", [sys.executable, "-c", block.text])]
    else:
        return [f"{block.where}: cannot run a {block.lang or 'plain'} block"]
    problems = []
    for shown, argv in steps:
        done = subprocess.run(
            argv, cwd=project, env=env, capture_output=True, text=True, timeout=180
        )
        if done.returncode != want:
            problems.append(
                f"{block.where}: `{shown}` exited with {done.returncode}, not {want}\n"
                f"--- stdout\n{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}"
            )
            break  # the commands after it depend on it
    return problems


def write_file(block: Block, project: Path) -> Path:
    rel = Path(block.arg.removeprefix(":").strip())
    assert rel.parts and not rel.is_absolute() and ".." not in rel.parts, (
        f"{block.where}: a file marker names a path inside the project, e.g. evals/first.yaml"
    )
    path = project / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(block.text, encoding="utf-8")
    return path


# --- what a YAML block is -------------------------------------------------------------------

EVAL_SCHEMA = "agentv-eval-v2"
TARGETS_SCHEMA = "agentv-targets-v2.2"
CONFIG_SCHEMA = "agentv-config-v2"


def _is_target(value: Any) -> bool:
    return isinstance(value, dict) and "provider" in value and "name" in value


def _is_case(value: Any) -> bool:
    return isinstance(value, dict) and "id" in value and "input_messages" in value


def _is_message(value: Any) -> bool:
    return isinstance(value, dict) and "role" in value


def classify(data: Any) -> tuple[str, Any] | None:
    """(``eval`` | ``targets`` | ``config``, the whole file's data), or None: not agentv's."""
    if isinstance(data, dict):
        schema = data.get("$schema")
        if schema == EVAL_SCHEMA or "evalcases" in data or "cases" in data:
            return "eval", data
        if schema == TARGETS_SCHEMA or "targets" in data:
            return "targets", data
        if schema == CONFIG_SCHEMA:
            return "config", data
        if _is_target(data):
            return "targets", {"$schema": TARGETS_SCHEMA, "targets": [data]}
        if _is_case(data):
            return "eval", {"$schema": EVAL_SCHEMA, "evalcases": [data]}
    if isinstance(data, list) and data:
        if all(_is_target(item) for item in data):
            return "targets", {"$schema": TARGETS_SCHEMA, "targets": data}
        if all(_is_case(item) for item in data):
            return "eval", {"$schema": EVAL_SCHEMA, "evalcases": data}
        if all(_is_message(item) for item in data):
            case = {"id": "doc-example", "outcome": "(doc example)", "input_messages": data}
            return "eval", {"$schema": EVAL_SCHEMA, "evalcases": [case]}
    return None


def check_data_blocks(
    page_blocks: list[Block], project: Path, env: dict[str, str], monkeypatch: Any
) -> list[str]:
    """Every YAML and JSON block parses; agentv's own files load or validate cleanly."""
    import agentv

    problems: list[str] = []
    to_validate: list[tuple[Block, Path]] = []
    for block in page_blocks:
        if block.lang == "json" or block.lang == "jsonl":
            try:
                if block.lang == "json":
                    json.loads(block.text)
                else:
                    for row in block.text.splitlines():
                        if row.strip():
                            json.loads(row)
            except ValueError as exc:
                problems.append(f"{block.where}: not valid JSON: {exc}")
            continue
        if block.lang not in ("yaml", "yml"):
            continue
        try:
            documents = list(yaml.safe_load_all(block.text))
        except yaml.YAMLError as exc:
            problems.append(f"{block.where}: not valid YAML: {exc}")
            continue
        if block.kind == "fragment":
            continue
        found = classify(documents[0]) if len(documents) == 1 else None
        if found is None:
            problems.append(
                f"{block.where}: this YAML is no eval, targets or config file, target, case or "
                "message list; mark it `<!-- fragment -->` if it is a deliberate part"
            )
            continue
        kind, data = found
        if block.kind == "file" and data is documents[0]:
            path = project / block.arg.removeprefix(":").strip()
        else:  # written at the project's root, where its relative paths are looked up
            path = project / f"_doc_block_{block.line}.yaml"
            path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
        if kind == "eval":
            monkeypatch.chdir(project)
            try:
                loaded = agentv.load_eval_file(path)
            except agentv.InputError as exc:
                problems.append(f"{block.where}: the eval file cannot be used:\n{exc}")
                continue
            errors = [d.format() for d in loaded.errors]
            if errors:
                problems.append(f"{block.where}: the eval file has errors:\n" + "\n".join(errors))
        else:
            to_validate.append((block, path))
    if to_validate:
        done = subprocess.run(
            [str(BIN / "agentv"), "validate", *(str(p) for _, p in to_validate)],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if done.returncode != 0:
            named = ", ".join(f"{b.where} ({p.relative_to(project)})" for b, p in to_validate)
            problems.append(f"agentv validate failed on the blocks {named}:\n{done.stdout}")
    return problems


# --- the tests ------------------------------------------------------------------------------


def _pages_with_examples() -> list[Path]:
    return [p for p in PAGES if any(b.kind or b.lang in ("yaml", "yml", "json") for b in blocks(p))]


@pytest.mark.slow
@pytest.mark.parametrize("page", _pages_with_examples(), ids=lambda p: str(p.relative_to(ROOT)))
def test_page_examples_work(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = tmp_path / "project"
    project.mkdir()
    env = clean_env()
    page_blocks = blocks(page)
    problems: list[str] = []
    for block in page_blocks:
        if block.kind == "file":
            write_file(block, project)
        elif block.kind == "run":
            problems += run_block(block, project, env)
            if problems:
                break
        elif block.kind == "skip":
            assert block.arg.removeprefix(":").strip(), f"{block.where}: say why it is skipped"
    if not problems:
        problems += check_data_blocks(page_blocks, project, env, monkeypatch)
    assert not problems, "\n\n".join(problems)


def test_getting_started_runs_every_step() -> None:
    """The walkthrough is tested whole: each shell block runs (or says why it cannot), and
    each file it has the reader write is one the test writes too."""
    page = DOCS / "getting-started.md"
    page_blocks = blocks(page)
    assert any(b.kind == "run" for b in page_blocks)
    for block in page_blocks:
        if block.lang in ("sh", "bash", "shell", "console"):
            assert block.kind in ("run", "skip"), f"{block.where}: a shell step that is not run"
        elif block.lang in ("yaml", "yml", "markdown", "md", "python", "text", "dotenv"):
            assert block.kind in ("file", "run", "fragment"), (
                f"{block.where}: a {block.lang} block the walkthrough has the reader write "
                "needs a `<!-- file: PATH -->` marker"
            )


def test_readme_links_point_to_files() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)\s]+)\)", text)
    assert targets
    for target in targets:
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        path = target.split("#", 1)[0]
        assert (ROOT / path).exists(), f"README.md links to {target}, which does not exist"


def test_readme_keeps_the_newcomer_commands() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    # the install that works before the first release, and the page that gives the others
    for needed in ("make demo", "make test", "make docs", "make dist", "](docs/install.md)"):
        assert needed in text, needed
    assert "pip install 'agentv[openai]'" not in text  # not on PyPI yet
    assert len(text.splitlines()) <= 160


def test_python_api_page_documents_every_public_name() -> None:
    import agentv

    text = (DOCS / "python-api.md").read_text(encoding="utf-8")
    for name in agentv.__all__:
        if name != "__version__":
            assert re.search(rf"^::: agentv\.{name}$", text, re.M), f"::: agentv.{name} missing"


@pytest.mark.slow
def test_site_builds_strictly(tmp_path: Path) -> None:
    """`make docs` in the test suite: a broken link, anchor or reference fails here too."""
    site = tmp_path / "site"
    env = clean_env()
    env["NO_MKDOCS_2_WARNING"] = "1"
    done = subprocess.run(
        [str(BIN / "mkdocs"), "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    cli = (site / "cli" / "index.html").read_text(encoding="utf-8")
    assert "agentv-cli-reference" not in cli  # the marker was replaced
    sections = re.split(r'(?=<h2 id="agentv-)', cli)
    for command, shown in COMMANDS.items():
        found = [s for s in sections if s.startswith(f'<h2 id="agentv-{command}"')]
        assert len(found) == 1, f"no section for agentv {command}"
        assert f"<code>{shown}</code>" in found[0], f"agentv {command}: {shown}"
    assert "130 / 143" in cli  # eval's exit codes
    api = (site / "python-api" / "index.html").read_text(encoding="utf-8")
    assert 'id="agentv.run_eval"' in api


def _project_of(page: Path, root: Path) -> Path:
    """A folder holding every file ``page`` has the reader write (nothing run)."""
    project = root / "project"
    project.mkdir()
    for block in blocks(page):
        if block.kind == "file":
            write_file(block, project)
    return project


def _json_blocks(page: Path) -> list[Any]:
    return [json.loads(b.text) for b in blocks(page) if b.lang == "json"]


@pytest.mark.slow
def test_getting_started_shows_the_messages_render_shows(tmp_path: Path) -> None:
    page = DOCS / "getting-started.md"
    project = _project_of(page, tmp_path)
    done = subprocess.run(
        [
            str(BIN / "agentv"),
            "render",
            "evals/first.yaml",
            "--eval-id=deep-thought",
            "--format=json",
        ],
        cwd=project,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    shown = [b for b in _json_blocks(page) if isinstance(b, list)]
    assert shown == [json.loads(done.stdout)[0]["sent_messages"]]


@pytest.mark.slow
def test_code_evaluator_reads_what_the_page_says(tmp_path: Path) -> None:
    """The JSON a code evaluator reads on stdin, field for field (eval-files.md)."""
    page = DOCS / "eval-files.md"
    project = _project_of(page, tmp_path)
    # the page's check script, made to keep what it reads
    script = project / "evals" / "checks" / "check_add.py"
    script.write_text(
        "import sys\nopen('stdin.json', 'w').write(sys.stdin.read())\nprint('{\"score\": 1}')\n"
    )
    done = subprocess.run(
        [str(BIN / "agentv"), "eval", "evals/fix.yaml", "--out", "r.jsonl", "--quiet"],
        cwd=project,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    received = json.loads((project / "evals" / "stdin.json").read_text())
    documented = next(b for b in _json_blocks(page) if "expected_outcome" in b)
    where = json.dumps(str(project.resolve()))[1:-1]
    expected = json.loads(json.dumps(documented).replace("/home/me/project", where))
    assert received == expected


def _shown_fields(text: str) -> dict[str, Any]:
    """``"question": ...`` and ``"sent_messages": ...`` lines, as prompt-rules.md shows them."""
    items: list[str] = []
    for line in text.splitlines():
        if line.startswith('"') or not items:
            items.append(line)
        else:
            items[-1] += "\n" + line
    return json.loads("{" + ",".join(items) + "}")


@pytest.mark.slow
def test_prompt_rules_worked_examples_hold(tmp_path: Path) -> None:
    """Section 9 of prompt-rules.md: each example's question and messages, as render shows."""
    page = DOCS / "prompt-rules.md"
    text = page.read_text(encoding="utf-8")
    section = text[text.index("## 9. Worked examples") :]
    files = re.findall(r"`([\w.-]+\.\w+)`\s*\(`([^`]+)`\)", section.split("**9.1", 1)[0])
    assert len(files) == 6, files
    for name, content in files:
        (tmp_path / name).write_text(content + "\n", encoding="utf-8")
    page_blocks = blocks(page)
    examples = [
        (a, _shown_fields(b.text))
        for a, b in pairwise(page_blocks)
        if a.lang == "yaml" and b.lang == "" and b.text.startswith('"question"')
    ]
    assert len(examples) >= 12
    cases = [
        {"id": f"line-{a.line}", "outcome": "(doc example)", **yaml.safe_load(a.text)}
        for a, _ in examples
    ]
    suite = {"$schema": "agentv-eval-v2", "evalcases": cases}
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(suite, sort_keys=False))
    done = subprocess.run(
        [str(BIN / "agentv"), "render", "rules.yaml", "--format", "json"],
        cwd=tmp_path,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    rendered = {case["eval_id"]: case for case in json.loads(done.stdout)}
    for block, shown in examples:
        got = rendered[f"line-{block.line}"]
        for key, value in shown.items():
            assert got[key] == value, f"{block.where}: {key}"


def test_commands_split_like_a_shell() -> None:
    text = "agentv init   # a comment\n\n# only a comment\nagentv eval a \\\n  --out b\n"
    found = [shlex.split(c, comments=True) for c in commands(text)]
    assert found == [["agentv", "init"], ["agentv", "eval", "a", "--out", "b"]]
