"""Who may join a run and what a worker may load: the shared secret and the proofs
derived from it, a worker's allowance, the shapes of the messages (no Locust import)."""
