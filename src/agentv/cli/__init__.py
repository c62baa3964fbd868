"""The ``agentv`` command line: thin typer commands over ``agentv.api`` (the only part of
agentv they import, with ``agentv.errors``); here is every print and exit code."""
