#!/usr/bin/python3
"""Edits sections of a sparsgd checkpoint and writes it back with a valid checksum: what someone who
knows the format could do, to show that a resume checks a checkpoint's meaning and not only its bytes.

Usage: edit_checkpoint.py FILE SECTION=VALUE[,VALUE...] ...
  An integer section (run.epoch, run.step, ...) takes integers, a float64 section (history.test_accuracy)
  numbers, a text section (config, data) text. The file is replaced in place.

The format (include/sparsgd/training/checkpoint.hpp): "SPGDCKPT", u32 version, u64 payload length,
payload, u64 FNV-1a of the payload; the payload is sections, each u32 name length, name, u64 element
count, u8 type (0 float32, 1 float64, 2 uint64, 3 bytes), data.
"""

import struct
import sys

MAGIC = b"SPGDCKPT"
SIZES = {0: 4, 1: 8, 2: 8, 3: 1}


def fnv1a(data):
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def read_sections(path):
    blob = open(path, "rb").read()
    if blob[:8] != MAGIC:
        sys.exit(f"{path}: not a sparsgd checkpoint")
    version, length = struct.unpack_from("<IQ", blob, 8)
    payload = blob[20:20 + length]
    sections, at = [], 0
    while at < len(payload):
        (name_length,) = struct.unpack_from("<I", payload, at)
        name = payload[at + 4:at + 4 + name_length].decode()
        count, kind = struct.unpack_from("<QB", payload, at + 4 + name_length)
        start = at + 4 + name_length + 9
        end = start + count * SIZES[kind]
        sections.append([name, kind, payload[start:end], count])
        at = end
    return version, sections


def encode(kind, text):
    if kind == 3:
        return text.encode(), len(text.encode())
    values = text.split(",") if text else []
    if kind == 2:
        return struct.pack(f"<{len(values)}Q", *(int(v) for v in values)), len(values)
    fmt = "d" if kind == 1 else "f"
    return struct.pack(f"<{len(values)}{fmt}", *(float(v) for v in values)), len(values)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    path = sys.argv[1]
    version, sections = read_sections(path)
    by_name = {s[0]: s for s in sections}
    for edit in sys.argv[2:]:
        name, _, value = edit.partition("=")
        if name not in by_name:
            sys.exit(f"{path}: no section {name} (it has {', '.join(sorted(by_name))})")
        section = by_name[name]
        section[2], section[3] = encode(section[1], value)
    payload = b"".join(struct.pack("<I", len(n.encode())) + n.encode() + struct.pack("<QB", count, kind) + data
                       for n, kind, data, count in sections)
    blob = MAGIC + struct.pack("<IQ", version, len(payload)) + payload + struct.pack("<Q", fnv1a(payload))
    with open(path, "wb") as out:
        out.write(blob)


if __name__ == "__main__":
    main()
