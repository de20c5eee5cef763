"""The runs a test interrupts take Ctrl-C however the test run itself was started.

A shell starts a background job (``nohup scripts/test.sh &``) with SIGINT ignored, and
an ignored signal stays ignored in every process started from it: pytest would never
see the Ctrl-C these tests send. ``take_sigint`` (a ``preexec_fn``) gives it back its
default in the run the test starts, where Python then raises KeyboardInterrupt.
"""

from __future__ import annotations

import signal


def take_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
