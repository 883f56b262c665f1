#!/usr/bin/env python3
"""What a recording's writer pays the kernel per span: CPU (user + system) of writing N bytes
to a file in writes of a given size, per 88 bytes (one span with one integer field in a raw
recording), as the writer thread would.

    python3 benches/write_cost.py DIR [MiB]

For each write size it writes MiB (default 512) into a new file in DIR, with space reserved
ahead (`posix_fallocate`, as the writer does on ext4) or not, through the page cache or with
O_DIRECT (where DIR's file system takes it), then `fdatasync` as ringtrace's flush does, and
prints one line per case. The source buffer is page-aligned (an anonymous mapping), as direct
I/O needs. Run it on an idle machine; the figures move with memory pressure.
"""

import mmap
import os
import resource
import sys

SPAN = 88


def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def case(directory, total, size, direct, reserve, sync):
    path = os.path.join(directory, "ringtrace-write-cost")
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | (os.O_DIRECT if direct else 0)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as e:
        return f"cannot open ({e.strerror})"
    try:
        buf = mmap.mmap(-1, size)
        buf.write(b"x" * size)
        before = cpu()
        if reserve:
            # Counted: on tmpfs reserving is allocating the pages.
            os.posix_fallocate(fd, 0, total)
        written = 0
        while written < total:
            written += os.write(fd, buf)
        if sync:
            os.fdatasync(fd)
        spent = cpu() - before
    except OSError as e:
        return f"failed ({e.strerror})"
    finally:
        os.close(fd)
        os.unlink(path)
    return f"{spent / total * SPAN * 1e9:6.1f} ns per {SPAN} bytes"


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    directory = sys.argv[1]
    total = int(sys.argv[2] if len(sys.argv) > 2 else 512) << 20
    print(f"{total >> 20} MiB into {directory}")
    for size_kib in (64, 192, 512, 1024, 2048):
        size = size_kib << 10
        for direct, reserve, sync, what in (
            (False, True, True, "page cache, reserved, fdatasync"),
            (False, True, False, "page cache, reserved, no fdatasync"),
            (False, False, True, "page cache, not reserved, fdatasync"),
            (True, True, True, "O_DIRECT, reserved, fdatasync"),
        ):
            print(f"{size_kib:5} KiB writes, {what:36}: {case(directory, total, size, direct, reserve, sync)}")


if __name__ == "__main__":
    main()
