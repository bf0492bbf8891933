"""Allocation patterns of caching allocators under pressure, through the simulated runtime with
ctypes: what run_case.py's pressure and observe cases check the library makes of them.

  rescue        fill the card, fail once, give a block back and retry the same size (it fits):
                a flush that a retry rescued; then, with --kill, stop by SIGTERM as a batch
                scheduler does
  final         fail once and never retry: the application got the error
  observe       allocate 300 MiB blocks past an emulated limit; with --retries, declare the
                allocator as one that flushes and retries (vramwatch_allocator_retries) and, at a
                refusal, give back what is cached (every block but the first; nothing with
                --keep) and retry once
                --torch LIB loads LIB (named libc10_cuda.so) to look like a PyTorch process
  sleep         one 100 MiB allocation, prints "ready", sleeps 30 s (to be stopped by a signal)
  forked        one 100 MiB allocation, then fork: the child prints which of SIGTERM and SIGINT
                it catches (from /proc/self/status SigCgt) and exits
  first         forty 100 MiB allocations, the first CUDA calls of the process (the limit must
                hold from the very first)
Prints one line on stdout: "refused N" (how many requests the card refused).
"""
import ctypes
import os
import signal
import sys

MiB = 1 << 20
rt = ctypes.CDLL("libcudart.so.13")


def malloc(size):
    p = ctypes.c_void_p()
    err = rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(size))
    if err != 0:
        rt.cudaGetLastError()
        return None
    return p


def main():
    mode = sys.argv[1]
    refused = 0
    if mode in ("rescue", "final"):
        held = []
        while True:
            p = malloc(256 * MiB)
            if p is None:
                refused += 1
                break
            held.append(p)
        if mode == "rescue":
            rt.cudaFree(held.pop())  # the allocator releases a cached block...
            if malloc(256 * MiB) is None:  # ...and asks again for the same size
                refused += 1
        else:
            malloc(MiB)  # something else: the failed request was not retried
        print(f"refused {refused}", flush=True)
        if "--kill" in sys.argv:
            os.kill(os.getpid(), signal.SIGTERM)
        return 0
    if mode == "observe":
        if "--retries" in sys.argv:
            ctypes.CDLL(None).vramwatch_allocator_retries(1)
        if "--torch" in sys.argv:  # the next argument: a library named libc10_cuda.so
            ctypes.CDLL(sys.argv[sys.argv.index("--torch") + 1])
        cached = []
        for _ in range(6):
            p = malloc(300 * MiB)
            if p is None:
                refused += 1
                if "--keep" not in sys.argv:  # --keep: everything cached is in use
                    for q in cached[1:]:
                        rt.cudaFree(q)
                    cached = cached[:1]
                p = malloc(300 * MiB)
                if p is None:
                    print(f"refused {refused + 1}: the retry failed")
                    return 1
            cached.append(p)
        print(f"refused {refused}", flush=True)
        return 0
    if mode == "sleep":  # allocate, say so, and wait to be stopped
        if malloc(100 * MiB) is None:
            return 3
        print("ready", flush=True)
        import time
        time.sleep(30)
        return 0
    if mode == "forked":  # a worker forked after the library set its stop handlers
        if malloc(100 * MiB) is None:
            return 3
        pid = os.fork()
        if pid == 0:
            with open("/proc/self/status", encoding="ascii") as fh:
                cgt = int([ln.split()[1] for ln in fh if ln.startswith("SigCgt:")][0], 16)
            caught = [s.name for s in (signal.SIGTERM, signal.SIGINT) if cgt >> (s - 1) & 1]
            print("child catches " + (",".join(caught) or "none"), flush=True)
            os._exit(0)
        os.waitpid(pid, 0)
        return 0
    if mode == "first":
        if "--dump" in sys.argv:  # a report asked for before any CUDA call
            ctypes.CDLL(None).vramwatch_dump(b"request")
        ok = sum(malloc(100 * MiB) is not None for _ in range(40))
        print(f"refused {40 - ok}", flush=True)
        return 0
    return 2


sys.exit(main())
