/* cli_child.c: the program `vramwatch run` wraps in the CLI tests: reports its environment, exits, dies, or writes a report. */
#include <dlfcn.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* What run and sim are specified to set, one NAME=VALUE line each ("NAME unset" when it is not). */
static const char *const watched[] = {
    "LD_PRELOAD",           "VRAMWATCH_DIR",           "VRAMWATCH_LIMIT",
    "VRAMWATCH_LIMIT_MODE", "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF",
    /* the simulated card's (run --sim, fit --sim, sim) */
    "LD_LIBRARY_PATH",      "SIMGPU_MEMORY",           "SIMGPU_CARD",
    "PYTHONPATH",
};

static int write_env(const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        return 1;
    }
    for (size_t i = 0; i < sizeof watched / sizeof watched[0]; i++) {
        const char *v = getenv(watched[i]);
        if (v)
            fprintf(f, "%s=%s\n", watched[i], v);
        else
            fprintf(f, "%s unset\n", watched[i]);
    }
    /* The stub library defines this symbol: found only if the preload really happened. */
    fprintf(f, "preloaded=%d\n", dlsym(RTLD_DEFAULT, "vwcli_stub_marker") != NULL);
    return fclose(f) == 0 ? 0 : 1;
}

/* A small but complete report of this process, as the library would leave it: its own report
 * (suffix ""), or a dump on request (suffix "-request-1", reason "request"). */
static int write_report(const char *suffix, const char *reason)
{
    const char *dir = getenv("VRAMWATCH_DIR");
    char host[HOST_NAME_MAX + 1] = "";
    if (!dir || gethostname(host, sizeof host) != 0)
        return 1;
    mkdir(dir, 0700); /* as the library does when the folder is missing */
    host[HOST_NAME_MAX] = '\0';
    char path[PATH_MAX], tmp[PATH_MAX];
    int n = snprintf(path, sizeof path, "%s/vramwatch-%s-%d%s.json", dir, host, (int)getpid(),
                     suffix);
    if (n < 0 || (size_t)n >= sizeof path)
        return 1;
    /* Written beside the final name, then renamed, as the library does. */
    n = snprintf(tmp, sizeof tmp, "%s/.cli-child-%d.tmp", dir, (int)getpid());
    if (n < 0 || (size_t)n >= sizeof tmp)
        return 1;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long long now = (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
    static long long start; /* the process's start: one, however many reports it writes */
    if (!start)
        start = now;
    FILE *f = fopen(tmp, "w");
    if (!f)
        return 1;
    fprintf(f,
            "{\"schema\":\"vramwatch.report/1\",\"reason\":\"%s\",\"time_unix_ns\":%lld,\n"
            "\"vramwatch\":{\"version\":\"0.1.0\",\"stack_depth\":32,\"python\":false},\n"
            "\"process\":{\"pid\":%d,\"ppid\":%d,\"host\":\"%s\",\"argv\":[\"cli-child\",\"report\"],\"exe\":null,\n"
            "  \"cwd\":null,\"start_unix_ns\":%lld,\"rank\":null,\"local_rank\":null,\"world_size\":null,\"env\":{}},\n"
            "\"devices\":[{\"ordinal\":0,\"name\":\"Simulated GPU\",\"total_bytes\":1073741824,\"free_bytes\":0,\n"
            "  \"limit_bytes\":null,\"live_bytes\":1073741824,\"live_count\":1,\"peak_live_bytes\":1073741824,\n"
            "  \"peak_time_unix_ns\":%lld,\"reserved_bytes\":1073741824,\"peak_reserved_bytes\":1073741824,\n"
            "  \"used_bytes\":1073741824,\"untracked_bytes\":0,\"alloc_calls\":1,\"free_calls\":0,\"failed_calls\":1,\n"
            "  \"cache_flushes\":0,\"va_reserved_bytes\":0}],\n"
            "\"failures\":[{\"time_unix_ns\":%lld,\"api\":\"cudaMalloc\",\"device\":0,\"size\":1048576,\"error_code\":2,\n"
            "  \"error_name\":\"cudaErrorMemoryAllocation\",\"oom\":true,\"callsite\":1,\"live_bytes_at_failure\":1073741824,\n"
            "  \"reserved_bytes_at_failure\":1073741824,\"free_bytes_at_failure\":0,\"retried\":null,\"thread\":%d}],\n"
            "\"failures_total\":1,\"pressure_events\":[],\n"
            "\"callsites\":[{\"id\":1,\"frames\":[{\"kind\":\"native\",\"module\":\"/tmp/cli-child\",\"symbol\":\"write_report\",\n"
            "  \"offset\":4096,\"symbol_offset\":16}],\"live_bytes\":1073741824,\"live_count\":1,\"alloc_calls\":1,\n"
            "  \"alloc_bytes_total\":1073741824}],\n"
            "\"callsites_dropped\":0,\"live\":[],\"live_truncated\":1,\"limit_crossings\":[],\n"
            "\"host_pinned\":{\"live_bytes\":0,\"peak_live_bytes\":0,\"alloc_calls\":0,\"free_calls\":0,\"failed_calls\":0}}\n",
            reason, now, (int)getpid(), (int)getppid(), host, start, now, now, (int)getpid());
    if (fclose(f) != 0 || rename(tmp, path) != 0)
        return 1;
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && strcmp(argv[1], "env") == 0)
        return write_env(argv[2]);
    if (argc >= 3 && strcmp(argv[1], "exit") == 0)
        return atoi(argv[2]);
    if (argc >= 3 && strcmp(argv[1], "signal") == 0) {
        int sig = atoi(argv[2]);
        signal(sig, SIG_DFL);
        raise(sig);
        return 99; /* the signal did not end us */
    }
    if (argc >= 2 && strcmp(argv[1], "report") == 0)
        return write_report("", "oom") != 0 ? 1 : argc >= 3 ? atoi(argv[2]) : 0;
    if (argc >= 2 && strcmp(argv[1], "dump-report") == 0) /* a dump on request, then the report */
        return write_report("-request-1", "request") != 0 || write_report("", "oom") != 0;
    if (argc >= 3 && strcmp(argv[1], "wait") == 0) {
        /* Says it is ready, then waits for a signal forwarded by vramwatch. */
        signal(SIGTERM, SIG_DFL);
        FILE *f = fopen(argv[2], "w");
        if (f)
            fclose(f);
        for (int i = 0; i < 600; i++)
            sleep(1);
        return 98;
    }
    fprintf(stderr,
            "usage: cli-child env FILE | exit N | signal N | report [EXIT] | dump-report | wait "
            "READYFILE\n");
    return 2;
}
