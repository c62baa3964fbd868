"""One way to run a child process: agent targets (``cli``, ``codex``, ``vscode``) and the
``code`` evaluator's scripts.

``run_process`` starts the child in a session of its own, so that a timeout (or the caller
being cancelled) can kill the whole process group: a shell, the agent it started and
whatever that agent started in turn. On Linux the process tree is walked too (``/proc``),
and every process carrying the call's tag (``TAG_VARIABLE``, inherited by whatever the child
starts) is found, so that a descendant that left the group (``setsid``) dies with it. When
the child exits on its own, whatever it left running is killed as well (unless the call
keeps children: a launcher such as ``code``). Output is captured
with a size cap that keeps the tail, since the end of stderr is where a failing program
explains itself. Each stream keeps a little more than its cap (``SECRET_ROOM``), so that a
secret crossing the cap is still whole, and masked whole, when the text is cut to size.

On Linux a call that keeps no children runs under a small reaper process (``_REAPER_SCRIPT``,
a child subreaper: ``PR_SET_CHILD_SUBREAPER``): every process the command starts stays
below it, whatever it does to leave (``setsid``, dropping the tag, its parent exiting), and
when the command exits the reaper kills and reaps all of them before it exits with the
command's status. The process group and the tag alone cannot do that: a descendant that
left the group and dropped the tag, and whose parent exited, is adopted by init, and
nothing links it to its call any more. A cgroup would, but needs privileges or a
delegated hierarchy that agentv cannot count on; the reaper needs neither, costs one
short-lived Python process per call, and a program that cannot be found is still refused
before anything starts.

Children are bound to agentv's life, however agentv ends. SIGINT and SIGTERM cancel the
run, and cancelling kills every group. For the signals nobody can catch (SIGKILL), a small
watchdog process (one per agentv process, started with the first child) holds the read end
of a pipe and the list of live groups: when agentv dies the kernel closes the pipe and the
watchdog kills every group still listed. On Linux each child also gets
``PR_SET_PDEATHSIG`` (SIGKILL), so it dies with the thread that started it even before the
watchdog acts.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentv.system.masking import SECRET_ROOM, masked_head, masked_tail, shorten
from agentv.system.readfile import open_input

#: bytes kept of each of stdout and stderr (the tail survives)
DEFAULT_MAX_OUTPUT = 10 * 1024 * 1024
#: how long a terminated process group gets to exit before it is killed outright
TERMINATE_GRACE_S = 2.0
#: how long to keep reading after the main process exited (a child may still hold the pipes)
DRAIN_TIMEOUT_S = 2.0

LineSink = Callable[[str, str], None]  # (stream name "stdout" | "stderr", line without "\n")

_POSIX = os.name == "posix"
_LINUX = sys.platform.startswith("linux")


@dataclass(slots=True)
class ProcessResult:
    """How a child process ended and what it printed."""

    command: list[str] | str
    pid: int
    exit_code: int | None  # negative: killed by that signal (POSIX)
    stdout: str
    stderr: str
    timed_out: bool = False
    duration_s: float = 0.0
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    stdout_bytes: int = 0  # how much the child printed on stdout, kept or not

    @property
    def ok(self) -> bool:
        """Exited on its own with code 0."""
        return self.exit_code == 0 and not self.timed_out

    def stderr_tail(self, limit: int = 2000, secrets: Iterable[str] = ()) -> str:
        """The last ``limit`` characters of stderr, stripped, known secrets (the case's and
        ``secrets``) masked before the cut."""
        return shorten(self.stderr.strip(), limit, keep="tail", secrets=secrets)

    def stdout_tail(self, limit: int = 2000, secrets: Iterable[str] = ()) -> str:
        """The last ``limit`` characters of stdout, stripped, masked as ``stderr_tail``."""
        return shorten(self.stdout.strip(), limit, keep="tail", secrets=secrets)

    def describe_exit(self) -> str:
        """``exited with code 2`` / ``was killed by signal SIGKILL``, for messages."""
        code = self.exit_code
        if code is None:
            return "ended without an exit code"
        if code < 0 and _POSIX:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = str(-code)
            return f"was killed by signal {name}"
        return f"exited with code {code}"


def read_head(path: Path, limit: int) -> tuple[bytes, bool]:
    """The first ``limit`` bytes of the file at ``path``, and whether it holds more. At most
    ``limit + 1`` bytes are read, whatever the file's size."""
    with open_input(path) as fh:  # a regular file only: never a FIFO or a device
        data = fh.read(limit + 1)
    return data[:limit], len(data) > limit


