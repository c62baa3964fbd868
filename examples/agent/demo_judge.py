"""An offline stand-in for an LLM judge, for `make demo` only: it scores keyword overlap.

agentv's `llm_judge` evaluator sends its grading prompt (expected outcome, question,
reference answer, candidate answer in `[[ ## ... ## ]]` sections) to the judge target.
This script is that target when no model is available: it scores the share of the expected
outcome's and reference answer's key words found in the candidate answer, and answers in
the judge's JSON format. It is a crude grader, clearly labelled as such in its reasoning;
use a real model as `judge_target` for real grading.
"""

from __future__ import annotations

import json
import re
import sys

_WORD = re.compile(r"[a-z][a-z0-9_]{3,}")
_STOP = {
    "that",
    "with",
    "this",
    "each",
    "when",
    "from",
    "them",
    "instead",
    "such",
    "into",
    "should",
    "would",
    "their",
    "there",
    "example",
    "least",
    "shows",
    "gives",
}


def section(prompt: str, name: str) -> str:
    match = re.search(rf"\[\[ ## {name} ## \]\]\n(.*?)(?=\n\[\[ ## |\Z)", prompt, re.S)
    return match.group(1).strip() if match else ""


def main() -> None:
    prompt = sys.argv[1] if len(sys.argv) > 1 else sys.stdin.read()
    expected = section(prompt, "expected_outcome") + " " + section(prompt, "reference_answer")
    candidate = section(prompt, "candidate_answer").lower()
    keys = sorted({w for w in _WORD.findall(expected.lower()) if w not in _STOP})
    hits = [w for w in keys if w in candidate]
    misses = [w for w in keys if w not in candidate]
    score = len(hits) / len(keys) if keys else 0.0
    print(
        json.dumps(
            {
                "score": round(score, 3),
                "hits": [f"mentions {w}" for w in hits[:4]],
                "misses": [f"does not mention {w}" for w in misses[:4]],
                "reasoning": f"offline keyword-overlap judge: {len(hits)} of {len(keys)} key words",
            }
        )
    )


if __name__ == "__main__":
    main()
