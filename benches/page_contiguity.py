#!/usr/bin/env python3
"""How fast a file is read from the page cache, against how its cached pages lie in physical
memory (issue #17: why 8 MiB reads of a 256-task stage beat the envelope's 8 MiB point).

Writes FILES files of SIZE bytes into DIR one after the other, as a write stage's task does,
then reads each one twice into a buffer touched beforehand (`preadv`, one call a file), and
finds where each file's pages are with `/proc/self/pagemap` (root only: for other users the
kernel hides the frame numbers, and the script says so). Prints, per group of files whose pages
form as many physically contiguous runs, the files' order of writing, the number of runs and of
2 MiB physical regions they touch, and the median time of the first and second read.

    python3 benches/page_contiguity.py [DIR] [--files 256] [--size 8M] [--compact]

`--compact` asks the kernel to compact free memory first (`/proc/sys/vm/compact_memory`, root).
`/proc/buddyinfo` is printed before the files are written: the page allocator hands out its
smallest free blocks first, so files written first land on scattered pages.
"""

import argparse
import ctypes
import ctypes.util
import os
import statistics
import struct
import sys
import tempfile
import time

PAGE = os.sysconf("SC_PAGE_SIZE")
PFN_MASK = (1 << 55) - 1


def size_arg(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    try:
        n = int(text[:-1]) * units[text[-1].upper()] if text[-1].upper() in units else int(text)
    except (ValueError, IndexError):
        raise argparse.ArgumentTypeError(f"{text!r}: expected a size such as 4096, 64K or 8M")
    if n <= 0 or n % PAGE:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a positive multiple of the page size ({PAGE})")
    return n


def load_libc():
    """The C library, with the signatures of `mmap` and `munmap` declared."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    return libc


def frames(libc, pagemap, fd, size):
    """The physical frame numbers of a file's cached pages, in file order (None when hidden)."""
    addr = libc.mmap(None, size, 1, 1, fd, 0)  # PROT_READ, MAP_SHARED
    if addr in (None, ctypes.c_void_p(-1).value):
        raise OSError(ctypes.get_errno(), "mmap failed")
    try:
        for off in range(0, size, PAGE):  # map every page: pagemap knows mapped pages only
            ctypes.string_at(addr + off, 1)
        raw = os.pread(pagemap, 8 * (size // PAGE), (addr // PAGE) * 8)
    finally:
        libc.munmap(addr, size)
    pfns = [entry & PFN_MASK for entry in struct.unpack(f"{size // PAGE}Q", raw)]
    return None if not any(pfns) else pfns


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", nargs="?", default=os.environ.get("TMPDIR", "/tmp"))
    ap.add_argument("--files", type=int, default=256)
    ap.add_argument("--size", type=size_arg, default=size_arg("8M"))
    ap.add_argument("--compact", action="store_true")
    args = ap.parse_args()
    if args.files < 1:
        ap.error("--files: expected at least 1")
    if not os.path.isdir(args.dir):
        ap.error(f"{args.dir}: not a directory")
    if args.compact:
        try:
            with open("/proc/sys/vm/compact_memory", "w") as f:
                f.write("1\n")
        except OSError as e:
            sys.exit(f"--compact: cannot write /proc/sys/vm/compact_memory ({e.strerror}): it needs root")
    with open("/proc/buddyinfo") as f:
        print("free blocks per order (/proc/buddyinfo) before writing:\n" + f.read().rstrip())
    libc = load_libc()
    pagemap = os.open("/proc/self/pagemap", os.O_RDONLY)
    data = os.urandom(args.size)
    buf = bytearray(b"\xa5" * args.size)
    rows = []
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="page-contiguity.") as work:
        paths = [os.path.join(work, f"f{i}") for i in range(args.files)]
        for path in paths:
            with open(path, "wb") as f:
                f.write(data)
        for i, path in enumerate(paths):
            fd = os.open(path, os.O_RDONLY)
            try:
                reads = []
                for _ in range(2):
                    start = time.perf_counter()
                    got = os.preadv(fd, [buf], 0)
                    reads.append(time.perf_counter() - start)
                    if got != args.size:
                        sys.exit(f"{path}: read {got} bytes of {args.size}")
                pfns = frames(libc, pagemap, fd, args.size)
            finally:
                os.close(fd)
            if pfns is None:
                sys.exit("/proc/self/pagemap hides frame numbers from this user: run as root")
            runs = 1 + sum(1 for a, b in zip(pfns, pfns[1:]) if b != a + 1)
            regions = len({p >> 9 for p in pfns})
            rows.append((i, runs, regions, reads[0], reads[1]))
    groups = {}
    for row in rows:
        groups.setdefault(row[1].bit_length(), []).append(row)  # runs by powers of two
    print(f"\n{args.files} files of {args.size >> 10} KiB in {args.dir}, written in order, read twice")
    print("| contiguous runs a file | files | written (median position) | 2 MiB regions a file | first read ms | second read ms |")
    print("|---|---:|---:|---:|---:|---:|")
    for _, group in sorted(groups.items(), reverse=True):
        med = lambda k: statistics.median(r[k] for r in group)
        low, high = min(r[1] for r in group), max(r[1] for r in group)
        print(
            f"| {low}–{high} | {len(group)} | {med(0):.0f} | {med(2):.0f} | {med(3) * 1e3:.2f} | {med(4) * 1e3:.2f} |"
        )

if __name__ == "__main__":
    main()
