"""Generate a synthetic agentv suite of N cases for the benchmarks.

Every case is a 4-turn conversation (system, user, assistant, user) like the peers' perf
suites. The first user turn attaches one file (``context.md``) and one guideline file
(``style.instructions.md``), both shared by every case, so each run exercises file
resolution and guideline extraction. Each case is graded by one ``contains`` evaluator.

A suite folder looks like this::

    <folder>/
      .git                      empty folder: marks the repository root, so references
                                and the targets search stay inside the suite
      .agentv/targets.yaml      targets ``mock`` (instant) and ``fake-openai`` (loopback)
      bench.yaml                the eval file
      context.md
      style.instructions.md
      suite.json                what was generated (lets later runs reuse the suite)

Usage::

    python benchmarks/gen_suite.py OUT_DIR N [--server-url http://127.0.0.1:PORT]
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

GENERATOR_VERSION = 1
ANSWER = "The answer is 42."
NEEDLE = "42"
MOCK_TARGET = "mock"
HTTP_TARGET = "fake-openai"
EVAL_FILE = "bench.yaml"
CONTEXT_FILE = "context.md"
GUIDELINE_FILE = "style.instructions.md"

_CONTEXT_TEXT = """# Project context

The numbers in this conversation are small integers chosen by the benchmark generator.
Multiplication facts are checked by a substring evaluator, so keep answers short.
"""
_GUIDELINE_TEXT = """# Answer style

