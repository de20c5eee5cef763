"""Entry point of the swarm child process."""

import locust  # noqa: F401, I001  (first: it monkey-patches this process with gevent)
import sys

from pytest_webperf.swarm.child.main import main

sys.exit(main())
