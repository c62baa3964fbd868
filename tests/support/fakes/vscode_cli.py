"""A stand-in for VS Code's ``code`` launcher (the tests install it on PATH as ``code``).

It plays VS Code's and the chat agent's part of the subagent protocol: ``--status`` lists
the workspaces it has "open", ``code <x.code-workspace>`` opens one, the ``wakeup`` chat
creates ``.alive``, and a chat started with ``-a <request file>`` reads the request (or,
for a batch, the orchestrator file and every request it lists) and, after a short delay
in a detached process, writes the answer to the temporary file and renames it to the
final response file, as the request's instructions say.

Environment: ``FAKE_CODE_STATE`` (a folder for its state and its call log),
``FAKE_CODE_OPEN`` (``0``: ``--status`` never shows the workspace, forcing the wake-up),
``FAKE_CODE_RESPOND`` (``0``: never answer), ``FAKE_CODE_DELAY`` (seconds, default 0.2),
``FAKE_CODE_BROKEN`` (``1``: every chat launch fails).
"""

import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

STATE = Path(os.environ["FAKE_CODE_STATE"])


def log_call(args: list[str]) -> None:
    with open(STATE / "calls.jsonl", "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"argv": args, "cwd": os.getcwd()}) + "\n")


def opened() -> list[str]:
    path = STATE / "opened.txt"
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def parse_request(path: Path) -> dict:
    text = path.read_text(encoding="utf-8")
    task = text.split("[[ ## task ## ]]\n\n", 1)[1].split("\n\n[[ ## system_instructions ## ]]")[0]
    tmp = re.search(r"write your complete response to: (.+)", text).group(1).strip()
    move = next(line for line in text.splitlines() if line.startswith("mv -- "))
    _, _, _, final = shlex.split(move)
    unlock = next((line for line in text.splitlines() if line.startswith("rm -f -- ")), None)
    lock = shlex.split(unlock)[-1] if unlock else None
    question = task.split("[[ ## user_query ## ]]\n\n", 1)[-1]
    answer = f"vscode says: {question}"
    return {"tmp": tmp, "final": final, "lock": lock, "answer": answer}


def respond_later(jobs: list[dict]) -> None:
    # Detached, like an agent working on after the launcher returned.
    subprocess.Popen(
        [sys.executable, __file__, "--respond", json.dumps(jobs)],
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def respond(jobs: list[dict]) -> None:
    time.sleep(float(os.environ.get("FAKE_CODE_DELAY", "0.2")))
    for job in jobs:
        Path(job["tmp"]).write_text(job["answer"], encoding="utf-8")
        os.replace(job["tmp"], job["final"])
        if job["lock"]:
            Path(job["lock"]).unlink(missing_ok=True)


def chat(args: list[str]) -> int:
    mode = args[args.index("-m") + 1]
    attachments = [args[i + 1] for i, a in enumerate(args) if a == "-a"]
    message = args[-1]
    if os.environ.get("FAKE_CODE_BROKEN") == "1":
        sys.stderr.write("fake code: no running VS Code instance to talk to\n")
        return 1
    if mode == "wakeup":
        last = opened()[-1]
        (Path(last).parent / ".alive").write_text("", encoding="utf-8")
        return 0
    for item in attachments:
        if not Path(item).exists():
            sys.stderr.write(f"fake code: attachment {item} does not exist\n")
            return 1
    if "_orchestrator.md" in message:
        orchestrator = Path(next(a for a in attachments if a.endswith("_orchestrator.md")))
        names = re.findall(r"^\* messages/(\S+_req\.md)$", orchestrator.read_text(), re.M)
        requests = [orchestrator.parent / name for name in names]
    else:
        name = re.search(r"Follow instructions in (\S+_req\.md)", message).group(1)
        requests = [Path(next(a for a in attachments if Path(a).name == name))]
    if os.environ.get("FAKE_CODE_RESPOND", "1") != "0":
        respond_later([parse_request(p) for p in requests])
    return 0


def main() -> int:
    args = sys.argv[1:]
    if args and args[0] == "--respond":
        respond(json.loads(args[1]))
        return 0
    log_call(args)
    if args == ["--status"]:
        print("Version: Code 1.99.0 (fake)")
        if os.environ.get("FAKE_CODE_OPEN", "1") != "0":
            for workspace in opened():
                print(f"|  Window ({Path(workspace).stem} [Workspace])")
        return 0
    if len(args) == 1 and args[0].endswith(".code-workspace"):
        json.loads(Path(args[0]).read_text(encoding="utf-8"))  # must be valid JSON
        with open(STATE / "opened.txt", "a", encoding="utf-8") as fh:
            fh.write(args[0] + "\n")
        return 0
    if args[:2] == ["-r", "chat"]:
        return chat(args)
    sys.stderr.write(f"fake code: unexpected arguments {args!r}\n")
    return 2


if __name__ == "__main__":
    sys.exit(main())
