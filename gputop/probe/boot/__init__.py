"""The directory ``gputop run`` puts first on PYTHONPATH: its ``sitecustomize`` starts the
probe in every Python process of the command."""
