"""What a remote worker hears from its master (``swarm/child/channel.py`` asks for
every message that passed its shape check): until a ``SPEC`` or a ``BYE`` proves the
master holds the secret (its answer to this worker's challenge, ``nonce``), only what
cannot direct load (``ack``, ``heartbeat``, ``quit``); then the rest, but a ``spawn``
only for the proven spec's target, and never a second spec. A master that answers
with a wrong proof, or none where the worker holds a secret, ends the worker
(``UNPROVEN``); Locust's ``reconnect`` ends it too (``LOST``): whoever answers after a
break is not the master it proved. Without a secret (a master on loopback, or on a
network said to be trusted) there is nothing to prove, and the first spec is taken.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NoReturn

from pytest_webperf.swarm.trust.messages import BYE, LOST, SPEC, UNPROVEN
from pytest_webperf.swarm.trust.secret import Secret, new_nonce, proven

BEFORE_PROOF = ("ack", "heartbeat", "quit")


def spec_payload(index: int, spec: str) -> bytes:
    """What the master's proof of a spec covers: the worker's index and the spec's text."""
    return f"{index}\0{spec}".encode()


@dataclass
class Gate:
    """One remote worker process's gate. ``leave`` ends the process with a status."""

    secret: Secret | None
    leave: Callable[[int], NoReturn]
    nonce: str = field(default_factory=new_nonce)
    node: str = ""  # this worker's client id: the master's name for it, in every proof
    target: str | None = None  # the proven spec's target URL
    connected: bool = False  # a connection was made (a second one is never trusted)

    @property
    def proven(self) -> bool:
        return self.target is not None

    def hears(self, kind: str, data: Any) -> bool:
        """Whether the worker acts on this message (its shape already checked)."""
        if kind in BEFORE_PROOF:
            return True
        if kind == SPEC:
            return not self.proven and self._accept(data)
        if kind == BYE:
            self._check(self._proof("bye", (data or {}).get("proof")))
            return True
        if not self.proven:
            return False
        if kind == "reconnect":
            self.leave(LOST)
        return kind != "spawn" or data["host"] == self.target

    def _accept(self, data: dict[str, Any]) -> bool:
        payload = spec_payload(data["index"], data["spec"])
        self._check(self._proof("spec", data["proof"], payload))
        try:
            target = json.loads(data["spec"])["host"]
        except (ValueError, TypeError, KeyError):
            target = None
        if not isinstance(target, str):
            self.leave(UNPROVEN)
        self.target = target
        return True

    def _proof(self, purpose: str, proof: object, payload: bytes = b"") -> bool:
        if self.secret is None:
            return True
        return proven(self.secret, purpose, self.node, self.nonce, proof, payload=payload)

    def _check(self, ok: bool) -> None:
        if not ok:
            self.leave(UNPROVEN)
