"""agentv: evaluate LLMs and AI agents on multi-turn eval suites written in YAML.

The public Python API is ``__all__`` (docs/python-api.md)::

    import agentv

    run = agentv.run_eval("evals/", target="default")
    print(run.summary.total, run.summary.mean, run.summary.errors)

Every name is ``agentv.api``'s (the front door, which says where each comes from),
imported on first use, so ``import agentv`` and ``agentv --version`` stay fast; provider
SDKs are imported only when a target that needs them is used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from agentv._version import __version__

__all__ = [
    "AgentVError",
    "Calibration",
    "ClusterLostError",
    "Comparison",
    "ConfigError",
    "Diagnostic",
    "Estimate",
    "EvalResult",
    "EvalRun",
    "InputError",
    "NoCasesError",
    "PreparedRun",
    "Preview",
    "ProviderError",
    "PythonTarget",
    "Regrade",
    "Report",
    "ResultsFile",
    "RunOptions",
    "SetupError",
    "StoredRun",
    "Summary",
    "Validation",
    "__version__",
    "aregrade",
    "arun_eval",
    "calibrate",
    "compare",
    "estimate",
    "load_eval_file",
    "prepare_run",
    "preview",
    "read_results",
    "regrade",
    "render",
    "report",
    "run_eval",
    "runs",
    "validate",
    "write_junit",
]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'agentv' has no attribute {name!r}")
    value = getattr(importlib.import_module("agentv.api"), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:
    from agentv.api import (
        AgentVError,
        Calibration,
        ClusterLostError,
        Comparison,
        ConfigError,
        Diagnostic,
        Estimate,
        EvalResult,
        EvalRun,
        InputError,
        NoCasesError,
        PreparedRun,
        Preview,
        ProviderError,
        PythonTarget,
        Regrade,
        Report,
        ResultsFile,
        RunOptions,
        SetupError,
        StoredRun,
        Summary,
        Validation,
        aregrade,
        arun_eval,
        calibrate,
        compare,
        estimate,
        load_eval_file,
        prepare_run,
        preview,
        read_results,
        regrade,
        render,
        report,
        run_eval,
        runs,
        validate,
        write_junit,
    )