- Answer in one short sentence.
- State numbers with digits, not words.
"""


@dataclass(frozen=True)
class Suite:
    """A generated suite on disk."""

    folder: Path
    n: int
    needle: str

    @property
    def eval_file(self) -> Path:
        """The eval YAML file."""
        return self.folder / EVAL_FILE

    @property
    def targets_file(self) -> Path:
        """The discovered targets file (``.agentv/targets.yaml`` at the suite root)."""
        return self.folder / ".agentv" / "targets.yaml"

    def case_ids(self) -> list[str]:
        """Ids of every case, in file order."""
        return [case_id(i) for i in range(self.n)]


def case_id(i: int) -> str:
    """The id of case ``i`` (zero-padded so ids sort in file order)."""
    return f"case-{i:06d}"


def _q(text: str) -> str:
    # A JSON string is a valid YAML double-quoted scalar.
    return json.dumps(text)


def _case_yaml(i: int, needle: str) -> str:
    number = i % 97
    return (
        f"  - id: {case_id(i)}\n"
        f"    outcome: {_q('Answers 42 and restates the number ' + str(number) + '.')}\n"
        "    input_messages:\n"
        "      - role: system\n"
        f"        content: {_q('You are a concise assistant. Answer with a short sentence.')}\n"
        "      - role: user\n"
        "        content:\n"
        "          - type: text\n"
        f"            value: {_q(f'Case {i}: remember the number {number}.')}\n"
        "          - type: file\n"
        f"            value: {CONTEXT_FILE}\n"
        "          - type: file\n"
        f"            value: {GUIDELINE_FILE}\n"
        "      - role: assistant\n"
        f"        content: {_q(f'Noted, the number is {number}.')}\n"
        "      - role: user\n"
        f"        content: {_q(f'Case {i}: what is 6 times 7? Also restate the number.')}\n"
        "    execution:\n"
        "      evaluators:\n"
        "        - type: contains\n"
        f"          value: {_q(needle)}\n"
    )


def write_eval_file(path: Path, n: int, needle: str = NEEDLE) -> None:
    """Write the eval YAML with ``n`` cases (streamed, so 100,000 cases need little memory)."""
    with path.open("w", encoding="utf-8", newline="\n") as out:
        out.write("$schema: agentv-eval-v2\n")
        out.write(f"description: {_q(f'Synthetic benchmark suite, {n} cases')}\n")
        out.write(f"target: {MOCK_TARGET}\n")
        out.write("evalcases:\n")
        chunk: list[str] = []
        for i in range(n):
            chunk.append(_case_yaml(i, needle))
            if len(chunk) == 1000:
                out.write("".join(chunk))
                chunk.clear()
        out.write("".join(chunk))


def targets_yaml(
    server_url: str | None,
    answer: str = ANSWER,
    http_settings: Mapping[str, float | int | str] | None = None,
) -> str:
    """The targets file: an instant mock target and, with a server URL, an OpenAI target
    (with ``http_settings`` added to it, e.g. ``timeout_seconds``)."""
    lines = [
        "$schema: agentv-targets-v2.2",
        "targets:",
        f"  - name: {MOCK_TARGET}",
        "    provider: mock",
        f"    response: {_q(answer)}",
    ]
    if server_url is not None:
        lines += [
            f"  - name: {HTTP_TARGET}",
            "    provider: openai",
            f"    base_url: {_q(server_url.rstrip('/') + '/v1')}",
            "    api_key: dummy",
            "    model: fake",
        ]
        lines += [f"    {key}: {json.dumps(value)}" for key, value in (http_settings or {}).items()]
    return "\n".join(lines) + "\n"


def write_targets(
    suite: Suite,
    server_url: str | None,
    http_settings: Mapping[str, float | int | str] | None = None,
) -> None:
    """(Re)write the suite's targets file, e.g. once the fake server's port is known."""
    suite.targets_file.parent.mkdir(parents=True, exist_ok=True)
    text = targets_yaml(server_url, http_settings=http_settings)
    suite.targets_file.write_text(text, encoding="utf-8")


def _manifest(n: int, needle: str) -> dict[str, object]:
    return {"generator_version": GENERATOR_VERSION, "n": n, "needle": needle}


def generate_suite(
    folder: Path,
    n: int,
    *,
    needle: str = NEEDLE,
    server_url: str | None = None,
    http_settings: Mapping[str, float | int | str] | None = None,
) -> Suite:
    """Write a suite of ``n`` cases into ``folder``; reuse it when it is already there.

    The eval file is regenerated only when ``suite.json`` does not describe the same
    suite; the targets file is always rewritten (the fake server's port changes per run).
    """
    if n < 1:
        raise ValueError("a suite needs at least one case")
    folder.mkdir(parents=True, exist_ok=True)
    suite = Suite(folder=folder, n=n, needle=needle)
    manifest_path = folder / "suite.json"
    wanted = _manifest(n, needle)
    try:
        current = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        current = None
    if current != wanted or not suite.eval_file.exists():
        manifest_path.unlink(missing_ok=True)  # a half-written suite must not look complete
        (folder / ".git").mkdir(exist_ok=True)
        (folder / CONTEXT_FILE).write_text(_CONTEXT_TEXT, encoding="utf-8")
        (folder / GUIDELINE_FILE).write_text(_GUIDELINE_TEXT, encoding="utf-8")
        write_eval_file(suite.eval_file, n, needle)
        manifest_path.write_text(json.dumps(wanted) + "\n", encoding="utf-8")
    write_targets(suite, server_url, http_settings)
    return suite


def main(argv: list[str] | None = None) -> int:
    """Command-line entry: generate one suite."""
    parser = argparse.ArgumentParser(description="Generate a synthetic agentv benchmark suite.")
    parser.add_argument("folder", type=Path, help="where to write the suite")
    parser.add_argument("n", type=int, help="number of cases")
    parser.add_argument("--needle", default=NEEDLE, help="text the contains evaluator expects")
    parser.add_argument("--server-url", help="base URL of the fake OpenAI server, if any")
    args = parser.parse_args(argv)
    if args.n < 1:
        parser.error("N must be at least 1")
    suite = generate_suite(args.folder, args.n, needle=args.needle, server_url=args.server_url)
    print(f"{suite.eval_file} ({suite.n} cases)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
