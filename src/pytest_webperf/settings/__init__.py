"""The run's settings, resolved once from options, environment, ini and markers."""
