"""A DataLoader-like parent: it allocates device memory, forks 4 workers that only do host work
(as DataLoader workers do), runs an exec'd tool, and starts one worker with the spawn method
(a fresh interpreter) that allocates device memory itself. Under the preload exactly two reports
must appear: the parent's and the spawned worker's. Prints the spawned worker's pid."""
import ctypes
import multiprocessing as mp
import os
import subprocess
import sys

MiB = 1 << 20


def cuda():
    return ctypes.CDLL("libcudart.so.13")


def host_work(i):
    # What a DataLoader worker does: decode and batch on the CPU, never touch the GPU.
    return sum(range(10000 * (i + 1)))


def spawned_allocates(queue):
    rt = cuda()
    p = ctypes.c_void_p()
    assert rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(3 * MiB)) == 0
    queue.put(os.getpid())


def main():
    rt = cuda()
    p = ctypes.c_void_p()
    assert rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(8 * MiB)) == 0

    fork = mp.get_context("fork")
    with fork.Pool(4) as pool:
        assert pool.map(host_work, range(8))[0] == sum(range(10000))
    # A forked child that leaves through the normal exit path (atexit handlers run) and one
    # that execs a tool.
    pid = os.fork()
    if pid == 0:
        sys.exit(0)
    os.waitpid(pid, 0)
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    subprocess.run(["true"], check=True)

    spawn = mp.get_context("spawn")
    queue = spawn.Queue()
    worker = spawn.Process(target=spawned_allocates, args=(queue,))
    worker.start()
    child = queue.get(timeout=60)
    worker.join(60)
    assert worker.exitcode == 0, worker.exitcode
    print("spawned=%d" % child)


if __name__ == "__main__":
    main()
