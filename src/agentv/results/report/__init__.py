"""The HTML report of one or several results files (``agentv report``, ``eval --report``).

One self-contained file: the page's code, its style and the results are inside it; it
opens from ``file://`` with no server and no network, and shows everything from a results
file as text only.
"""

from __future__ import annotations

from agentv.results.report.build import Report, build_report, default_report_path

__all__ = ["Report", "build_report", "default_report_path"]