def decode_head(data: bytes, cut: bool) -> str:
    """``data`` as UTF-8 text; when it was ``cut``, a character split at the cut is dropped
    rather than shown as a replacement character."""
    if cut:
        end = len(data)
        for back in range(1, min(4, end) + 1):
            byte = data[end - back]
            if byte & 0xC0 != 0x80:  # the start of the last character
                need = 1 if byte < 0x80 else 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
                if need > back:
                    data = data[: end - back]
                break
    return data.decode("utf-8", errors="replace")


def cap_text(text: str, limit: int, secrets: Iterable[str] = ()) -> str:
    """``text`` (a file's head, read with ``SECRET_ROOM`` bytes to spare) cut to its first
    ``limit`` bytes: a known secret crossing the cut is masked whole instead of leaving its
    start behind."""
    data = text.encode("utf-8", errors="surrogatepass")
    if len(data) <= limit:
        return text
    end = len(decode_head(data[:limit], True))
    return masked_head(text, end, secrets)


def byte_size(count: int) -> str:
    """``10 MiB``, ``4 KiB`` or ``1000 bytes``: a size limit as messages name it."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= size and count % size == 0:
            return f"{count // size} {unit}"
    return f"{count} bytes"


def cut_marker(limit: int) -> str:
    """What ends an answer cut at ``limit`` bytes: ``\n[agentv: output cut at 10 MiB]``."""
    return f"\n[agentv: output cut at {byte_size(limit)}]"


class _Capture:
    """Collects one stream: a capped buffer (the tail kept, or with ``head`` the start)
    plus optional line callbacks. The buffer holds ``SECRET_ROOM`` bytes beyond the cap;
    ``truncated`` says that more than the cap arrived."""

    def __init__(
        self, name: str, limit: int, on_line: LineSink | None, *, head: bool = False
    ) -> None:
        self.name = name
        self.limit = limit
        self.keep = limit + SECRET_ROOM
        self.on_line = on_line
        self.head = head
        self.buffer = bytearray()
        self.received = 0
        self._partial = b""

    @property
    def truncated(self) -> bool:
        return self.received > self.limit

    def feed(self, chunk: bytes) -> None:
        self.received += len(chunk)
        if self.head:
            # the rest is read (the child must not block) and dropped
            self.buffer += chunk[: max(self.keep - len(self.buffer), 0)]
        else:
            self.buffer += chunk
            overflow = len(self.buffer) - self.keep
            if overflow > 0:
                del self.buffer[:overflow]
        if self.on_line is not None:
            data = self._partial + chunk
            *lines, self._partial = data.split(b"\n")
            for line in lines:
                self._emit(line)

    def finish(self) -> None:
        if self.on_line is not None and self._partial:
            self._emit(self._partial)
        self._partial = b""

    def _emit(self, line: bytes) -> None:
        assert self.on_line is not None
        text = line.decode("utf-8", errors="replace").rstrip("\r")
        with contextlib.suppress(Exception):  # a broken log sink must not break the run
            self.on_line(self.name, text)

    def text(self, secrets: Iterable[str] = ()) -> str:
        """What was kept, cut to the cap; known secrets (the case's and ``secrets``) that
        cross the cut are masked whole instead of leaving a part behind."""
        data = bytes(self.buffer)
        if not self.truncated:
            return data.decode("utf-8", errors="replace")
        if self.head:
            whole = decode_head(data, self.received > len(data))
            return masked_head(whole, len(decode_head(data[: self.limit], True)), secrets)
        whole = data.decode("utf-8", errors="replace")
        start = len(data[: len(data) - self.limit].decode("utf-8", errors="replace"))
        return masked_tail(whole, start, secrets)


class _PipeReader(asyncio.Protocol):
    """Feeds one output pipe into its ``_Capture``. The pipe's transport is ours (not the
    subprocess transport's), so a pipe that a leftover grandchild still holds open can be
    closed without waiting for it."""

    def __init__(self, capture: _Capture) -> None:
        self.capture = capture
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def data_received(self, data: bytes) -> None:
        self.capture.feed(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.capture.finish()
            self.done.set_result(None)


async def _open_reader(
    read_fd: int, capture: _Capture
) -> tuple[asyncio.BaseTransport, _PipeReader]:
    """Reads the pipe end ``read_fd`` (taken over: closed with the transport)."""
    pipe = os.fdopen(read_fd, "rb", buffering=0)
    try:
        return await asyncio.get_running_loop().connect_read_pipe(
            lambda: _PipeReader(capture), pipe
        )
    except BaseException:
        pipe.close()
        raise


async def _write(pipe: asyncio.StreamWriter | None, data: bytes | None) -> None:
    if pipe is None:
        return
    try:
        if data:
            pipe.write(data)
            await pipe.drain()
    except (BrokenPipeError, ConnectionResetError):
        pass  # the child does not read its input; that is its business
    finally:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError, OSError):
            pipe.close()
            await pipe.wait_closed()


# --- binding children to agentv's life -------------------------------------------------------

#: The watchdog: reads "+PGID" / "-PGID" lines; at end of input (agentv is gone, whatever
#: killed it) it kills every group still listed.
_WATCHDOG_SCRIPT = """
import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)
groups = set()
for line in sys.stdin.buffer:
    try:
        pgid = int(line[1:])
    except ValueError:
        continue
    if line[:1] == b"+":
        groups.add(pgid)
    else:
        groups.discard(pgid)
