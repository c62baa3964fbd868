"""Errors and diagnostics.

Every error a user can cause is an ``AgentVError`` whose message is written for the user:
what is wrong, where, and what to do. Nothing below ever shows a traceback to a user.

    AgentVError
      InputError            what a file holds is wrong (eval, targets, config, results
                            files), or the paths given hold no such file
        NoCasesError        the paths hold no case that can run
      ConfigError           settings and options cannot be used as given: a command-line
                            flag or API option, a target that is missing or misconfigured
        SetupError          the run's environment lacks something: a variable a target
                            reads, an SDK, a program, a file that cannot be written
          ResultsFileError  the results file could not be written
      ProviderError         a target failed to answer; carries the target name
        ProviderHTTPError   the API answered with an error status
        ProviderTimeout     no answer in time
        AgentProcessError   an agent or command exited badly
      EvaluatorError        an evaluator could not grade (recorded, never fatal)
      WorkspaceError        a case's workspace could not be made or set up (a repository,
                            a hook, the disk limit): its case is an error, never fatal
      BudgetReached         the run's spend reached ``--budget-usd``: a request was not
                            sent (its case is recorded ``skipped``, never fatal)
      ClusterLostError      the run stopped: the Ray cluster it ran on was lost (what it
                            finished is in the results file, and in ``run``)

The three kinds a run can stop on say where to look: the file (``InputError``), the
settings and options (``ConfigError``), or the machine (``SetupError``).

``Diagnostic`` is one problem found in a file, with its location; loaders collect them all
instead of stopping at the first. ``Problem`` is one found in a block of settings before it
is placed in its file (an evaluator's ``check``): the loader locates it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Severity = Literal["error", "warning"]


@dataclass(slots=True)
class Diagnostic:
    """One problem in a user's file, with where it is and how to fix it.

    Attributes:
        file: The file (None: not from a file).
        message: What is wrong.
        severity: ``"error"`` or ``"warning"``.
        line: The line, 1-based, when known.
        column: The column, 1-based, when known.
        hint: How to fix it.
        location: Where the value is inside the file, such as
            ``evalcases[2].input_messages[0].role``.
    """

    file: Path | None
    message: str
    severity: Severity = "error"
    line: int | None = None  # 1-based
    column: int | None = None  # 1-based
    hint: str | None = None
    location: str | None = None  # e.g. evalcases[2].input_messages[0].role

    def where(self) -> str:
        """Where the problem is.

        Returns:
            The file, line and column, as much as is known, joined by colons (``<input>``
            for no file).
        """
        parts = [str(self.file) if self.file else "<input>"]
        if self.line is not None:
            parts.append(str(self.line))
            if self.column is not None:
                parts.append(str(self.column))
        return ":".join(parts)

    def format(self) -> str:
        """The problem as the command line prints it.

        Returns:
            One line (file, line and column, severity, message, joined by colons), then
            an indented hint line.
        """
        text = f"{self.where()}: {self.severity}: {self.message}"
        if self.hint:
            text += f"\n    hint: {self.hint}"
        return text


@dataclass(frozen=True, slots=True)
class Problem:
    """One problem with a block's settings, found before they are used: ``key`` is the key
    it is about (a path of keys for a nested one: ``("expected", 2, "args_schema")``),
    ``message`` what is wrong and ``hint`` how to fix it. The loader makes it a
    ``Diagnostic`` at that key."""

    key: str | tuple[str | int, ...]
    message: str
    hint: str

    @property
    def path(self) -> tuple[str | int, ...]:
        """``key`` as a path of keys."""
        return self.key if isinstance(self.key, tuple) else (self.key,)


class DiagnosticsView:
    """``errors`` and ``warnings`` for anything holding a ``diagnostics`` list."""

    diagnostics: list[Diagnostic]

    @property
    def errors(self) -> list[Diagnostic]:
        """Diagnostics of severity error."""
        return [d for d in self.diagnostics if d.severity == "error"]

    @property
    def warnings(self) -> list[Diagnostic]:
        """Diagnostics of severity warning."""
        return [d for d in self.diagnostics if d.severity == "warning"]


class AgentVError(Exception):
    """Base of every error agentv raises on purpose.

    Its message is written for the user: what is wrong, where, and what to do.
    """


class InputError(AgentVError):
    """A user's file cannot be used (an eval, targets, config or results file).

    Args:
        message: What is wrong.
        diagnostics: Every problem found, each with its file, line and hint.

    Attributes:
        diagnostics: Every problem found, each with its file, line and hint (its text is
            the error's when there are any).
    """

    def __init__(self, message: str, diagnostics: list[Diagnostic] | None = None) -> None:
        super().__init__(message)
        self.diagnostics: list[Diagnostic] = diagnostics or []

    def __str__(self) -> str:
        if not self.diagnostics:
            return self.args[0]
        return "\n".join(d.format() for d in self.diagnostics)


class NoCasesError(InputError):
    """The paths hold no case that can run.

    There is none at all, or none is left after ``eval_id`` and the cases that have errors;
    ``diagnostics`` says why cases were left out.
    """

    def __str__(self) -> str:
        return str(self.args[0])  # the reasons are in `diagnostics`, printed on their own


class ConfigError(AgentVError):
    """Settings and options that cannot be used as given.

    A command-line flag or API option out of range, a target that is missing or cannot be
    built, a ``judge_target`` naming no target, no eval files found.
    """


class SetupError(ConfigError):
    """What the run needs of its environment is missing.

    A variable a target reads is not set, a provider's SDK is not installed, a program is
    not found, a file cannot be written. It is a ``ConfigError``: code that catches those
    catches these too.
    """


class ResultsFileError(SetupError):
    """The results file could not be written (disk full, file removed, writer closed)."""


class ProviderError(AgentVError):
    """A target failed to produce an answer. The message never contains a secret.

    A run records it on its case and goes on; it is never raised by a run.

    Args:
        target: The target's name.
        message: What went wrong.
        status: The HTTP status, when the API answered with one.
        retryable: Asking again may help.
        retry_after: Seconds to wait before asking again, when the API said.
        attempts: Requests made before giving up.

    Attributes:
        target: The target's name.
        status: The HTTP status, when the API answered with one.
        retryable: Asking again may help.
        retry_after: Seconds to wait before asking again, when the API said.
        attempts: Requests made before giving up.
    """

    def __init__(
        self,
        target: str,
        message: str,
        *,
        status: int | None = None,
        retryable: bool = False,
        retry_after: float | None = None,
        attempts: int = 1,
    ) -> None:
        super().__init__(message)
        self.target = target
        self.status = status
        self.retryable = retryable
        self.retry_after = retry_after
        self.attempts = attempts  # requests made before giving up


class ProviderHTTPError(ProviderError):
    """The API answered with an error status."""


class ProviderTimeout(ProviderError):
    """The target did not answer in time (always retryable per case)."""

    def __init__(self, target: str, message: str) -> None:
        super().__init__(target, message, retryable=True)


class AgentProcessError(ProviderError):
    """A command-line agent failed: exit code and the tail of its stderr."""

    def __init__(
        self, target: str, message: str, *, exit_code: int | None = None, stderr_tail: str = ""
    ) -> None:
        super().__init__(target, message)
        self.exit_code = exit_code
        self.stderr_tail = stderr_tail


class EvaluatorError(AgentVError):
    """An evaluator could not grade an answer; recorded on the result, never fatal."""


class WorkspaceError(AgentVError):
    """A case's workspace could not be made, reset or set up: a repository that cannot be
    cloned or has no such commit, a hook that failed, the run's workspaces over their disk
    limit. Recorded on its case (status ``error``), never fatal to the run.

    Attributes:
        record: What the workspace got to before it failed (its hooks), for the case's
            record (None: nothing yet).
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.record: dict[str, object] | None = None


class BudgetReached(AgentVError):
    """A request was not sent: the run had spent its ``--budget-usd`` (docs/running.md,
    "A budget"). Its case is recorded as ``skipped``; the run goes on with the requests in
    flight and sends nothing more."""

    def __init__(self, budget: float, spent: float) -> None:
        super().__init__(
            f"not run: the run's spend reached its budget (${spent:.4f} of ${budget:g}) "
            "before this case's request was sent"
        )
        self.budget = budget
        self.spent = spent


class ClusterLostError(AgentVError):
    """The run stopped before every case ran: the Ray cluster it ran on was lost.

    Its head, or the driver's node, was lost. Every case that finished is in the results
    file, which a run with ``resume`` completes.

    Args:
        message: What was lost, and what to do.
        run: What finished.

    Attributes:
        run: The ``agentv.EvalRun`` of what finished (None when the run could not be summed
            up).
    """

    def __init__(self, message: str, run: object = None) -> None:
        super().__init__(message)
        self.run = run
