import json
import struct
import zlib

from pytest_webperf.targets.assets import FILE_PNG_SIZE, PAGE_SIZES, QUICKSORT_INPUT, workload_files


def test_exact_sizes_and_sorted_body():
    files = workload_files()
    assert len(files["file.png"]) == FILE_PNG_SIZE == 534 * 1024
    for name, size in PAGE_SIZES.items():
        assert len(files[name]) == size
    assert json.loads(files["quicksort.json"]) == list(range(1, 101))
    assert sorted(QUICKSORT_INPUT) == list(range(1, 101))


def test_png_is_valid():
    data = workload_files()["file.png"]
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    offset, kinds = 8, []
    while offset < len(data):
        (length,) = struct.unpack(">I", data[offset : offset + 4])
        kind = data[offset + 4 : offset + 8]
        body = data[offset + 8 : offset + 8 + length]
        (crc,) = struct.unpack(">I", data[offset + 8 + length : offset + 12 + length])
        assert zlib.crc32(kind + body) == crc
        kinds.append(kind)
        offset += 12 + length
    assert offset == len(data) and kinds[0] == b"IHDR" and kinds[-1] == b"IEND"


def test_assets_are_deterministic():
    assert workload_files() == workload_files()