for pgid in groups:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass
"""


class _Watchdog:
    """agentv's side of the watchdog: which process groups must die with agentv."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._pid: int | None = None  # the process that started it (a fork must not use it)
        self._broken = False
        self._kept: set[int] = set()  # groups left running after their call ended

    def _start(self) -> int | None:
        if self._fd is not None and self._pid == os.getpid():
            return self._fd
        if self._broken or not sys.executable or not hasattr(os, "posix_spawn"):
            return None
        read_end, write_end = os.pipe()  # both close on exec: agents never hold them
        try:
            os.posix_spawn(
                sys.executable,
                [sys.executable, "-I", "-S", "-c", _WATCHDOG_SCRIPT],
                {k: v for k, v in os.environ.items() if k in ("PATH", "SYSTEMROOT")},
                file_actions=[(os.POSIX_SPAWN_DUP2, read_end, 0)],
                setpgroup=0,  # out of the terminal's group: Ctrl-C is agentv's to handle
            )
        except OSError:
            os.close(write_end)
            self._broken = True
            return None
        finally:
            os.close(read_end)
        self._fd, self._pid, self._kept = write_end, os.getpid(), set()
        return write_end

    def _send(self, line: str) -> None:
        fd = self._start()
        if fd is None:
            return
        try:
            os.write(fd, line.encode())
        except OSError:  # the watchdog is gone; PDEATHSIG and cancellation still apply
            self._broken = True
            self._fd = None
            with contextlib.suppress(OSError):
                os.close(fd)

    def prepare(self) -> None:
        """Start the watchdog now, so that ``watch`` right after a spawn is one write: the
        child is unwatched for as short a time as can be."""
        with self._lock:
            self._start()

    def watch(self, pgid: int) -> None:
        """Kill group ``pgid`` when agentv dies (until ``release``)."""
        with self._lock:
            for kept in [g for g in self._kept if not _group_alive(g)]:
                self._kept.discard(kept)
                self._send(f"-{kept}\n")
            self._send(f"+{pgid}\n")

    def release(self, pgid: int) -> None:
        """The call of group ``pgid`` ended: forget it once it is empty (a group number may
        be reused after that); a group with processes left stays watched."""
        with self._lock:
            if _group_alive(pgid):
                self._kept.add(pgid)
            else:
                self._send(f"-{pgid}\n")


