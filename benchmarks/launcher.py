"""Run one command and report its wall time and rusage as JSON (used by ``measure.py``).

    python -I -S launcher.py RESULT.json COMMAND [ARGS...]

Why a separate small process: on Linux a process's peak RSS (``ru_maxrss``) includes the
memory of the process it was forked from, up to the moment it calls ``exec``. Spawned
straight from the benchmark harness (which holds the fake server and the result checks),
``/bin/true`` would report the harness's size. Spawned from this launcher, started without
``site`` and importing almost nothing, the floor is the launcher's few megabytes, below the
peak of anything worth measuring. The launcher also times the command from just before its
spawn to just after its reap, leaving its own start-up out.
"""

import json
import os
import sys
import time


def main() -> int:
    """Spawn the command, wait for it, write the figures, exit with its exit code."""
    result_path, argv = sys.argv[1], sys.argv[2:]
    started_at = time.monotonic()
    start = time.perf_counter()
    try:
        pid = os.posix_spawnp(argv[0], argv, os.environ)
    except OSError as exc:
        print(f"cannot run {argv[0]}: {exc.strerror}", file=sys.stderr)
        return 127
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    figures = {
        "returncode": code,
        "wall_s": wall,
        "user_s": usage.ru_utime,
        "sys_s": usage.ru_stime,
        "ru_maxrss": usage.ru_maxrss,
        "started_at": started_at,
        "ended_at": time.monotonic(),
    }
    with open(result_path, "w", encoding="utf-8") as out:
        json.dump(figures, out)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main())
