"""An example project with a run history: two eval files, three runs on a mock target
whose answers change, a judge whose verdicts sit near the pass threshold. Nothing is sent
anywhere (mock targets).

The workbench's browser tests and its screenshots (``tools/view_screenshots.py``) use it;
run it to get a store to look at::

    python tools/view_example.py /tmp/history      # then: cd /tmp/history && agentv view
"""

from __future__ import annotations

import sys
from pathlib import Path

SUPPORT = """\
$schema: agentv-eval-v2
dataset: support
evalcases:
  - id: refund-window
    outcome: Says refunds are possible within 30 days.
    input_messages:
      - role: system
        content: You answer customers of a small web shop. Be brief.
      - role: user
        content: Can I still return the shoes I bought three weeks ago?
    execution:
      evaluators:
        - type: contains
          value: 30 days
        - type: llm_judge
  - id: tracking
    outcome: Points to the tracking link.
    input_messages:
      - role: user
        content: Where is my parcel?
    execution:
      evaluators:
        - type: icontains
          value: tracking
  - id: remembers-name
    outcome: Greets the customer by name, and remembers it.
    input_messages:
      - role: system
        content: You are a friendly assistant.
    turns:
      - content: Hi, I'm Ada.
        evaluators: [{type: icontains, value: ada}]
      - content: What is my name?
        evaluators: [{type: icontains, value: ada}]
"""

CAPITALS = """\
$schema: agentv-eval-v2
dataset: capitals
evalcases:
  - id: france
    outcome: Names Paris.
    input_messages:
      - role: user
        content: What is the capital of France?
    execution:
      evaluators:
        - type: contains
          value: Paris
  - id: japan
    outcome: Names Tokyo.
    input_messages:
      - role: user
        content: What is the capital of Japan?
    execution:
      evaluators:
        - type: contains
          value: Tokyo
"""


def targets(answer: str, judge_score: float) -> str:
    """A targets file: a mock target answering ``answer``, judged by a mock judge that
    gives ``judge_score``."""
    verdict = (
        f'{{"score": {judge_score}, "hits": ["on topic"], "misses": [], '
        '"reasoning": "Checks the answer against the outcome."}'
    )
    return f"""\
$schema: agentv-targets-v2.2
targets:
  - name: default
    provider: mock
    response: {answer!r}
    judge_target: judge
  - name: judge
    provider: mock
    response: '{verdict}'
"""


#: the three runs: (eval files, answer, judge score)
RUNS = (
    (
        ["evals/support.yaml", "evals/capitals.yaml"],
        "Hello Ada! Returns are free within 30 days: use the tracking link. Paris. Tokyo.",
        0.9,
    ),
    (
        ["evals/support.yaml", "evals/capitals.yaml"],
        "Hello! Returns are free within 30 days. Paris.",
        0.75,
    ),
    (["evals/capitals.yaml"], "Paris and Tokyo.", 0.9),
)


def write_project(root: Path) -> None:
    """The eval files and targets files of the example, in ``root`` (a repository)."""
    (root / ".git").mkdir(parents=True, exist_ok=True)
    (root / "evals").mkdir(exist_ok=True)
    (root / "targets").mkdir(exist_ok=True)
    (root / "evals" / "support.yaml").write_text(SUPPORT, encoding="utf-8")
    (root / "evals" / "capitals.yaml").write_text(CAPITALS, encoding="utf-8")
    for n, (_, answer, score) in enumerate(RUNS, 1):
        (root / "targets" / f"v{n}.yaml").write_text(targets(answer, score), encoding="utf-8")


def make_history(root: Path) -> Path:
    """The example project in ``root`` with its three runs in its run store; the store's
    path."""
    import agentv
    from agentv.api import import_runs, store_path

    write_project(root)
    for n, (files, _, _) in enumerate(RUNS, 1):
        out = root / "results" / f"run{n}.jsonl"
        out.parent.mkdir(exist_ok=True)
        agentv.run_eval(files, targets_file=f"targets/v{n}.yaml", out=out, cwd=root)
        import_runs([out], cwd=root)
    return store_path(cwd=root)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python tools/view_example.py FOLDER")
    folder = Path(sys.argv[1]).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    print(f"run store: {make_history(folder)}")
