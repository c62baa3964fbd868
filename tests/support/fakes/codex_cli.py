"""A stand-in for the ``codex`` executable (the tests install it on PATH as ``codex``).

It checks the argument list agentv must pass, reads the prompt from stdin, records what
it saw to the file named by ``FAKE_CODEX_RECORD``, and prints JSON Lines events shaped
like ``codex exec --json``. ``FAKE_CODEX_MODE`` picks a misbehaviour: ``fail`` (exit 3),
``silent`` (no output), ``sleep`` (hang), ``no_answer`` (events without an agent message).
``FAKE_CODEX_EVENTS`` names a recorded event log (JSON Lines) to print instead, line by
line; a line ``{"fake_sleep_ms": N}`` in it is not printed but waited for, as Codex takes
time between an item's start and its end.
"""

import json
import os
import sys
import time

FIXED = [
    "--ask-for-approval",
    "never",
    "exec",
    "--json",
    "--color",
    "never",
    "--skip-git-repo-check",
]


def emit(event: dict) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def main() -> int:
    args = sys.argv[1:]
    if args[: len(FIXED)] != FIXED or args[-1] != "-":
        sys.stderr.write(f"fake codex: unexpected arguments {args!r}\n")
        return 64
    prompt = sys.stdin.read()
    record = os.environ.get("FAKE_CODEX_RECORD")
    if record:
        with open(record, "a", encoding="utf-8") as fh:
            entry = {
                "argv": args,
                "extra_args": args[len(FIXED) : -1],
                "cwd": os.getcwd(),
                "cwd_files": sorted(os.listdir(".")),
                "prompt": prompt,
            }
            fh.write(json.dumps(entry) + "\n")
    mode = os.environ.get("FAKE_CODEX_MODE", "ok")
    if mode == "fail":
        sys.stderr.write("fake codex: model refused the request\n")
        return 3
    if mode == "silent":
        return 0
    if mode == "sleep":
        time.sleep(60)
        return 0
    events = os.environ.get("FAKE_CODEX_EVENTS")
    if events:
        with open(events, encoding="utf-8") as fh:
            for line in fh:
                event = json.loads(line)
                if "fake_sleep_ms" in event:
                    time.sleep(event["fake_sleep_ms"] / 1000)
                else:
                    emit(event)
        return 0
    question = prompt.split("[[ ## user_query ## ]]\n\n", 1)[-1]
    sys.stderr.write("fake codex: warming up\n")
    emit({"type": "thread.started", "thread_id": "0199-fake"})
    emit({"type": "turn.started"})
    emit({"type": "item.completed", "item": {"id": "item_0", "type": "reasoning", "text": "hmm"}})
    if mode == "no_answer":
        emit({"type": "error", "message": "stream disconnected before completion"})
        emit({"type": "turn.failed", "error": {"message": "stream disconnected"}})
        return 0
    emit(
        {
            "type": "item.completed",
            "item": {"id": "item_1", "type": "agent_message", "text": "draft answer"},
        }
    )
    emit(
        {
            "type": "item.completed",
            "item": {"id": "item_2", "type": "agent_message", "text": f"ANSWER: {question}"},
        }
    )
    emit(
        {
            "type": "turn.completed",
            "usage": {"input_tokens": 120, "cached_input_tokens": 0, "output_tokens": 7},
        }
    )
    # A partial last line (no newline) must still reach the log.
    sys.stderr.write("fake codex: done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
