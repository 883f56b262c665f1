#!/usr/bin/env python3
"""CPU of appending a recording's worth of data to a file, with and without reserving its disk
space ahead (`fallocate` with FALLOC_FL_KEEP_SIZE), as the recording's writer thread appends:
writes of 550 KiB, then `fdatasync`.

Prints, per 128 bytes (one span's two records), the CPU of this process and of the whole
machine (from /proc/stat, kernel threads included; 10 ms resolution).

    python3 benches/reserve_ahead.py [DIR ...]     (default: /tmp and /dev/shm)
"""
import ctypes
import os
import resource
import sys
import time

FALLOC_FL_KEEP_SIZE = 1
WRITE = 550 * 1024
WRITES = 960
libc = ctypes.CDLL("libc.so.6", use_errno=True)


def machine_busy_ms():
    fields = list(map(int, open("/proc/stat").readline().split()[1:]))
    return (sum(fields) - fields[3] - fields[4]) * 10


def run(path, step):
    buf = os.urandom(WRITE)
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    machine0, self0 = machine_busy_ms(), resource.getrusage(resource.RUSAGE_SELF)
    written = reserved = 0
    for _ in range(WRITES):
        if step and written + WRITE > reserved:
            libc.fallocate(fd, FALLOC_FL_KEEP_SIZE, ctypes.c_long(reserved), ctypes.c_long(step))
            reserved += step
        os.write(fd, buf)
        written += WRITE
    os.fdatasync(fd)
    self1 = resource.getrusage(resource.RUSAGE_SELF)
    time.sleep(0.3)  # let the kernel's threads finish what the sync started
    machine1 = machine_busy_ms()
    os.close(fd)
    os.unlink(path)
    spans = WRITES * WRITE / 128
    own = (self1.ru_stime - self0.ru_stime) + (self1.ru_utime - self0.ru_utime)
    return own / spans * 1e9, (machine1 - machine0) / 1000 / spans * 1e9


def main():
    for d in sys.argv[1:] or ["/tmp", "/dev/shm"]:
        for _ in range(3):
            for step in (0, 8 << 20, 64 << 20):
                own, machine = run(os.path.join(d, f"reserve-ahead-{os.getpid()}.bin"), step)
                what = f"reserve {step >> 20} MiB ahead" if step else "no reserve      "
                print(f"{d}: {what}: process {own:.1f} ns, machine {machine:.1f} ns per 128 bytes")


if __name__ == "__main__":
    main()
