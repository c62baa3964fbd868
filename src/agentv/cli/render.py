"""`agentv render` (not built yet)."""
