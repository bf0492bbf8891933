/* How a program's allocation throughput scales with threads end to end, through the preload, on
 * a GPU that shares nothing between threads (standin_gpu.c): cudaMalloc + cudaFree pairs from 1
 * and 2 threads, all on device 0 (issue 24's program) and each on its own device, without the
 * library and with it (VRAMWATCH_STACK_DEPTH=0). The figure is the ratio of ratios: what the
 * library leaves of the program's own scaling (2-thread throughput over 1-thread throughput
 * with the library, over the same without it). bench_threads measures the core alone.
 *
 * The program runs itself as children, without and with LD_PRELOAD, alternately, 3 times each;
 * each child runs every configuration interleaved, 3 runs of 0.2 s, and the best throughput of
 * all is kept (a shared machine's other load only ever lowers a figure). Beside them, threads
 * doing work that shares nothing say what the machine allows at that moment. With --check it
 * exits 1 when 2 threads on device 0 keep less than 0.8 of the program's own scaling, and 77
 * when the machine cannot show scaling (fewer than 2 CPUs, or work that shares nothing scaling
 * less than 1.8 times). Figures only: never a test (docs/performance.md).
 *
 * usage: bench_threads_e2e LIBVRAMWATCH [--check]
 *        bench_threads_e2e --child     (one child's figures, one line each) */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define LIVE_PER_THREAD 16
#define ROUNDS 3   /* runs of each configuration in one child */
#define CHILDREN 3 /* children of each kind, alternating */

enum mode { DEVICE_0, OWN_DEVICE, SHARED_NOTHING, MODES };
static const char *mode_name[MODES] = { "device0", "own", "spin" };

struct worker {
    pthread_t t;
    int id;
    enum mode mode;
    uint64_t pairs;
    double cpu_s;
};

static volatile int go, stop;

static double clock_s(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *work(void *arg)
{
    struct worker *w = arg;
    void *live[LIVE_PER_THREAD];
    if (w->mode == OWN_DEVICE)
        cudaSetDevice(w->id);
    while (!__atomic_load_n(&go, __ATOMIC_ACQUIRE))
        ;
    double c0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
    uint64_t n = 0, x = (uint64_t)w->id + 1;
    if (w->mode == SHARED_NOTHING) {
        while (!__atomic_load_n(&stop, __ATOMIC_RELAXED))
            for (int k = 0; k < 256; k++, n++)
                x = x * 6364136223846793005ull + 1442695040888963407ull;
        n += x == 0;
    } else {
        for (int i = 0; i < LIVE_PER_THREAD; i++)
            cudaMalloc(&live[i], 4096);
        /* A window of allocations: each step frees the oldest and makes a new one. */
        while (!__atomic_load_n(&stop, __ATOMIC_RELAXED))
            for (int k = 0; k < 64; k++, n++) {
                int i = (int)(n % LIVE_PER_THREAD);
                cudaFree(live[i]);
                cudaMalloc(&live[i], 4096 + (n & 7) * 512);
            }
        for (int i = 0; i < LIVE_PER_THREAD; i++)
            cudaFree(live[i]);
    }
    w->cpu_s = clock_s(CLOCK_THREAD_CPUTIME_ID) - c0;
    w->pairs = n;
    return NULL;
}

struct figure {
    double per_s;  /* pairs per second of wall time, all threads together */
    double cpu_ns; /* CPU time per pair */
};

static struct figure run(int threads, enum mode mode)
{
    struct worker w[2];
    go = stop = 0;
    for (int i = 0; i < threads; i++) {
        w[i] = (struct worker){ .id = i, .mode = mode };
        pthread_create(&w[i].t, NULL, work, &w[i]);
    }
    double t0 = clock_s(CLOCK_MONOTONIC);
    __atomic_store_n(&go, 1, __ATOMIC_RELEASE);
    struct timespec pause = { 0, 200 * 1000 * 1000 };
    nanosleep(&pause, NULL);
    __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
    uint64_t pairs = 0;
    double cpu = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(w[i].t, NULL);
        pairs += w[i].pairs;
        cpu += w[i].cpu_s;
    }
    double dt = clock_s(CLOCK_MONOTONIC) - t0;
    return (struct figure){ (double)pairs / dt, cpu * 1e9 / (double)pairs };
}

static int child(void)
{
    struct figure best[2][MODES];
    memset(best, 0, sizeof(best));
    /* Warm-up: the library's set-up and first allocation outside the figures. */
    void *p;
    cudaMalloc(&p, 1);
    cudaFree(p);
    for (int r = 0; r < ROUNDS; r++)
        for (int t = 0; t < 2; t++)
            for (int m = 0; m < MODES; m++) {
                struct figure f = run(t + 1, (enum mode)m);
                if (f.per_s > best[t][m].per_s)
                    best[t][m] = f;
            }
    for (int t = 0; t < 2; t++)
        for (int m = 0; m < MODES; m++)
            printf("%s %d %.6g %.6g\n", mode_name[m], t + 1, best[t][m].per_s, best[t][m].cpu_ns);
    return 0;
}

