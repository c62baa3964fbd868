"""agentv: evaluate LLMs and AI agents on multi-turn eval suites written in YAML.

The package keeps its import light (``agentv --version`` must stay fast): provider SDKs
are imported only when a target that needs them is used.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