_watchdog = _Watchdog()


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: the group exists, its processes are just not ours to signal
        pass
    return True


def _parent_death_hook() -> Callable[[], None] | None:
    """A ``preexec_fn`` giving the child ``PR_SET_PDEATHSIG`` = SIGKILL (Linux only)."""
    if not _LINUX:
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # pragma: no cover - a libc without prctl
        return None
    parent = os.getpid()

    def bind() -> None:
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != parent:  # agentv died while this child was starting
            os._exit(137)

    return bind


#: ``prctl`` options (linux/prctl.h)
_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36

#: The reaper (Linux): runs ``argv[1]`` with the arguments ``argv[2:]`` as its only child;
#: being a child subreaper (set before it starts: ``_reaper_hook``), it adopts every
#: process below it that loses its parent. When its child exits it SIGKILLs what is left
#: below it, reaps it, and exits as its child did (the same code, or the same signal).
#: agentv's death reaches it as SIGUSR1 (its parent-death signal), on which it does the
#: same at once: its child needs no binding of its own (no ``ctypes`` to load per call).
_REAPER_SCRIPT = r"""
import os, signal, sys
program, argv = sys.argv[1], sys.argv[2:]
reaper = os.getpid()
def below():
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                stat = fh.read()
            if int(stat[stat.rindex(b")") + 2 :].split()[1]) == reaper:
                found.append(int(name))
        except (OSError, ValueError, IndexError):
            continue
    return found
def reap():
    for _ in range(1000):  # each round kills a layer: what they started is adopted here
        left = below()
        if not left:
            return
        for child in left:
            try:
                os.kill(child, signal.SIGKILL)
            except OSError:
                pass
        for child in left:
            try:
                os.waitpid(child, 0)
            except OSError:
                pass
def orphaned(signum, frame):  # agentv died (the parent-death signal): nothing outlives it
    reap()
    os._exit(137)
signal.signal(signal.SIGUSR1, orphaned)
if os.getppid() == 1:
    orphaned(0, None)
pid = os.fork()
if pid == 0:
    signal.signal(signal.SIGUSR1, signal.SIG_DFL)
    for name in ("SIGPIPE", "SIGXFSZ"):  # Python ignores them; the program must not
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
    try:
        os.execv(program, argv)
    except OSError as exc:
        os.write(2, f"{program}: {exc.strerror}\n".encode())
        os._exit(127)
while True:
    try:
        _, status = os.waitpid(pid, 0)
        break
    except InterruptedError:
        continue
reap()
if os.WIFSIGNALED(status):
    sig = os.WTERMSIG(status)
    try:
        signal.signal(sig, signal.SIG_DFL)
    except (OSError, ValueError):  # SIGKILL and SIGSTOP have no handler to reset
        pass
    os.kill(reaper, sig)
os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)
"""


def _reaper_hook() -> Callable[[], None] | None:
    """A ``preexec_fn`` making the child a child subreaper (kept across ``exec``) bound to
    agentv: when agentv dies the reaper gets SIGUSR1, on which it kills everything below
    it and exits (Linux only; None when ``_parent_death_hook`` cannot bind children)."""
    if _parent_death_hook() is None:
        return None
    import ctypes

    prctl = ctypes.CDLL(None, use_errno=True).prctl
    parent = os.getpid()

    def hook() -> None:
        prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGUSR1), 0, 0, 0)
        if os.getppid() != parent:  # agentv died while this child was starting
            os._exit(137)

    return hook


