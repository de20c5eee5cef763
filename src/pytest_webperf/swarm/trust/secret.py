"""The secret a run's master and its workers share, and what is derived from it.

It comes from ``WEBPERF_SECRET`` or a file (``--webperf-secret-file``, ``webperf worker
--secret-file``), never from the command line, where ``ps`` shows it. It never travels:

- a worker proves it holds the secret by its CURVE key, derived from the secret: the
  ZeroMQ handshake (CurveZMQ) makes it sign for the master's short-term key, and the
  master's ZAP handler admits that one key only;
- the master proves it to a worker by an HMAC over the worker's random challenge (its
  ``nonce``), its client id and what it sends (the spec, or the end of the session).

The master's own CURVE key pair is fixed and public by design (``MASTER_KEY``): a
worker's handshake must reach the master's ZAP handler whatever key it offers, so that
a refused worker is named by its address (a master key derived from the secret would
make a wrong secret fail before ZAP, unnamed). What the master's key would have proved,
the HMAC proves; what it protects (the channel's content, from reading and tampering)
the short-term keys of CurveZMQ protect, whoever knows the master's long-term one: an
impostor can pose as a master to a worker but not join the real master as a worker,
so it can neither prove itself nor relay a proof.

Whoever poses as the master to a worker learns the worker's public key, which is
derived from the secret: a guessable secret could be found offline from it. So the
secret must be random; its length is what can be checked here (32 characters at least:
``python3 -c 'import secrets; print(secrets.token_hex(32))'``).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

SECRET_ENV = "WEBPERF_SECRET"
MIN_LENGTH = 32  # characters: 128 bits and more from a hex or base64 generator
MAKE_ONE = "python3 -c 'import secrets; print(secrets.token_hex(32))'"
# the master's CURVE secret key: public by design (the module's docstring says why)
MASTER_KEY = hashlib.sha256(b"pytest-webperf master CURVE key, public by design").digest()
NONCE = re.compile(r"[0-9a-f]{64}")
PROOF = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class Secret:
    """The shared secret; ``origin`` says where it came from (never its value)."""

    value: bytes = field(repr=False)
    origin: str = SECRET_ENV

    def __str__(self) -> str:
        return f"the secret from {self.origin}"


def secret_from(text: str, origin: str) -> Secret:
    """A secret from its text (surrounding whitespace dropped); ValueError if too short."""
    value = text.strip()
    if len(value) < MIN_LENGTH:
        raise ValueError(
            f"the secret from {origin} has {len(value)} characters, fewer than "
            f"{MIN_LENGTH}: a short secret can be guessed; make one with {MAKE_ONE}"
        )
    return Secret(value.encode(), origin)


def read_secret_file(path: str | Path) -> Secret:
    """The secret in a file; ValueError naming the file if it cannot be read or is short."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise ValueError(f"cannot read the secret file {str(path)!r}: {why}") from None
    return secret_from(text, str(path))


def secret_of(path: str | Path | None, environ: Mapping[str, str]) -> Secret | None:
    """The run's secret: the file if one is named, else ``WEBPERF_SECRET``, else none."""
    if path is not None:
        return read_secret_file(path)
    text = environ.get(SECRET_ENV, "")
    return secret_from(text, SECRET_ENV) if text else None


def environment_with(secret: Secret | None) -> dict[str, str]:
    """This process's environment for a child: the secret in ``WEBPERF_SECRET`` if there
    is one, and none inherited otherwise (never on a command line, where ``ps`` shows it)."""
    env = {k: v for k, v in os.environ.items() if k != SECRET_ENV}
    if secret is not None:
        env[SECRET_ENV] = secret.value.decode()
    return env


def _derive(secret: Secret, purpose: bytes) -> bytes:
    return hmac.new(secret.value, b"pytest-webperf " + purpose, hashlib.sha256).digest()


def worker_key(secret: Secret) -> bytes:
    """The 32 bytes of the CURVE secret key every worker holding ``secret`` uses."""
    return _derive(secret, b"worker CURVE key v1")


def new_nonce() -> str:
    """A worker's challenge to the master: 32 random bytes, hex."""
    return os.urandom(32).hex()


def prove(secret: Secret, purpose: str, node: str, nonce: str, *, payload: bytes = b"") -> str:
    """The master's answer to a worker's challenge, bound to what it sends (hex)."""
    key = _derive(secret, b"master proof key v1")
    message = b"\0".join((purpose.encode(), node.encode(), nonce.encode(), payload))
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def proven(
    secret: Secret, purpose: str, node: str, nonce: str, proof: object, *, payload: bytes = b""
) -> bool:
    """Whether ``proof`` answers this challenge for this payload (constant time)."""
    if not isinstance(proof, str) or not PROOF.fullmatch(proof):
        return False
    return hmac.compare_digest(prove(secret, purpose, node, nonce, payload=payload), proof)
