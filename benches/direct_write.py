#!/usr/bin/env python3
"""CPU of appending a recording's worth of data to a file through the page cache, as the drain
writes the raw recording (8 MiB reserved ahead on ext4), against `O_DIRECT` writes of the same
sizes from an aligned buffer, which the device reads itself, with no page cache.

Writes of 1 MiB (`DIRECT_WRITE_KIB` sets another size; a drain pass writes about 100 KiB at
1 M spans/s), 960 MiB in all, then `fdatasync`.
Prints, per 88 bytes (what the raw recording keeps of a span with one integer field), the CPU
of this process (user and system) and of the whole machine (from /proc/stat, kernel threads
included; 10 ms resolution), and the median wall time of a write.

    [DIRECT_WRITE_KIB=96] python3 benches/direct_write.py [DIR ...]     (default: /tmp)
"""
import ctypes
import mmap
import os
import resource
import statistics
import sys
import time

FALLOC_FL_KEEP_SIZE = 1
RESERVE = 8 << 20
WRITE = int(os.environ.get("DIRECT_WRITE_KIB", "1024")) << 10
WRITES = (960 << 20) // WRITE
SPAN = 88
libc = ctypes.CDLL("libc.so.6", use_errno=True)


def machine_busy_ms():
    fields = list(map(int, open("/proc/stat").readline().split()[1:]))
    return (sum(fields) - fields[3] - fields[4]) * 10


def run(path, direct):
    # Page-aligned, as O_DIRECT needs; the same buffer for both ways.
    buf = mmap.mmap(-1, WRITE)
    buf.write(os.urandom(WRITE))
    flags = os.O_CREAT | os.O_WRONLY | os.O_TRUNC | (os.O_DIRECT if direct else 0)
    fd = os.open(path, flags, 0o644)
    machine0, self0 = machine_busy_ms(), resource.getrusage(resource.RUSAGE_SELF)
    written = reserved = 0
    walls = []
    for _ in range(WRITES):
        if written + WRITE > reserved:
            libc.fallocate(fd, FALLOC_FL_KEEP_SIZE, ctypes.c_long(reserved), ctypes.c_long(RESERVE))
            reserved += RESERVE
        t = time.perf_counter()
        os.write(fd, buf)
        walls.append(time.perf_counter() - t)
        written += WRITE
    os.fdatasync(fd)
    self1 = resource.getrusage(resource.RUSAGE_SELF)
    time.sleep(0.3)  # let the kernel's threads finish what the sync started
    machine1 = machine_busy_ms()
    os.close(fd)
    os.unlink(path)
    spans = WRITES * WRITE / SPAN
    own = (self1.ru_stime - self0.ru_stime) + (self1.ru_utime - self0.ru_utime)
    return own / spans * 1e9, (machine1 - machine0) / 1000 / spans * 1e9, statistics.median(walls)


def main():
    for d in sys.argv[1:] or ["/tmp"]:
        for _ in range(3):
            for direct in (False, True):
                path = os.path.join(d, f"direct-write-{os.getpid()}.bin")
                try:
                    own, machine, wall = run(path, direct)
                except OSError as e:
                    print(f"{d}: O_DIRECT refused: {e}")
                    continue
                what = "O_DIRECT      " if direct else "page cache    "
                print(
                    f"{d}: {what}: process {own:.1f} ns, machine {machine:.1f} ns per {SPAN} bytes;"
                    f" a write of {WRITE >> 10} KiB {wall * 1e3:.2f} ms (median)"
                )


if __name__ == "__main__":
    main()
