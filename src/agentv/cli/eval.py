"""`agentv eval` (not built yet)."""
