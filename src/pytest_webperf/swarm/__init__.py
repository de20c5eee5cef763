"""Load generation: Locust swarms in child processes (never imported by pytest)."""
