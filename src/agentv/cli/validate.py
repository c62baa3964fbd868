"""`agentv validate` (not built yet)."""
