"""Agent targets: programs run as child processes (``cli``, ``codex``, ``vscode``)."""
