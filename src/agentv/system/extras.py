"""The command that adds one of agentv's extras, however agentv was installed.

``pip install 'agentv[openai]'`` works only once agentv is on a package index; an agentv
installed from a wheel or a clone (docs/install.md) gets the same packages from the extra's
own requirements, which its installed metadata lists. So a missing SDK is reported with
those: ``pip install 'openai[aiohttp]>=2.16'``, which works in every case.
"""

from __future__ import annotations

import re
from importlib import metadata

__all__ = ["install_line"]


def install_line(extra: str) -> str:
    """The ``pip install`` line that adds agentv's ``extra`` to the running environment.

    Args:
        extra: The extra's name (``openai``, ``ray``, ``view``...).

    Returns:
        ``pip install 'REQ' ...`` with the extra's requirements as the installed agentv
        declares them (``agentv[extra]`` when its metadata cannot be read).
    """
    wanted = re.compile(rf"""\bextra\s*==\s*["']{re.escape(extra)}["']""")
    try:
        declared = metadata.requires("agentv") or []
    except metadata.PackageNotFoundError:
        declared = []
    found = [
        requirement.strip()
        for requirement, _, marker in (d.partition(";") for d in declared)
        if wanted.search(marker) and not requirement.strip().startswith("agentv")
    ]
    if not found:
        return f"pip install 'agentv[{extra}]'"
    return "pip install " + " ".join(f"'{requirement}'" for requirement in found)
