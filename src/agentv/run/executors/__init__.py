"""Where cases run: on this machine (the default, ``agentv.run.orchestrator`` alone) or on a
Ray cluster (``--executor ray``, ``agentv.run.executors.ray_cluster``).

Every executor runs the same per-case pipeline (``agentv.run.pipeline``); only where it runs
changes. The driver (this process) plans the run, writes every result, shows progress and
the summary, whatever the executor. Ray is imported only when it is used.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from typing import TYPE_CHECKING

from agentv.errors import ConfigError, SetupError
from agentv.system.extras import install_line

if TYPE_CHECKING:
    from agentv.run.orchestrator import Executor

EXECUTORS = ("local", "ray")


def make_executor(
    name: str,
    *,
    ray_address: str | None = None,
    ray_cpus_per_case: float | None = None,
    env: Mapping[str, str] | None = None,
) -> Executor | None:
    """The executor called ``name`` (None for ``local``: the orchestrator runs the cases
    itself). Checks the options and, for Ray, that Ray is installed; starts nothing."""
    if name not in EXECUTORS:
        raise ConfigError(f"executor must be one of {', '.join(EXECUTORS)} (got {name!r})")
    if name == "local":
        if ray_address is not None or ray_cpus_per_case is not None:
            raise ConfigError("--ray-address and --ray-cpus-per-case need --executor ray")
        return None
    if ray_cpus_per_case is not None and not ray_cpus_per_case > 0:
        raise ConfigError(f"--ray-cpus-per-case must be above 0 (got {ray_cpus_per_case:g})")
    if importlib.util.find_spec("ray") is None:
        raise SetupError(
            "--executor ray needs Ray, which is not installed; install agentv's `ray` extra: "
            + install_line("ray")
        )
    from agentv.run.executors.ray_cluster import RayExecutor

    return RayExecutor(
        address=ray_address,
        cpus_per_case=1.0 if ray_cpus_per_case is None else ray_cpus_per_case,
        env=dict(env or {}),
    )