/* One child, its figures merged into best[with][threads - 1][mode] (the best of all). */
static int spawn_child(const char *self, const char *preload, const char *dir,
                       struct figure best[2][MODES])
{
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    char env_preload[4200], env_dir[4200];
    snprintf(env_preload, sizeof(env_preload), "LD_PRELOAD=%s", preload ? preload : "");
    snprintf(env_dir, sizeof(env_dir), "VRAMWATCH_DIR=%s", dir);
    char *env[256];
    int n = 0;
    for (char **e = environ; *e && n < 240; e++)
        if (strncmp(*e, "LD_PRELOAD=", 11) != 0 && strncmp(*e, "VRAMWATCH_", 10) != 0)
            env[n++] = *e;
    if (preload)
        env[n++] = env_preload;
    env[n++] = env_dir;
    env[n++] = "VRAMWATCH_STACK_DEPTH=0";
    env[n] = NULL;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    char *argv[] = { (char *)self, "--child", NULL };
    pid_t pid;
    int e = posix_spawn(&pid, self, &fa, NULL, argv, env);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    if (e != 0) {
        close(fds[0]);
        return -1;
    }
    FILE *f = fdopen(fds[0], "r");
    char name[16];
    int threads;
    double per_s, cpu_ns;
    while (f && fscanf(f, "%15s %d %lf %lf", name, &threads, &per_s, &cpu_ns) == 4)
        for (int m = 0; m < MODES; m++)
            if (strcmp(name, mode_name[m]) == 0 && threads >= 1 && threads <= 2 &&
                per_s > best[threads - 1][m].per_s)
                best[threads - 1][m] = (struct figure){ per_s, cpu_ns };
    if (f)
        fclose(f);
    int status;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--child") == 0)
        return child();
    if (argc < 2) {
        fprintf(stderr, "usage: bench_threads_e2e LIBVRAMWATCH [--check]\n");
        return 2;
    }
    bool check = argc > 2 && strcmp(argv[2], "--check") == 0;
    cpu_set_t cs;
    int cpus = sched_getaffinity(0, sizeof(cs), &cs) == 0 ? CPU_COUNT(&cs) : 1;
    if (cpus < 2) {
        printf("bench_threads_e2e: %d CPU for this process: 2 threads cannot scale here\n", cpus);
        return 77;
    }
    char self[4096];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (sl <= 0)
        return 2;
    self[sl] = 0;
    char dir[] = "/tmp/bench_threads_e2e.XXXXXX";
    if (!mkdtemp(dir))
        return 2;
    static struct figure best[2][2][MODES]; /* [with][threads - 1][mode] */
    int bad = 0;
    for (int c = 0; c < CHILDREN; c++)
        for (int with = 0; with < 2; with++)
            bad |= spawn_child(self, with ? argv[1] : NULL, dir, best[with]) != 0;
    char cmd[4200];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    bad |= system(cmd) != 0;
    if (bad) {
        fprintf(stderr, "bench_threads_e2e: a child failed\n");
        return 1;
    }
    printf("end to end: cudaMalloc + cudaFree pairs per second, all threads together, on a stand-in "
           "GPU that shares nothing (stack depth 0; best of %d runs of 0.2 s; %d CPUs); x: 2 "
           "threads over 1; CPU ns: CPU time per pair\n",
           ROUNDS * CHILDREN, cpus);
    printf("| threads on | without: 1 thread | 2 threads | x | CPU ns 1 / 2 | with: 1 thread | 2 "
           "threads | x | CPU ns 1 / 2 | x with / x without |\n");
    printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
    double kept[2];
    for (int m = 0; m < 2; m++) {
        double x0 = best[0][1][m].per_s / best[0][0][m].per_s;
        double x1 = best[1][1][m].per_s / best[1][0][m].per_s;
        kept[m] = x1 / x0;
        printf("| %s | %.3g | %.3g | %.2f | %.0f / %.0f | %.3g | %.3g | %.2f | %.0f / %.0f | "
               "**%.2f** |\n",
               m == DEVICE_0 ? "device 0" : "own devices", best[0][0][m].per_s,
               best[0][1][m].per_s, x0, best[0][0][m].cpu_ns, best[0][1][m].cpu_ns,
               best[1][0][m].per_s, best[1][1][m].per_s, x1, best[1][0][m].cpu_ns,
               best[1][1][m].cpu_ns, kept[m]);
    }
    double spin = best[0][1][SHARED_NOTHING].per_s / best[0][0][SHARED_NOTHING].per_s;
    double spin_with = best[1][1][SHARED_NOTHING].per_s / best[1][0][SHARED_NOTHING].per_s;
    printf("work that shares nothing: %.2fx on 2 threads (children without the library), %.2fx "
           "(with it)\n",
           spin, spin_with);
    if (!check)
        return 0;
    if (spin < 1.8 || spin_with < 1.8) {
        fprintf(stderr, "bench_threads_e2e: the machine is too busy to show scaling (work that "
                        "shares nothing: %.2fx, %.2fx)\n",
                spin, spin_with);
        return 77;
    }
    if (kept[DEVICE_0] < 0.8 || kept[OWN_DEVICE] < 0.8) {
        fprintf(stderr, "bench_threads_e2e: the library keeps %.2f (device 0) and %.2f (own "
                        "devices) of the program's scaling (target 0.8)\n",
                kept[DEVICE_0], kept[OWN_DEVICE]);
        return 1;
    }
    return 0;
}
