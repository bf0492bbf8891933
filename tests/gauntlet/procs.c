/* The processes attack: forks while other threads allocate (children that exit, exec, or
 * allocate themselves), vfork + exec, posix_spawn and system(), under the preload. Prints which
 * processes allocated and what each left live, for gauntlet.py to compare with the reports.
 *
 * usage: procs run FORKS         the attack; stdout: one JSON line
 *        procs child_alloc MIB   allocate MIB MiB through the runtime and exit (spawned)
 *        procs spawn_bench N     posix_spawn /bin/true N times with the environment as given,
 *                                and print the nanoseconds per process
 * Exit status 0, or a small number naming the step that failed (with a line on stderr). */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

#define MiB (1ull << 20)
extern char **environ;
static atomic_int stop;
static char self[4096];

static void *churn(void *arg)
{
    (void)arg;
    CHECK(cudaFree(NULL) == cudaSuccess, 10);
    /* Allocation + free pairs until told to stop: a fork lands in the middle of one of them,
     * with our lock or the driver's held by this thread at that instant. */
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        void *p;
        CHECK(cudaMalloc(&p, 4096) == cudaSuccess, 11);
        CHECK(cudaFree(p) == cudaSuccess, 12);
    }
    return NULL;
}

static int wait_ok(pid_t pid)
{
    int st;
    while (waitpid(pid, &st, 0) < 0)
        ;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static pid_t spawn(char *const argv[])
{
    pid_t pid;
    CHECK(posix_spawn(&pid, argv[0], NULL, NULL, argv, environ) == 0, 20);
    return pid;
}

static int run(int forks)
{
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        CHECK(pthread_create(&th[i], NULL, churn, NULL) == 0, 2);
    void *mine;
    CHECK(cudaMalloc(&mine, 10 * MiB) == cudaSuccess, 3);

    /* {pid, live bytes} of every process that allocated; printed at the end. */
    static long allocated[1024][2];
    int nalloc = 0;
    for (int i = 0; i < forks; i++) {
        pid_t pid = fork();
        CHECK(pid >= 0, 4);
        if (pid == 0) {
            switch (i % 4) {
            case 0: /* exits normally: atexit handlers run, ours must write nothing */
                exit(0);
            case 1: /* execs at once, as a DataLoader worker's shell-out would */
                execl("/bin/true", "true", (char *)NULL);
                _exit(127);
            case 2: { /* allocates itself, and leaves it live */
                void *p;
                if (cudaMalloc(&p, (size_t)(i + 1) * MiB) != cudaSuccess)
                    _exit(30);
                exit(0);
            }
            default: { /* allocates through the driver and frees: a report with nothing live */
                CUdeviceptr d;
                if (cuMemAlloc_v2(&d, MiB) != CUDA_SUCCESS || cuMemFree_v2(d) != CUDA_SUCCESS)
                    _exit(31);
                exit(0);
            }
            }
        }
        if (i % 4 >= 2) {
            allocated[nalloc][0] = pid;
            allocated[nalloc][1] = i % 4 == 2 ? (long)((i + 1) * MiB) : 0;
            nalloc++;
        }
        CHECK(wait_ok(pid), 5);
    }

    /* vfork + exec: the child shares our memory until exec, so nothing of ours may run in it. */
    pid_t v = vfork();
    if (v == 0) {
        execl("/bin/true", "true", (char *)NULL);
        _exit(127);
    }
    CHECK(v > 0 && wait_ok(v), 6);
    v = vfork();
    if (v == 0) {
        execl(self, self, "child_alloc", "5", (char *)NULL);
        _exit(127);
    }
    CHECK(v > 0 && wait_ok(v), 7);
    allocated[nalloc][0] = v;
    allocated[nalloc++][1] = (long)(5 * MiB);

    char *tru[] = { "/bin/true", NULL };
    CHECK(wait_ok(spawn(tru)), 8);
    char *me[] = { self, "child_alloc", "7", NULL };
    pid_t s = spawn(me);
    CHECK(wait_ok(s), 9);
    allocated[nalloc][0] = s;
    allocated[nalloc++][1] = (long)(7 * MiB);
    CHECK(system("true") == 0, 13);
    CHECK(system("exit 3") != -1, 14);

    atomic_store(&stop, 1);
    for (int i = 0; i < 4; i++)
        CHECK(pthread_join(th[i], NULL) == 0, 15);

    printf("{\"parent\": %d, \"parent_live\": %llu, \"allocated\": {", (int)getpid(), 10 * MiB);
    for (int i = 0; i < nalloc; i++)
        printf("%s\"%ld\": %ld", i ? ", " : "", allocated[i][0], allocated[i][1]);
    printf("}}\n");
    return 0;
}

static int spawn_bench(long n)
{
    char *tru[] = { "/bin/true", NULL };
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < n; i++)
        CHECK(wait_ok(spawn(tru)), 40);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ns = (double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec);
    printf("%.0f\n", ns / (double)n);
    return 0;
}

int main(int argc, char **argv)
{
    CHECK(argc == 3, 1);
    ssize_t l = readlink("/proc/self/exe", self, sizeof(self) - 1);
    CHECK(l > 0, 1);
    self[l] = 0;
    if (!strcmp(argv[1], "run"))
        return run(atoi(argv[2]));
    if (!strcmp(argv[1], "child_alloc")) {
        void *p;
        CHECK(cudaMalloc(&p, (size_t)atoi(argv[2]) * MiB) == cudaSuccess, 50);
        return 0;
    }
    if (!strcmp(argv[1], "spawn_bench"))
        return spawn_bench(atol(argv[2]));
    return 1;
}
