/* simcard.c: the simulated card a command runs a program on, and the environment that puts it
 * there: built once here for run --sim, fit --sim and sim (simcard.h says why it preloads). */
#include "simcard.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "preload.h"
#include "sb.h"
#include "sizes.h"

/* The simulator's cards, from its own table: key, full name and memory; the other fields (compute
 * capability, SMs, ...) are the simulator's business. */
static const struct {
    const char *key, *name;
    uint64_t bytes;
} cards[] = {
#define CARD(k, n, b, ...) { k, n, b },
#include "../../simgpu/cards.def"
#undef CARD
};
#define N_CARDS (sizeof cards / sizeof cards[0])

/* Case, and '-', '_' and ' ' told apart from nothing else: "a100_80gb" is "A100-80GB". */
static bool same_name(const char *a, const char *b)
{
    for (;; a++, b++) {
        char x = *a, y = *b;
        if (x == '_' || x == ' ')
            x = '-';
        if (y == '_' || y == ' ')
            y = '-';
        if (x >= 'A' && x <= 'Z')
            x = (char)(x - 'A' + 'a');
        if (y >= 'A' && y <= 'Z')
            y = (char)(y - 'A' + 'a');
        if (x != y)
            return false;
        if (!x)
            return true;
    }
}

static void add_keys(struct strbuf *b)
{
    for (size_t i = 0; i < N_CARDS; i++)
        sb_printf(b, "%s%s", i ? ", " : "", cards[i].key);
}

bool simcard_parse(const char *s, struct simcard *out, struct strbuf *why)
{
    /* Names first: a card's name never loses to the size grammar. */
    for (size_t i = 0; i < N_CARDS; i++) {
        if (same_name(s, cards[i].key) || same_name(s, cards[i].name)) {
            *out = (struct simcard){ cards[i].key, cards[i].name, cards[i].bytes };
            return true;
        }
    }
    uint64_t v;
    const char *swhy = NULL;
    if (sizes_parse(s, &v, &swhy)) {
        if (v == 0) {
            sb_add(why, "a card needs memory: expected a size such as 16GiB");
            return false;
        }
        if (v < SIMCARD_MIN_BYTES) {
            /* "16" is 16 bytes: most likely the unit was left out. */
            size_t n = strspn(s + strspn(s, " \t"), "0123456789.");
            sb_printf(why,
                      "%llu bytes is too small for a card (at least 1 MiB); did you mean %.*sGiB?",
                      (unsigned long long)v, (int)n, s + strspn(s, " \t"));
            return false;
        }
        if (v > SIMCARD_MAX_BYTES) {
            sb_add(why, "larger than the simulator's 16 TiB per device");
            return false;
        }
        *out = (struct simcard){ NULL, NULL, v };
        return true;
    }
    /* Something that starts like a number was meant as a size: say what is wrong with it. */
    const char *t = s + strspn(s, " \t");
    if ((*t >= '0' && *t <= '9') || *t == '.')
        sb_printf(why, "%s; a card is a size (16GiB) or a name (", swhy ? swhy : "not a size");
    else
        sb_add(why, "not a size or a card the simulator knows (");
    add_keys(why);
    sb_add(why, ")");
    return false;
}

void simcard_list(FILE *f)
{
    int w = 0;
    for (size_t i = 0; i < N_CARDS; i++)
        if ((int)strlen(cards[i].key) > w)
            w = (int)strlen(cards[i].key);
    for (size_t i = 0; i < N_CARDS; i++) {
        char sz[UTIL_SIZE_LEN];
        fprintf(f, "  %-*s  %10s  %s\n", w, cards[i].key,
                util_fmt_size((int64_t)cards[i].bytes, sz), cards[i].name);
    }
}

/* ---- the environment ---- */

static void set_var(struct simcard_env *env, const char *name, char *value)
{
    if (env->n < sizeof env->v / sizeof env->v[0])
        env->v[env->n++] = (struct simcard_var){ name, value };
    else
        free(value);
}

/* Whether [s, s + len) is one of the n strings of list. */
static bool in_list(char *const *list, size_t n, const char *s, size_t len)
{
    for (size_t i = 0; i < n; i++)
        if (strlen(list[i]) == len && strncmp(list[i], s, len) == 0)
            return true;
    return false;
}

