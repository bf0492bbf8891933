/* helpers.h: shared bits of the simgpu tests (a clean SIMGPU_* environment, stderr capture). */
#ifndef SIMGPU_TEST_HELPERS_H
#define SIMGPU_TEST_HELPERS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MiB (1024ULL * 1024)
#define GiB (1024ULL * MiB)

/* Each Criterion test runs in its own process and the simulator reads its environment once,
 * on first use: so a test sets exactly what it needs before its first CUDA call. */
static inline void sim_env_clear(void)
{
    static const char *vars[] = { "SIMGPU_DEVICES",     "SIMGPU_MEMORY", "SIMGPU_CONTEXT_BYTES",
                                  "SIMGPU_OTHER_BYTES", "SIMGPU_NAME",   "SIMGPU_FAIL",
                                  "SIMGPU_LIBCUDA",     "SIMGPU_CARD" };
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
}

static inline void sim_env(const char *memory, const char *context_bytes, const char *other_bytes)
{
    sim_env_clear();
    if (memory)
        setenv("SIMGPU_MEMORY", memory, 1);
    if (context_bytes)
        setenv("SIMGPU_CONTEXT_BYTES", context_bytes, 1);
    if (other_bytes)
        setenv("SIMGPU_OTHER_BYTES", other_bytes, 1);
}

/* Redirects fd 2 into a temporary file until stderr_end(), which returns what was written
 * (malloc'd, NUL-terminated). */
struct stderr_capture {
    FILE *file;
    int saved_fd;
};

static inline struct stderr_capture stderr_begin(void)
{
    struct stderr_capture c;
    fflush(stderr);
    c.file = tmpfile();
    c.saved_fd = dup(2);
    if (c.file)
        dup2(fileno(c.file), 2);
    return c;
}

static inline char *stderr_end(struct stderr_capture c)
{
    char *buf = calloc(1, 8192);
    fflush(stderr);
    dup2(c.saved_fd, 2);
    close(c.saved_fd);
    if (c.file && buf) {
        rewind(c.file);
        size_t n = fread(buf, 1, 8191, c.file);
        buf[n] = '\0';
    }
    if (c.file)
        fclose(c.file);
    return buf;
}

#endif
