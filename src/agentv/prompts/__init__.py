"""③ Prompts: the one prompt builder (``builder``), where an eval case becomes the question,
the guidelines and the messages exactly as a target receives them (docs/prompt-rules.md)."""