def _reaped(
    command: Sequence[str] | str, env: Mapping[str, str], cwd: Path | str | None
) -> list[str] | None:
    """The argument list that runs ``command`` under the reaper, or None to run it as it
    is (not Linux; no Python to run the reaper with; a program that is not found, which
    must fail to start here, as ``OSError``)."""
    if not _LINUX or not sys.executable:
        return None
    if isinstance(command, str):
        program, argv = "/bin/sh", ["/bin/sh", "-c", command]
    else:
        argv = list(command)
        if not argv:
            return None
        name = argv[0]
        if os.sep in name:
            found = os.path.join(str(cwd), name) if cwd is not None else name
            found = found if os.access(found, os.X_OK) and os.path.isfile(found) else None
        else:
            found = shutil.which(name, path=env.get("PATH", os.defpath))
        if found is None:
            return None
        program = found
    return [sys.executable, "-I", "-S", "-c", _REAPER_SCRIPT, program, *argv]


def _process_tree(pid: int) -> dict[int, bytes]:
    """Every descendant of ``pid`` (Linux: read from ``/proc``), with its start time, so a
    process that left the group (``setsid``) can still be found while ``pid`` lives."""
    if not _LINUX:
        return {}
    children: dict[int, list[int]] = {}
    starts: dict[int, bytes] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return {}
    for name in entries:
        if not name.isdigit():
            continue
        fields = _stat_fields(int(name))
        if fields is None:
            continue
        children.setdefault(int(fields[1]), []).append(int(name))
        starts[int(name)] = fields[19]
    found: dict[int, bytes] = {}
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found[child] = starts[child]
                todo.append(child)
    return found


def _stat_fields(pid: int) -> list[bytes] | None:
    """``/proc/PID/stat`` after the command name: state, ppid, ..., starttime at [19]."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
        return stat[stat.rindex(b")") + 2 :].split()
    except (OSError, ValueError):
        return None


def _signal_tree(tree: dict[int, bytes], sig: int) -> None:
    """Send ``sig`` to each process of ``tree`` that is still the same process."""
    for pid, started in tree.items():
        fields = _stat_fields(pid)
        if fields is None or len(fields) < 20 or fields[19] != started:
            continue  # gone, or its number now belongs to another process
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


#: the variable every child gets (a value of its own per call): whatever it starts inherits
#: it, so its descendants are found by it even after the child exited and they were
#: adopted by another process (the tree no longer leads to them)
TAG_VARIABLE = "AGENTV_PROCESS_TAG"


def _tagged(tag: str) -> dict[int, bytes]:
    """Every live process (Linux: read from ``/proc``) whose environment holds ``tag`` (as
    ``TAG_VARIABLE``), with its start time; a process of another user is not readable,
    and not ours to kill."""
    if not _LINUX:
        return {}
    entry = f"{TAG_VARIABLE}={tag}".encode() + b"\0"
    found: dict[int, bytes] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return {}
    for name in names:
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        if data.startswith(entry) or b"\0" + entry in data:
            fields = _stat_fields(int(name))
            if fields is not None and len(fields) > 19:
                found[int(name)] = fields[19]
    return found


def _kill_leftovers(proc: asyncio.subprocess.Process, tag: str) -> None:
    """SIGKILL whatever the child left running when it exited on its own: its group, and
    every process that carries its tag (those that left the group with ``setsid``)."""
    _signal_group(proc, signal.SIGKILL)
    _signal_tree(_tagged(tag), signal.SIGKILL)


def _kill_everything(proc: asyncio.subprocess.Process, tag: str = "") -> None:
    """SIGKILL the child's group and every descendant that left it."""
    tree = _process_tree(proc.pid) if proc.returncode is None else {}
    if tag:
        tree.update(_tagged(tag))
    _signal_group(proc, signal.SIGKILL)
    _signal_tree(tree, signal.SIGKILL)


def _signal_group(proc: asyncio.subprocess.Process, sig: int) -> None:
    """Send ``sig`` to the child's whole process group (POSIX) or to the child itself."""
    if _POSIX:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
    elif proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()


