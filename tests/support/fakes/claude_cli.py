"""A stand-in for the ``claude`` executable (the tests install it on PATH as ``claude``).

It checks that agentv passes the flags print mode needs (``-p``, ``--output-format
stream-json``, ``--verbose``: the real CLI refuses stream-json without it) and refuses an
option it does not know as the real CLI does (``error: unknown option '--x'``, exit 1). It
reads the prompt from stdin, records what it saw to the file named by
``FAKE_CLAUDE_RECORD``, then replays the recorded stream-json file named by
``FAKE_CLAUDE_EVENTS`` line by line, ``{CWD}``, ``{HOME}`` and ``{TMP}`` replaced by its
working folder, ``$HOME`` and the temp folder. A few lines are directions rather than
events, done and not printed:

- ``{"fake_write": {"path": P, "content": C}}``: write the file P (relative to the working
  folder), as the Write tool the recording called did;
- ``{"fake_edit": {"path": P, "old": A, "new": B}}``: replace A by B in P (the Edit tool);
- ``{"fake_stderr": TEXT}``, ``{"fake_exit": N}``, ``{"fake_sleep_ms": N}``.

After the last line it exits 1 when the last ``result`` event says ``is_error`` (the real
CLI does), else 0.
"""

import json
import os
import sys
import tempfile
import time

#: the options agentv may pass, each with whether it takes values (``*``: several)
KNOWN = {
    "-p": 0,
    "--print": 0,
    "--verbose": 0,
    "--output-format": 1,
    "--model": 1,
    "--max-turns": 1,
    "--permission-mode": 1,
    "--append-system-prompt": 1,
    "--allowedTools": "*",
    "--allowed-tools": "*",
    "--disallowedTools": "*",
    "--disallowed-tools": "*",
}


def main() -> int:
    args = sys.argv[1:]
    seen: dict[str, list[str]] = {}
    i = 0
    while i < len(args):
        name = args[i]
        if name not in KNOWN:
            sys.stderr.write(f"error: unknown option '{name}'\n")
            return 1
        takes = KNOWN[name]
        values: list[str] = []
        i += 1
        if takes == "*":
            while i < len(args) and not args[i].startswith("-"):
                values.append(args[i])
                i += 1
        else:
            values = args[i : i + takes]
            i += takes
        seen[name] = values
    if "-p" not in seen and "--print" not in seen:
        sys.stderr.write("fake claude: expected -p (print mode)\n")
        return 64
    if seen.get("--output-format") != ["stream-json"] or "--verbose" not in seen:
        sys.stderr.write(
            "Error: When using --print, --output-format=stream-json requires --verbose\n"
        )
        return 1
    prompt = sys.stdin.read()
    record = os.environ.get("FAKE_CLAUDE_RECORD")
    if record:
        with open(record, "a", encoding="utf-8") as fh:
            entry = {
                "argv": args,
                "options": seen,
                "cwd": os.getcwd(),
                "prompt": prompt,
                "api_key": os.environ.get("ANTHROPIC_API_KEY"),
                "openai_key": os.environ.get("OPENAI_API_KEY"),
                "lang": os.environ.get("LANG"),
            }
            fh.write(json.dumps(entry) + "\n")
    places = {
        "{CWD}": os.getcwd(),
        "{HOME}": os.path.expanduser("~"),
        "{TMP}": tempfile.gettempdir(),
    }
    failed = False
    code: int | None = None
    with open(os.environ["FAKE_CLAUDE_EVENTS"], encoding="utf-8") as fh:
        for line in fh:
            for mark, value in places.items():
                line = line.replace(mark, value)
            event = json.loads(line)
            if "fake_write" in event:
                spec = event["fake_write"]
                with open(spec["path"], "w", encoding="utf-8") as out:
                    out.write(spec["content"])
            elif "fake_edit" in event:
                spec = event["fake_edit"]
                with open(spec["path"], encoding="utf-8") as src:
                    text = src.read()
                with open(spec["path"], "w", encoding="utf-8") as out:
                    out.write(text.replace(spec["old"], spec["new"]))
            elif "fake_stderr" in event:
                sys.stderr.write(event["fake_stderr"] + "\n")
            elif "fake_exit" in event:
                code = event["fake_exit"]
            elif "fake_sleep_ms" in event:
                time.sleep(event["fake_sleep_ms"] / 1000)
            else:
                sys.stdout.write(json.dumps(event) + "\n")
                sys.stdout.flush()
                if event.get("type") == "result":
                    failed = bool(event.get("is_error"))
    if code is not None:
        return code
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
