"""The release workflow (``.github/workflows/release.yml``, docs/install.md "Releasing") is
never run here: it is checked against GitHub's workflow schema (check-jsonschema's copy of
it, no network), and for what trusted publishing needs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from support.paths import ROOT

WORKFLOW = ROOT / ".github" / "workflows" / "release.yml"


@pytest.mark.slow
def test_the_release_workflow_fits_githubs_schema() -> None:
    checker = Path(sys.executable).with_name("check-jsonschema")
    done = subprocess.run(
        [str(checker), "--builtin-schema", "vendor.github-workflows", str(WORKFLOW)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == "ok -- validation done\n"


def test_the_release_workflow_publishes_tags_with_trusted_publishing() -> None:
    flow = yaml.safe_load(WORKFLOW.read_text())
    # PyYAML reads the key `on` as True (YAML 1.1); GitHub reads it as "on"
    assert flow[True] == {"push": {"tags": ["v*"]}}
    assert flow["permissions"] == {"contents": "read"}  # nothing more, except to publish
    build, publish = flow["jobs"]["build"], flow["jobs"]["publish"]
    runs = [step.get("run", "") for step in build["steps"]]
    assert "make install && .venv/bin/python -m pytest tests/test_wheel.py" in runs
    assert "make dist" in runs
    assert publish["needs"] == "build"
    assert publish["permissions"] == {"id-token": "write"}  # an OIDC token, no stored secret
    assert publish["environment"]["name"] == "pypi"
    assert [s.get("uses") for s in publish["steps"]] == [
        "actions/download-artifact@v4",
        "pypa/gh-action-pypi-publish@release/v1",
    ]
    assert "secrets" not in WORKFLOW.read_text()
