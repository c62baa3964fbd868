"""agentv installed from its wheel, as a user installs it into a project of their own
(docs/install.md): the sdist and the wheel built from this checkout (as ``make dist``
builds them), the wheel installed into a fresh virtual environment in a folder outside the
repository, and agentv run there: ``--version``, ``init``, an offline ``eval`` and a
``report`` (the package's templates and assets came along).

No network: uv builds and installs from its cache only (``UV_OFFLINE``), which ``make
install`` filled. The environment gets the locked set first (``uv export --frozen`` as a
``pylock.toml``, installed as it is: nothing to resolve, so no package index is asked), then
the wheel with ``--no-deps``; ``uv pip check`` then says the wheel's own requirements are
met by it, as a user's resolving install would meet them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from support.paths import ROOT

pytestmark = pytest.mark.slow


def _uv() -> str:
    """The uv ``make install`` bootstrapped (``.tools/``), else one on PATH."""
    found = ROOT / ".tools" / "bin" / "uv"
    if found.exists():
        return str(found)
    on_path = shutil.which("uv")
    assert on_path is not None, "no uv: run `make install` (it bootstraps uv into .tools/)"
    return on_path


def _run(*args: str | Path, cwd: Path, env: dict[str, str]) -> str:
    done = subprocess.run(
        [str(a) for a in args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"{args}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_the_wheel_installs_and_runs_outside_the_repository(tmp_path: Path) -> None:
    uv = _uv()
    # a user's environment: nothing of this checkout's venv, no key, offline
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("VIRTUAL_ENV", "PYTHONPATH", "UV_PROJECT_ENVIRONMENT")
        and not k.endswith("_API_KEY")
    }
    env |= {"UV_OFFLINE": "1", "UV_PYTHON_DOWNLOADS": "never", "CI": "1"}
    dist = tmp_path / "dist"
    _run(uv, "build", "--out-dir", dist, cwd=ROOT, env=env)
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert sorted(p.name for p in dist.glob("agentv-*")) == [
        f"agentv-{version}-py3-none-any.whl",
        f"agentv-{version}.tar.gz",
    ]
    wheel = dist / f"agentv-{version}-py3-none-any.whl"

    # the locked set, as a lock file uv installs as it is (no resolving: no index needed)
    locked = tmp_path / "pylock.toml"
    _run(
        uv,
        "export",
        "--frozen",
        "--no-dev",
        "--no-emit-project",
        "--format",
        "pylock.toml",
        "--output-file",
        locked,
        cwd=ROOT,
        env=env,
    )
    venv = tmp_path / "elsewhere" / "venv"
    base = Path(sys.base_prefix) / "bin" / "python3"
    _run(uv, "venv", "--python", base, venv, cwd=tmp_path, env=env)
    python = venv / "bin" / "python"
    pip = (uv, "pip", "install", "--preview-features", "pylock", "--python", python)
    _run(*pip, "-r", locked, cwd=tmp_path, env=env)
    _run(*pip, "--no-deps", wheel, cwd=tmp_path, env=env)
    _run(uv, "pip", "check", "--python", python, cwd=tmp_path, env=env)

    project = tmp_path / "elsewhere" / "project"
    project.mkdir()
    agentv = venv / "bin" / "agentv"
    # the installed package, not this checkout's
    where = _run(python, "-c", "import agentv; print(agentv.__file__)", cwd=project, env=env)
    assert Path(where.strip()).is_relative_to(venv), where
    assert _run(agentv, "--version", cwd=project, env=env) == f"{version}\n"

    _run(agentv, "init", cwd=project, env=env)
    assert (project / ".agentv" / "targets.yaml").is_file()
    assert (project / "evals" / "example.yaml").is_file()
    _run(agentv, "validate", "evals/", ".agentv/", cwd=project, env=env)
    _run(agentv, "eval", "evals/", "--out", "first.jsonl", cwd=project, env=env)
    records = [json.loads(line) for line in (project / "first.jsonl").read_text().splitlines()]
    assert sorted((r["eval_id"], r["target"], r["status"]) for r in records) == [
        ("multi-turn", "mock", "ok"),
        ("the-answer", "mock", "ok"),
    ]
    _run(agentv, "report", "first.jsonl", cwd=project, env=env)
    page = (project / "first.html").read_text()
    assert "the-answer" in page and "<script" in page  # the report's assets came along
