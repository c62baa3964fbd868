"""``python -m agentv`` runs the command line."""

from agentv.cli.app import main

main()
