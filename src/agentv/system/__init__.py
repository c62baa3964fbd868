"""What agentv touches of the machine: files read and written (``readfile``, ``outfile``),
processes (``process``), the run's environment (``env``) and the secrets masked out of
everything written (``masking``)."""
