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

__version__ = "0.1.0"

#: public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "AgentVError": "agentv.errors",
    "ConfigError": "agentv.errors",
    "Diagnostic": "agentv.errors",
    "EvalResult": "agentv.results.record",
    "EvalRun": "agentv.api",
    "InputError": "agentv.errors",
    "NoCasesError": "agentv.api",
    "PreparedRun": "agentv.api",
    "ProviderError": "agentv.errors",
    "Summary": "agentv.results.summary",
    "arun_eval": "agentv.api",
    "load_eval_file": "agentv.api",
    "prepare_run": "agentv.api",
    "render": "agentv.api",
    "run_eval": "agentv.api",
}

__all__ = [
    "AgentVError",
    "ConfigError",
    "Diagnostic",
    "EvalResult",
    "EvalRun",
    "InputError",
    "NoCasesError",
    "PreparedRun",
    "ProviderError",
    "Summary",
    "__version__",
    "arun_eval",
    "load_eval_file",
    "prepare_run",
    "render",
    "run_eval",
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
        NoCasesError,
        PreparedRun,
        arun_eval,
        load_eval_file,
        prepare_run,
        render,
        run_eval,
    )
    from agentv.errors import AgentVError, ConfigError, Diagnostic, InputError, ProviderError
    from agentv.results.record import EvalResult
    from agentv.results.summary import Summary
