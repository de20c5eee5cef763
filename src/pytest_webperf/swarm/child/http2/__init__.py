"""The package: the lean HTTP/2 user, HTTP/2 in pure Python with the ``h2`` package
(swarm processes only)."""
