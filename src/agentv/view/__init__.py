"""``agentv view``: the local workbench over the run store (docs/run-history.md).

Starlette and uvicorn come with the ``view`` extra (``pip install 'agentv[view]'``); nothing
here is imported unless the workbench is asked for.
"""
