"""agentv: evaluate LLMs and AI agents on multi-turn eval suites written in YAML.

The public Python API is ``__all__`` (docs/python-api.md)::

    import agentv

    run = agentv.run_eval("evals/", target="default")
    print(run.summary.total, run.summary.mean, run.summary.errors)

Names are imported on first use, so ``import agentv`` and ``agentv --version`` stay fast;
provider SDKs are imported only when a target that needs them is used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from agentv._version import __version__

#: public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "AgentVError": "agentv.errors",
    "Calibration": "agentv.store",
    "ClusterLostError": "agentv.errors",
    "Comparison": "agentv.results.compare",
    "ConfigError": "agentv.errors",
    "Diagnostic": "agentv.errors",
    "Estimate": "agentv.run.estimate",
    "EvalResult": "agentv.results.record",
    "EvalRun": "agentv.api",
    "InputError": "agentv.errors",
    "NoCasesError": "agentv.errors",
    "PreparedRun": "agentv.api",
    "Preview": "agentv.run.preview",
    "ProviderError": "agentv.errors",
    "PythonTarget": "agentv.providers.python",
    "Regrade": "agentv.api",
    "Report": "agentv.results.report",
    "ResultsFile": "agentv.api",
    "RunOptions": "agentv.api",
    "SetupError": "agentv.errors",
    "StoredRun": "agentv.store",
    "Summary": "agentv.results.summary",
    "Validation": "agentv.api",
    "aregrade": "agentv.api",
    "arun_eval": "agentv.api",
    "calibrate": "agentv.api",
    "compare": "agentv.api",
    "estimate": "agentv.api",
    "load_eval_file": "agentv.api",
    "prepare_run": "agentv.api",
    "preview": "agentv.api",
    "read_results": "agentv.api",
    "regrade": "agentv.api",
    "render": "agentv.api",
    "report": "agentv.api",
    "run_eval": "agentv.api",
    "runs": "agentv.api",
    "validate": "agentv.api",
    "write_junit": "agentv.api",
}

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
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'agentv' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:
    from agentv.api import (
        EvalRun,
        PreparedRun,
        Regrade,
        ResultsFile,
        RunOptions,
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
    from agentv.errors import (
        AgentVError,
        ClusterLostError,
        ConfigError,
        Diagnostic,
        InputError,
        NoCasesError,
        ProviderError,
        SetupError,
    )
    from agentv.providers.python import PythonTarget
    from agentv.results.compare import Comparison
    from agentv.results.record import EvalResult
    from agentv.results.report import Report
    from agentv.results.summary import Summary
    from agentv.run.estimate import Estimate
    from agentv.run.preview import Preview
    from agentv.store import Calibration, StoredRun
