"""Step 1 of the data flow: eval YAML files become ``EvalCase`` objects."""
