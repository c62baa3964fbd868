"""The mutation score of each module `make mutation` covers, from mutmut's results.

    .venv/bin/python tests/mutation_report.py            # the table (after `mutmut run`)
    .venv/bin/python tests/mutation_report.py --survivors  # and every survivor not judged

Score = killed / (mutants - judged equivalent), over the code each module is tested for:
the whole module, except in the provider files, where only the pure converters (and the
helpers they call) are the target, and in the trajectory evaluators, where only their
settings' checks are; the rest (the provider classes: clients, settings, error
translation; the trajectory evaluators' grading) is counted apart as "outside the target". Equivalent mutants are listed,
with why, in tests/mutation_equivalent.txt (one ``name  # reason`` a line).

Exit code 1 when a module in the target is under 95% or a survivor is not yet judged.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EQUIVALENT_FILE = Path(__file__).with_name("mutation_equivalent.txt")
GOAL = 0.95

MODULES = {
    "agentv.prompts.builder": "src/agentv/prompts/builder.py",
    "agentv.evaluators.deterministic": "src/agentv/evaluators/deterministic.py",
    "agentv.evaluators.grading": "src/agentv/evaluators/grading.py",
    "agentv.results.summary": "src/agentv/results/summary.py",
    "agentv.results.stats": "src/agentv/results/stats.py",
    "agentv.run.scheduling": "src/agentv/run/scheduling.py",
    "agentv.results.compare": "src/agentv/results/compare.py",
    "agentv.evaluators.schemas": "src/agentv/evaluators/schemas.py",
    "agentv.system.scripts": "src/agentv/system/scripts.py",
    "agentv.evaluators.trajectory": "src/agentv/evaluators/trajectory.py (checks)",
    "agentv.providers.openai": "src/agentv/providers/openai.py (converters)",
    "agentv.providers.anthropic": "src/agentv/providers/anthropic.py (converters)",
    "agentv.providers.gemini": "src/agentv/providers/gemini.py (converters)",
}
#: In the modules tested in part, the functions that are the target (mangled as mutmut names
#: them): the provider files' converters, the trajectory evaluators' checks.
TARGETS = {
    "agentv.providers.openai": {"x_to_openai_messages", "x_from_openai_completion"},
    "agentv.providers.anthropic": {
        "x_to_anthropic_request",
        "x_from_anthropic_message",
        "x__text_blocks",
    },
    "agentv.providers.gemini": {"x_to_gemini_request", "x_from_gemini_response", "x__text_parts"},
    "agentv.evaluators.trajectory": {
        "x__call_problems",
        "x__bounds_problems",
        "x__expected_problems",
        "xǁToolUsedSpecǁcheck",
        "xǁToolNotUsedSpecǁcheck",
        "xǁToolTrajectorySpecǁcheck",
        "xǁToolCallF1Specǁcheck",
        "xǁStepCountSpecǁcheck",
    },
}
_NAME = re.compile(r"^\s*(?P<name>[\w.ǁ]+__mutmut_\d+): (?P<status>.+?)\s*$")


def results() -> dict[str, str]:
    """mutant name -> status, as ``mutmut results --all true`` prints them."""
    done = subprocess.run(
        [str(Path(sys.executable).with_name("mutmut")), "results", "--all", "true"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    out = {}
    for line in done.stdout.splitlines():
        match = _NAME.match(line)
        if match:
            out[match["name"]] = match["status"]
    return out


def equivalents() -> dict[str, str]:
    """mutant name -> why it is equivalent."""
    out = {}
    if EQUIVALENT_FILE.exists():
        for line in EQUIVALENT_FILE.read_text(encoding="utf-8").splitlines():
            name, _, reason = line.partition("#")
            if name.strip():
                out[name.strip()] = reason.strip()
    return out


def place(name: str) -> tuple[str, str, bool]:
    """(module, function, in the target) of a mutant."""
    base = name.rsplit("__mutmut_", 1)[0]
    for module in sorted(MODULES, key=len, reverse=True):
        if base.startswith(module + "."):
            function = base[len(module) + 1 :]
            target = module not in TARGETS or function in TARGETS[module]
            return module, function, target
    return "", base, False


def main(argv: list[str]) -> int:
    found = results()
    judged = equivalents()
    stale = sorted(set(judged) - set(found))
    rows: dict[str, Counter[str]] = {m: Counter() for m in MODULES}
    outside: Counter[str] = Counter()
    open_survivors: list[str] = []
    for name, status in sorted(found.items()):
        module, _, target = place(name)
        if not module:
            continue
        if not target:
            outside[status] += 1
            continue
        if name in judged:
            rows[module]["equivalent"] += 1
            continue
        rows[module][status] += 1
        if status != "killed":
            open_survivors.append(f"{name}: {status}")

    print("| module | mutants | killed | equivalent | other | score |")
    print("|---|---|---|---|---|---|")
    failing = False
    for module, label in MODULES.items():
        c = rows[module]
        total = sum(c.values())
        judged_n = c["equivalent"]
        killed = c["killed"]
        other = total - killed - judged_n
        score = killed / (total - judged_n) if total > judged_n else 1.0
        failing |= score < GOAL
        print(f"| {label} | {total} | {killed} | {judged_n} | {other} | {score:.1%} |")
    if outside:
        shown = ", ".join(f"{s} {n}" for s, n in sorted(outside.items()))
        print(f"\nOutside the target: {sum(outside.values())} ({shown})")
    if stale:
        print(f"\n{len(stale)} judged mutants no longer exist (renumbered?): {', '.join(stale)}")
    if open_survivors:
        print(f"\n{len(open_survivors)} survivors not judged (mutmut show NAME):")
        if "--survivors" in argv:
            print("\n".join(f"  {s}" for s in open_survivors))
    return 1 if failing or open_survivors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
