"""Step 5 of the data flow: a ``ProviderRequest`` goes to a target, a ``ProviderResponse``
comes back.

- ``base``: the contract (``Provider``, its settings, ``ProviderWrapper``, the ``Throttle``
  a run gives each provider);
- ``registry``: provider kinds and aliases, imported on first use;
- ``llm``: what the LM API providers share; ``openai``, ``anthropic``, ``gemini``: each
  vendor's converter and client; ``mock``: answers without a network;
- ``agents/``: programs run as child processes (``cli``, ``codex``, ``claude-code``,
  ``vscode``).
"""
