"""The shared workload files every HTTP server in the catalogue serves.

Generated, not committed: each server's build context gets an ``assets/``
directory with these files, so every server serves byte-identical bodies.
"""

from __future__ import annotations

import json
import random
import struct
import zlib

HELLO_HTML = b"<h1>Hello World</h1>"
# Seed 000's fixed array (a permutation of 1..100), sorted per request.
QUICKSORT_INPUT: tuple[int, ...] = (
    89, 47, 62, 36, 78, 22, 51, 11, 100, 94, 57, 63, 42, 76, 31, 85, 99, 55, 5, 17,
    68, 28, 45, 71, 8, 60, 83, 79, 48, 92, 43, 12, 61, 23, 87, 54, 3, 72, 37, 80,
    98, 26, 65, 53, 16, 25, 95, 39, 74, 20, 50, 91, 69, 40, 75, 30, 86, 4, 58, 19,
    77, 13, 70, 24, 46, 14, 96, 7, 49, 64, 38, 56, 82, 15, 84, 9, 21, 34, 97, 27,
    67, 52, 66, 90, 41, 6, 35, 10, 73, 18, 81, 44, 29, 59, 88, 2, 32, 1, 33, 93,
)  # fmt: skip
QUICKSORT_BODY = json.dumps(sorted(QUICKSORT_INPUT), separators=(",", ":")).encode()
FILE_PNG_SIZE = 534 * 1024  # seed 000: "a 534 KB PNG"
PAGE_SIZES = {"500b.html": 500, "20kb.html": 20 * 1024}  # seed 004


def exact_page(size: int) -> bytes:
    """An HTML page of exactly ``size`` bytes."""
    head, tail = b"<!doctype html><html><body><p>", b"</p></body></html>\n"
    filler = size - len(head) - len(tail)
    if filler < 0:
        raise ValueError(f"a page cannot be smaller than {len(head) + len(tail)} bytes")
    return head + (b"webperf " * (filler // 8 + 1))[:filler] + tail


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def exact_png(size: int, seed: int = 534) -> bytes:
    """A valid RGB PNG of noise (incompressible, like a photo) of exactly ``size`` bytes."""
    rng = random.Random(seed)
    side = int(((size - 2048) / 3) ** 0.5)
    rows = b"".join(b"\x00" + rng.randbytes(side * 3) for _ in range(side))
    header = _chunk(b"IHDR", struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0))
    body = _chunk(b"IDAT", zlib.compress(rows, 0))
    end = _chunk(b"IEND", b"")
    signature = b"\x89PNG\r\n\x1a\n"
    # pad with a tEXt chunk to the exact size (12 bytes of chunk overhead)
    pad = size - len(signature) - len(header) - len(body) - len(end) - 12
    if pad < 8:
        raise ValueError(f"cannot make a PNG of exactly {size} bytes")
    text = _chunk(b"tEXt", b"Comment\x00" + b"w" * (pad - 8))
    return signature + header + text + body + end


def workload_files() -> dict[str, bytes]:
    """File name -> content of every shared asset."""
    files = {
        "hello.html": HELLO_HTML,
        "quicksort.json": QUICKSORT_BODY,
        "file.png": exact_png(FILE_PNG_SIZE),
        "quicksort-input.json": json.dumps(list(QUICKSORT_INPUT)).encode(),
    }
    files.update({name: exact_page(n) for name, n in PAGE_SIZES.items()})
    return files
