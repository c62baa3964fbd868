"""`agentv init` (not built yet)."""
