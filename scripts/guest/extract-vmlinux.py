#!/usr/bin/env python3
"""Extracts the decompressed vmlinux (an ELF file) from a bzImage.

The same idea as Linux's scripts/extract-vmlinux: find a compression
magic in the image, decompress from there, and keep the first result that
is an ELF file. Standard library only (gzip, xz/lzma); zstd and lz4 via
their command-line tools when present.

usage: extract-vmlinux.py BZIMAGE OUT
"""
import lzma
import shutil
import subprocess
import sys
import zlib

MAGICS = [
    ("gzip", b"\x1f\x8b\x08"),
    ("xz", b"\xfd7zXZ\x00"),
    ("zstd", b"\x28\xb5\x2f\xfd"),
    ("lzma", b"\x5d\x00\x00\x00"),
    ("lz4", b"\x02\x21\x4c\x18"),
]


def decompress(kind, data):
    if kind == "gzip":
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        return d.decompress(data)
    if kind == "xz":
        return lzma.LZMADecompressor(format=lzma.FORMAT_XZ).decompress(data)
    if kind == "lzma":
        return lzma.LZMADecompressor(format=lzma.FORMAT_ALONE).decompress(data)
    tool = {"zstd": ["zstd", "-dc"], "lz4": ["lz4", "-dc"]}[kind]
    if not shutil.which(tool[0]):
        return b""
    p = subprocess.run(tool, input=data, capture_output=True)
    return p.stdout


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    image = open(sys.argv[1], "rb").read()
    for kind, magic in MAGICS:
        at = image.find(magic)
        while at != -1:
            try:
                out = decompress(kind, image[at:])
            except (lzma.LZMAError, zlib.error, EOFError):
                out = b""
            if out[:4] == b"\x7fELF":
                open(sys.argv[2], "wb").write(out)
                return
            at = image.find(magic, at + 1)
    sys.exit(f"extract-vmlinux: no compressed ELF kernel found in {sys.argv[1]}")


if __name__ == "__main__":
    main()
