"""A delay line for the benchmark's slow shared filesystem: a network's round trip, added.

    python3 delay_line.py RTT_US CMD [ARG...]

Runs CMD (ssh, as sshfs's ssh_command) and relays this process's stdin to CMD's stdin and
CMD's stdout to this process's stdout, each byte RTT_US/2 microseconds after it arrived:
every request and its answer cross it once, so each round trip (a lookup, a read) costs
RTT_US more, as on a network filesystem, while a stream of pipelined reads keeps its
throughput (each chunk waits for its own deadline, not behind the one before it).

Loopback sshfs on an idle machine answers a stat in about 40 us; Lustre and NFS metadata
operations take 200-1000 us. Linux's netem would add the delay in the kernel, but the
test machine's kernel has no sch_netem, so it is added here, in user space.
"""

import os
import queue
import subprocess
import sys
import threading
import time

CHUNK = 1 << 18


def relay(src, dst, delay):
    """Read SRC as it arrives; write each chunk to DST at its arrival time + DELAY."""
    pending = queue.SimpleQueue()

    def reader():
        while True:
            try:
                data = os.read(src, CHUNK)
            except OSError:
                data = b""
            pending.put((time.monotonic() + delay, data))
            if not data:
                return

    threading.Thread(target=reader, daemon=True).start()
    while True:
        due, data = pending.get()
        wait = due - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        if not data:
            os.close(dst)
            return
        view = memoryview(data)
        while view:
            try:
                n = os.write(dst, view)
            except OSError:
                return
            view = view[n:]


def main():
    if len(sys.argv) < 3:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    delay = float(sys.argv[1]) / 2e6
    child = subprocess.Popen(sys.argv[2:], stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
    up = threading.Thread(target=relay, args=(0, child.stdin.fileno(), delay), daemon=True)
    up.start()
    relay(child.stdout.fileno(), 1, delay)
    return child.wait()


if __name__ == "__main__":
    sys.exit(main())