/* Whether the path [s, s + len) names the library: libvramwatch.so, or the file of its soname or
 * its version (libvramwatch.so.0, libvramwatch.so.0.1.0), which a path taken through realpath
 * names. */
static bool names_library(const char *s, size_t len)
{
    const char *b = s;
    for (const char *c = s; c < s + len; c++)
        if (*c == '/')
            b = c + 1;
    size_t n = (size_t)(s + len - b), k = strlen(PRELOAD_LIBRARY);
    if (n < k || strncmp(b, PRELOAD_LIBRARY, k) != 0)
        return false;
    if (n == k)
        return true;
    if (b[k] != '.' || n == k + 1)
        return false;
    for (size_t i = k + 1; i < n; i++)
        if (!((b[i] >= '0' && b[i] <= '9') || b[i] == '.'))
            return false;
    return true;
}

/* The entries of LD_PRELOAD (split at colons and spaces, as ld.so splits it) less ours, which go
 * in front, and, when the library is not wanted, less libvramwatch.so. */
static char *other_preloads(const char *old, char *const *ours, size_t n, bool drop_library)
{
    struct strbuf b = { 0 };
    for (const char *p = old ? old : ""; *p;) {
        size_t len = strcspn(p, ": ");
        bool ours_or_library = in_list(ours, n, p, len) ||
                               (drop_library && names_library(p, len));
        if (len > 0 && !ours_or_library) {
            if (b.len)
                sb_addc(&b, ':');
            sb_addn(&b, p, len);
        }
        p += len;
        p += strspn(p, ": ");
    }
    return b.s;
}

/* PYTHONPATH without the companion's folder (one that holds its module), or NULL when it has
 * none. */
static char *without_companion(const char *old)
{
    if (!old || !*old)
        return NULL;
    struct strbuf b = { 0 };
    bool dropped = false, first = true;
    for (const char *p = old;;) {
        size_t len = strcspn(p, ":");
        struct strbuf marker = { 0 };
        sb_printf(&marker, "%.*s/%s", (int)len, p, PRELOAD_COMPANION_MODULE);
        struct stat st;
        if (len > 0 && stat(marker.s, &st) == 0 && S_ISREG(st.st_mode)) {
            dropped = true;
        } else {
            if (!first)
                sb_addc(&b, ':');
            sb_addn(&b, p, len);
            first = false;
        }
        sb_free(&marker);
        p += len;
        if (!*p)
            break;
        p++;
    }
    if (!dropped) {
        sb_free(&b);
        return NULL;
    }
    return b.s ? b.s : util_xstrdup("");
}

/* The stand-ins of the simulator's folder (*dir, *libs), or false with the reason in why. */
static bool find_standins(char **dir, char ***libs, size_t *n, struct strbuf *why)
{
    *libs = NULL;
    *n = 0;
    /* (the search writes its reason whether it finds the folder or not) */
    struct strbuf searched = { 0 };
    *dir = preload_find_simgpu(&searched);
    if (!*dir)
        sb_add(why, sb_str(&searched));
    sb_free(&searched);
    if (!*dir)
        return false;
    if (strpbrk(*dir, " :\t\n")) {
        sb_printf(why,
                  "%s: LD_PRELOAD cannot hold a path with a space or colon; set VRAMWATCH_SIMGPU_DIR "
                  "to a copy elsewhere",
                  *dir);
        return false;
    }
    *libs = preload_standins(*dir, n);
    if (!*libs) {
        sb_printf(why, "no simulated GPU: no stand-in library (lib*.so.*) in %s", *dir);
        return false;
    }
    return true;
}

/* LD_LIBRARY_PATH with dir first and the other entries after it. */
static char *library_path(const char *dir, const char *old)
{
    struct strbuf path = { 0 };
    sb_add(&path, dir);
    for (const char *p = old ? old : ""; *p;) {
        size_t len = strcspn(p, ":");
        if (len > 0 && !(len == strlen(dir) && strncmp(p, dir, len) == 0))
            sb_printf(&path, ":%.*s", (int)len, p);
        p += len;
        p += strspn(p, ":");
    }
    return path.s;
}

