"""A command-line program pinned on the npm registry, installed once for the tests that run
the real thing (Codex, Claude Code): into ``.cache/NAME`` at the repository root (git ignores
it; not under tests/, which mutmut copies for every run), reused after. Every failure fails
the test with the one command that fixes it; nothing skips."""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from support.paths import ROOT


@dataclass(frozen=True)
class PinnedNpmCli:
    """``package@version`` from npm, whose program is ``command``."""

    package: str  # e.g. "@openai/codex"
    version: str
    command: str  # the program's name in node_modules/.bin
    folder: str  # under .cache/
    title: str  # how messages name it ("the Codex CLI")
    install_minutes: int = 5

    @property
    def cache(self) -> Path:
        return ROOT / ".cache" / self.folder

    @property
    def executable(self) -> Path:
        return self.cache / "node_modules" / ".bin" / self.command

    @property
    def install_args(self) -> list[str]:
        return [
            "npm",
            "install",
            "--prefix",
            str(self.cache),
            "--no-audit",
            "--no-fund",
            "--no-save",
            f"{self.package}@{self.version}",
        ]

    def installed_version(self) -> str | None:
        manifest = self.cache / "node_modules" / self.package / "package.json"
        try:
            return json.loads(manifest.read_text(encoding="utf-8")).get("version")
        except (OSError, ValueError):
            return None

    def _install(self) -> None:
        npm = shutil.which("npm")
        fix = " ".join(self.install_args)
        if npm is None:
            pytest.fail(
                f"npm is not installed, so the pinned {self.title} cannot be installed; "
                "fix: apt-get install -y nodejs npm",
                pytrace=False,
            )
        self.cache.mkdir(parents=True, exist_ok=True)
        pinned = f"{self.package}@{self.version}"
        try:
            done = subprocess.run(
                [npm, *self.install_args[1:]],
                capture_output=True,
                text=True,
                timeout=self.install_minutes * 60,
                check=False,
            )
        except subprocess.TimeoutExpired:
            pytest.fail(
                f"npm did not install {pinned} within {self.install_minutes} minutes; "
                f"fix (then rerun): {fix}",
                pytrace=False,
            )
        if (
            done.returncode != 0
            or self.installed_version() != self.version
            or not self.executable.exists()
        ):
            tail = (done.stderr or done.stdout).strip()[-800:]
            pytest.fail(
                f"npm could not install {pinned} (exit {done.returncode}): {tail}\n"
                f"fix (then rerun): {fix}",
                pytrace=False,
            )

    def ensure(self, version_timeout: float = 120) -> Path:
        """The pinned program, installed when missing and checked to start and say its
        version; a failure fails the test with the command that fixes it."""
        if self.installed_version() != self.version or not self.executable.exists():
            self._install()
        fix = f"rm -rf {self.cache} && {' '.join(self.install_args)}"
        try:
            said = subprocess.run(
                [str(self.executable), "--version"],
                capture_output=True,
                text=True,
                timeout=version_timeout,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            pytest.fail(
                f"the installed {self.title} does not start: {exc}; fix: {fix}", pytrace=False
            )
        output = (said.stdout + said.stderr).strip()
        if said.returncode != 0 or self.version not in output:
            pytest.fail(
                f"`{self.command} --version` said {output!r} (exit {said.returncode}); fix: {fix}",
                pytrace=False,
            )
        return self.executable
