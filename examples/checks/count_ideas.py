"""Code evaluator for the brainstorm example: are there at least five distinct ideas?

agentv runs this script with the case as JSON on stdin and reads a JSON verdict from
stdout: {"score": 0..1, "hits": [...], "misses": [...], "reasoning": "..."}.
"""

import json
import re
import sys

WANTED = 5


def main() -> None:
    payload = json.load(sys.stdin)
    answer = payload.get("candidate_answer", "")
    # An idea is a line that starts like a list item: "1.", "2)", "-", "*".
    ideas = {
        line.strip().lower()
        for line in answer.splitlines()
        if re.match(r"\s*(\d+[.)]|[-*•])\s+\S", line)
    }
    found = len(ideas)
    verdict = {
        "score": min(found, WANTED) / WANTED,
        "hits": [f"{found} distinct ideas listed"] if found else [],
        "misses": [] if found >= WANTED else [f"only {found} of {WANTED} ideas listed"],
        "reasoning": f"counted {found} list items",
    }
    print(json.dumps(verdict))


if __name__ == "__main__":
    main()
