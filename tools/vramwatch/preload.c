/* preload.c: where libvramwatch.so and the Python companion are, and the LD_PRELOAD that puts
 * the library in front: shared by the commands that run a program under the library (run, fit). */
#include "preload.h"

#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

#ifndef VW_LIBDIR
#define VW_LIBDIR "/usr/local/lib"
#endif
#ifndef VW_PYDIR
#define VW_PYDIR "/usr/local/share/vramwatch/python"
#endif

static bool regular_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static char *join(const char *dir, const char *name)
{
    struct strbuf b = { 0 };
    sb_printf(&b, "%s/%s", dir, name);
    return b.s;
}

/* The folder this executable is in, from /proc/self/exe (argv[0] may be a bare name). */
static char *self_dir(void)
{
    size_t cap = 256;
    for (;;) {
        char *buf = util_xmalloc(cap);
        ssize_t n = readlink("/proc/self/exe", buf, cap);
        if (n < 0) {
            free(buf);
            return NULL;
        }
        if ((size_t)n < cap) {
            buf[n] = '\0';
            char *slash = strrchr(buf, '/');
            if (slash)
                *slash = '\0';
            return buf;
        }
        free(buf);
        cap *= 2;
    }
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

char *preload_find_library(struct strbuf *why)
{
    const char *env = getenv("VRAMWATCH_LIB");
    if (env && *env) {
        if (!regular_file(env)) {
            sb_printf(why, "VRAMWATCH_LIB=%s: no such file", env);
            return NULL;
        }
        return realpath(env, NULL);
    }
    char *dir = self_dir();
    char *candidates[3] = { NULL, NULL, NULL };
    if (dir) {
        candidates[0] = join(dir, PRELOAD_LIBRARY);
        if (ends_with(dir, "/tools/vramwatch"))
            candidates[1] = join(dir, "../../lib/" PRELOAD_LIBRARY);
    }
    candidates[2] = util_xstrdup(VW_LIBDIR "/" PRELOAD_LIBRARY);
    char *found = NULL;
    sb_add(why, "cannot find " PRELOAD_LIBRARY " (looked for");
    for (size_t i = 0; i < 3; i++) {
        if (!candidates[i])
            continue;
        if (!found && regular_file(candidates[i]))
            found = realpath(candidates[i], NULL);
        sb_printf(why, " %s", candidates[i]);
        free(candidates[i]);
    }
    sb_add(why, "); set VRAMWATCH_LIB to its path");
    free(dir);
    return found;
}

char *preload_find_companion(void)
{
    char *dir = self_dir();
    char *candidates[3] = { NULL, NULL, NULL };
    if (dir) {
        /* the build tree: meson copies the package beside the executable */
        candidates[0] = join(dir, "python");
        /* An installed tree moved as a whole, or staged with DESTDIR: bin/ beside share/. */
        candidates[1] = join(dir, "../share/vramwatch/python");
    }
    candidates[2] = util_xstrdup(VW_PYDIR);
    char *found = NULL;
    for (size_t i = 0; i < 3; i++) {
        if (!candidates[i])
            continue;
        char *marker = join(candidates[i], PRELOAD_COMPANION_MODULE);
        if (!found && regular_file(marker))
            found = realpath(candidates[i], NULL);
        free(marker);
        free(candidates[i]);
    }
    free(dir);
    return found;
}

char *preload_value(const char *lib, const char *old)
{
    struct strbuf pre = { 0 };
    /* ld.so splits LD_PRELOAD at spaces and colons. Ours goes first, so the application's
     * calls reach it before any other interposer; only sanitizer runtimes, which must be the
     * first library loaded, stay in front of it. */
    const char *rest = old ? old : "";
    while (*rest) {
        size_t len = strcspn(rest, ": ");
        const char *base = rest;
        for (const char *c = rest; c < rest + len; c++)
            if (*c == '/')
                base = c + 1;
        bool sanitizer =
                len > 0 && (!strncmp(base, "libasan", 7) || !strncmp(base, "libtsan", 7) ||
                            !strncmp(base, "libubsan", 8) || !strncmp(base, "libclang_rt.", 12));
        if (len > 0 && !sanitizer)
            break;
        if (len > 0) {
            sb_addn(&pre, rest, len);
            sb_addc(&pre, ':');
        }
        rest += len;
        rest += strspn(rest, ": ");
    }
    sb_add(&pre, lib);
    if (*rest) {
        sb_addc(&pre, ':');
        sb_add(&pre, rest);
    }
    return pre.s ? pre.s : util_xstrdup(lib);
}