bool simcard_env(const struct simcard *card, const char *lib, struct simcard_env *env,
                 struct strbuf *why)
{
    memset(env, 0, sizeof *env);
    char *dir, **libs;
    size_t n;
    if (!find_standins(&dir, &libs, &n, why)) {
        preload_free_list(libs, n);
        free(dir);
        return false;
    }
    /* ours: the library (when given), then the stand-ins in the order of their names */
    char **ours = util_xcalloc(n + 1, sizeof *ours);
    size_t n_ours = 0;
    struct strbuf pre = { 0 };
    if (lib)
        ours[n_ours++] = (char *)lib;
    for (size_t i = 0; i < n; i++)
        ours[n_ours++] = libs[i];
    for (size_t i = 0; i < n_ours; i++)
        sb_printf(&pre, "%s%s", i ? ":" : "", ours[i]);
    char *rest = other_preloads(getenv("LD_PRELOAD"), ours, n_ours, !lib);
    set_var(env, "LD_PRELOAD", preload_value(pre.s, rest));
    free(rest);
    sb_free(&pre);
    free(ours);
    set_var(env, "LD_LIBRARY_PATH", library_path(dir, getenv("LD_LIBRARY_PATH")));

    if (card->key) {
        set_var(env, "SIMGPU_CARD", util_xstrdup(card->key));
        set_var(env, "SIMGPU_MEMORY", NULL);
    } else {
        struct strbuf b = { 0 };
        sb_printf(&b, "%llu", (unsigned long long)card->bytes);
        set_var(env, "SIMGPU_MEMORY", b.s);
        set_var(env, "SIMGPU_CARD", NULL);
    }
    if (!lib) {
        char *py = without_companion(getenv("PYTHONPATH"));
        if (py)
            set_var(env, "PYTHONPATH", py);
        set_var(env, "VRAMWATCH_SIM", NULL);
    } else {
        /* The report keeps VRAMWATCH_* variables: the advice then gives its fit and measuring
         * commands on the same simulated card (tools/vramwatch/advice/advice.c). */
        struct strbuf b = { 0 };
        if (card->key)
            sb_add(&b, card->key);
        else
            util_add_size_arg(&b, card->bytes);
        set_var(env, "VRAMWATCH_SIM", b.s);
    }
    preload_free_list(libs, n);
    free(dir);
    return true;
}

bool simcard_apply(const struct simcard_env *env, struct strbuf *why)
{
    for (size_t i = 0; i < env->n; i++) {
        const struct simcard_var *v = &env->v[i];
        int rc = v->value ? setenv(v->name, v->value, 1) : unsetenv(v->name);
        if (rc != 0) {
            sb_printf(why, "cannot set %s: %s", v->name, strerror(errno));
            return false;
        }
    }
    return true;
}

/* A value as the shell reads it back: bare when nothing in it is special, else in single
 * quotes (a quote inside as '\''). */
static void put_quoted(FILE *f, const char *s)
{
    static const char safe[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
                               "_./:,+=@%-";
    if (*s && strspn(s, safe) == strlen(s)) {
        fputs(s, f);
        return;
    }
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'')
            fputs("'\\''", f);
        else
            fputc(*s, f);
    }
    fputc('\'', f);
}

void simcard_print(FILE *f, const struct simcard_env *env)
{
    for (size_t i = 0; i < env->n; i++) {
        const struct simcard_var *v = &env->v[i];
        if (!v->value) {
            if (getenv(v->name))
                fprintf(f, "unset %s\n", v->name);
            continue;
        }
        fprintf(f, "export %s=", v->name);
        put_quoted(f, v->value);
        fputc('\n', f);
    }
}

void simcard_env_free(struct simcard_env *env)
{
    for (size_t i = 0; i < env->n; i++)
        free(env->v[i].value);
    env->n = 0;
}

bool simcard_option(struct util_args *a, struct simcard *out)
{
    struct strbuf why = { 0 };
    bool ok = simcard_parse(a->value, out, &why);
    if (!ok)
        util_args_bad(a, sb_str(&why));
    sb_free(&why);
    return ok;
}

bool simcard_setup(const char *cmd, const struct simcard *card, const char *lib)
{
    struct simcard_env env;
    struct strbuf why = { 0 };
    bool ok = simcard_env(card, lib, &env, &why) && simcard_apply(&env, &why);
    if (!ok)
        util_err("%s: --sim: %s", cmd, sb_str(&why));
    simcard_env_free(&env);
    sb_free(&why);
    return ok;
}
