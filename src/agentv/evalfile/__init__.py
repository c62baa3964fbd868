"""Steps 1 and 2 of the data flow: eval YAML files become ``EvalCase`` objects.

- ``finder``: which files a command line's paths mean;
- ``schema``: the format exactly as users write it (``schema_errors``: its errors said the
  user's way);
- ``loader``: reading a file once and settling it (header, ids, file-level defaults);
- ``build``: building one case (messages, files, tool pairing, tools, evaluators: each
  evaluator resolves and checks its own settings);
- ``context``: what every file loaded in one run shares; ``files``, ``guidelines``: file
  references and guideline patterns; ``spool``: the cases of a very large file, on disk.
"""
