"""The install line of an extra is the extra's own requirements, as the installed agentv
declares them: it works for an agentv installed from a wheel or a clone, which
``pip install 'agentv[x]'`` does not before the first release (docs/install.md)."""

from __future__ import annotations

import tomllib

from agentv.system.extras import install_line
from support.paths import ROOT


def test_each_extra_is_its_requirements_from_pyproject() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    for extra, requirements in extras.items():
        if any(r.startswith("agentv[") for r in requirements):
            continue  # `all`: other extras of agentv itself
        quoted = " ".join(f"'{r}'" for r in requirements)
        assert install_line(extra) == f"pip install {quoted}", extra
    assert install_line("view") == (
        "pip install 'starlette>=0.40' 'uvicorn>=0.30' 'markupsafe>=2.1'"
    )


def test_an_extra_the_metadata_does_not_list_is_named_as_an_extra() -> None:
    assert install_line("all") == "pip install 'agentv[all]'"
    assert install_line("nothing") == "pip install 'agentv[nothing]'"