async def _exited(proc: asyncio.subprocess.Process) -> int:
    """Wait for the child itself to exit.

    ``Process.wait()`` also waits until every pipe is closed, which a grandchild that
    inherited them can delay for as long as it lives; the return code is known earlier.
    """
    delay = 0.005
    while proc.returncode is None:
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.05)
    return proc.returncode


async def _terminate(proc: asyncio.subprocess.Process, tag: str = "") -> None:
    """SIGTERM the group and every descendant that left it, give them a moment, then
    SIGKILL whatever is left."""
    tree = _process_tree(proc.pid)  # before anything dies: orphans lose their parent
    if tag:
        tree.update(_tagged(tag))
    _signal_group(proc, signal.SIGTERM)
    _signal_tree(tree, signal.SIGTERM)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(_exited(proc), TERMINATE_GRACE_S)
    # Even when the leader is gone, a child that ignored SIGTERM may remain in the group.
    _signal_group(proc, signal.SIGKILL)
    _signal_tree(tree, signal.SIGKILL)
    await _exited(proc)


async def run_process(
    command: Sequence[str] | str,
    *,
    cwd: Path | str | None = None,
    env: Mapping[str, str] | None = None,
    stdin: str | bytes | None = None,
    timeout: float | None = None,
    max_output: int = DEFAULT_MAX_OUTPUT,
    on_line: LineSink | None = None,
    keep_children: bool = False,
    stdout_head: int | None = None,
    secrets: Iterable[str] = (),
) -> ProcessResult:
    """Run ``command`` and wait for it, killing its whole process group on timeout.

    ``command`` is an argument list (run directly, no shell) or a string (run by the
    system shell; the caller quotes every value it substitutes into it). ``env`` replaces
    the environment (pass ``os.environ`` merged with extras to inherit it). ``stdin`` is
    written to the child and then closed; without it the child reads from ``/dev/null``.
    ``on_line`` receives each complete output line as it arrives (for live logs).
    Each of stdout and stderr keeps its last ``max_output`` bytes; with ``stdout_head``
    (stdout is an answer), stdout keeps its first ``stdout_head`` bytes instead. A secret
    crossing such a cut (the case's, see ``agentv.system.masking``, or one of ``secrets``) is
    masked whole rather than cut in two.

    When the main process has exited, children it left behind are killed if they still
    hold the output pipes (they would otherwise block the call for as long as they live).
    With ``keep_children`` (a launcher such as ``code`` may leave an editor running on
    purpose) output goes through temporary files instead, nothing waits on leftovers and
    nothing kills them. Cancelling the caller kills the group in every case.

    Raises ``OSError`` when the program cannot be started (not found, not executable) and
    ``NotADirectoryError`` when ``cwd`` is not a folder.
    """
    if cwd is not None and not Path(cwd).is_dir():
        raise NotADirectoryError(f"working directory {str(cwd)!r} does not exist")
    if keep_children and on_line is not None:
        raise ValueError("on_line needs pipes; it cannot be combined with keep_children")
    data = stdin.encode("utf-8") if isinstance(stdin, str) else stdin
    tag = os.urandom(8).hex()
    env = {**(os.environ if env is None else env), TAG_VARIABLE: tag}
    with contextlib.ExitStack() as files:
        if keep_children:
            out_sink: Any = files.enter_context(tempfile.TemporaryFile())
            err_sink: Any = files.enter_context(tempfile.TemporaryFile())
        # stdout and stderr through pipes of our own: their read transports are ours to
        # close when a leftover still holds a write end (docs/architecture.md)
        pipes = [] if keep_children else [os.pipe(), os.pipe()]
        if pipes:
            out_sink, err_sink = pipes[0][1], pipes[1][1]
        options: dict[str, Any] = {
            "cwd": str(cwd) if cwd is not None else None,
            "env": env,
            "stdin": asyncio.subprocess.PIPE if data is not None else asyncio.subprocess.DEVNULL,
            "stdout": out_sink,
            "stderr": err_sink,
        }
        reaped = None if keep_children else _reaped(command, env, cwd)
        if _POSIX:
            options["start_new_session"] = True  # own session and group: killable as one
            hook = _reaper_hook() if reaped is not None else _parent_death_hook()
            if hook is not None:
                options["preexec_fn"] = hook
            else:
                reaped = None  # a reaper that is not a subreaper would adopt nothing
        else:  # pragma: no cover - exercised on Windows only
            options["creationflags"] = 0x00000200  # CREATE_NEW_PROCESS_GROUP
        # A launcher's detached children (keep_children) are meant to outlive the call.
        watched = _POSIX and not keep_children
        if watched:
            _watchdog.prepare()
        started = time.monotonic()
        unread = [read_fd for read_fd, _ in pipes]  # read ends not yet handed to a reader
        files.callback(lambda: [os.close(fd) for fd in unread])
        try:
            if reaped is not None:
                proc = await asyncio.create_subprocess_exec(*reaped, **options)
            elif isinstance(command, str):
                proc = await asyncio.create_subprocess_shell(command, **options)
            else:
                proc = await asyncio.create_subprocess_exec(*command, **options)
        finally:
            for _, write_fd in pipes:  # the child has them; we must not (or no EOF ever)
                os.close(write_fd)
        if watched:
            _watchdog.watch(proc.pid)

        if stdout_head is not None:
            out = _Capture("stdout", stdout_head, on_line, head=True)
        else:
            out = _Capture("stdout", max_output, on_line)
        err = _Capture("stderr", max_output, on_line)
        transports: list[asyncio.BaseTransport] = []
        io_tasks: list[asyncio.Future[None]] = [asyncio.ensure_future(_write(proc.stdin, data))]
        timed_out = False
        try:
            for capture in (out, err)[: len(pipes)]:
                transport, reader = await _open_reader(unread.pop(0), capture)
                transports.append(transport)
                io_tasks.append(reader.done)
            try:
                await asyncio.wait_for(_exited(proc), timeout)
            except TimeoutError:
                timed_out = True
                await _terminate(proc, tag)
            else:
                if not keep_children:  # done: nothing it started outlives it
                    _kill_leftovers(proc, tag)
            _, pending = await asyncio.wait(io_tasks, timeout=DRAIN_TIMEOUT_S)
            if pending and not keep_children:
                _signal_group(proc, signal.SIGKILL)
                _, pending = await asyncio.wait(pending, timeout=DRAIN_TIMEOUT_S)
            if pending:
                # pipes still held by a process outside the group: stop listening to them
                for transport in transports:
                    transport.close()  # its reader finishes its capture
                io_tasks[0].cancel()  # the writer, if the child never read its input
                await asyncio.gather(*pending, return_exceptions=True)
            else:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(proc.wait(), DRAIN_TIMEOUT_S)
        except BaseException:
            # Cancelled (an outer timeout, SIGINT or SIGTERM) or failing: leave nothing
            # running behind us.
            _kill_everything(proc, tag)
            for task in io_tasks:
                task.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(proc.wait(), TERMINATE_GRACE_S)
            raise
        finally:
            for transport in transports:
                transport.close()
            if watched:
                _watchdog.release(proc.pid)
        if keep_children:
            for sink, capture in ((out_sink, out), (err_sink, err)):
                sink.seek(0)
                while chunk := sink.read(65536):  # the cap holds here too
                    capture.feed(chunk)
                capture.finish()
    return ProcessResult(
        command=command if isinstance(command, str) else list(command),
        pid=proc.pid,
        exit_code=proc.returncode,
        stdout=out.text(secrets),
        stderr=err.text(secrets),
        timed_out=timed_out,
        duration_s=time.monotonic() - started,
        stdout_truncated=out.truncated,
        stderr_truncated=err.truncated,
        stdout_bytes=out.received,
    )
