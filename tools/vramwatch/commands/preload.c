/* preload.c: where libvramwatch.so, the Python companion and the simulated GPU's stand-ins are, and
 * the LD_PRELOAD that puts the library in front: shared by the commands that run a program under
 * the library (run, fit) or on the simulated GPU (run --sim, fit --sim, sim). */
#include "preload.h"

#include <dirent.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "sb.h"
#include "util.h"


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
    char *candidates[4] = { NULL, NULL, NULL, NULL };
    if (dir) {
        candidates[0] = join(dir, PRELOAD_LIBRARY);
        if (ends_with(dir, "/tools/vramwatch")) {
            candidates[1] = join(dir, "../../lib/" PRELOAD_LIBRARY);
            /* A build folder set up before the library had a soname keeps only the soname's
             * link after it is rebuilt: ninja removes the old file, and the new link to the
             * same name is made only when the library is linked again. */
            candidates[2] = join(dir, "../../lib/" VW_LIB_SONAME);
        }
    }
    candidates[3] = util_xstrdup(VW_LIBDIR "/" PRELOAD_LIBRARY);
    char *found = NULL;
    sb_add(why, "cannot find " PRELOAD_LIBRARY " (looked for");
    for (size_t i = 0; i < 4; i++) {
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

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

char **preload_standins(const char *dir, size_t *n)
{
    *n = 0;
    DIR *d = opendir(dir);
    if (!d)
        return NULL;
    char **names = NULL;
    size_t cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        struct stat st;
        /* The real file only: meson's libcuda.so -> libcuda.so.1 links would load it twice. A
         * name with a space or colon could not stand in LD_PRELOAD. */
        if (fnmatch("lib*.so.*", e->d_name, FNM_PERIOD) != 0 || strpbrk(e->d_name, " :") ||
            fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            names = util_xrealloc(names, cap * sizeof *names);
        }
        names[(*n)++] = util_xstrdup(e->d_name);
    }
    closedir(d);
    if (!*n)
        return NULL;
    qsort(names, *n, sizeof *names, by_name);
    for (size_t i = 0; i < *n; i++) {
        char *path = join(dir, names[i]);
        free(names[i]);
        names[i] = path;
    }
    return names;
}

void preload_free_list(char **list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(list[i]);
    free(list);
}

static bool holds_standins(const char *dir)
{
    size_t n;
    char **libs = preload_standins(dir, &n);
    preload_free_list(libs, n);
    return n > 0;
}

char *preload_find_simgpu(struct strbuf *why)
{
    const char *env = getenv("VRAMWATCH_SIMGPU_DIR");
    if (env && *env) {
        struct stat st;
        if (stat(env, &st) != 0 || !S_ISDIR(st.st_mode))
            sb_printf(why, "VRAMWATCH_SIMGPU_DIR=%s: no such folder", env);
        else if (!holds_standins(env))
            sb_printf(why, "VRAMWATCH_SIMGPU_DIR=%s: no stand-in library (lib*.so.*) in it", env);
        else
            return realpath(env, NULL);
        return NULL;
    }
    char *dir = self_dir();
    char *candidates[2] = { NULL, NULL };
    if (dir && ends_with(dir, "/tools/vramwatch"))
        candidates[0] = join(dir, "../simgpu");
    candidates[1] = util_xstrdup(VW_SIMGPU_DIR);
    char *found = NULL;
    sb_add(why, "no simulated GPU: no stand-in library (lib*.so.*) in");
    for (size_t i = 0, said = 0; i < 2; i++) {
        if (!candidates[i])
            continue;
        if (!found && holds_standins(candidates[i]))
            found = realpath(candidates[i], NULL);
        sb_printf(why, "%s %s", said++ ? " or" : "", candidates[i]);
        free(candidates[i]);
    }
    sb_add(why, "; build tools/simgpu, or set VRAMWATCH_SIMGPU_DIR to the folder of its libraries");
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
