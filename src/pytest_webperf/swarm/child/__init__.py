"""What runs only in a swarm child process: everything that imports Locust or gevent."""
