"""Agent targets: programs run as child processes (``cli``, ``codex``, ``claude-code``,
``vscode``).

Each reads the agent-mode question and the files itself (docs/prompt-rules.md section 6);
what would stop one on this machine is said by its settings class
(``ProviderSettings.setup_warnings``), for ``agentv validate``.
"""
