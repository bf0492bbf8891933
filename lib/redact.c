/* redact.c: keeps secrets given on the command line out of reports, which are shared in bug
 * reports and chat far more freely than the job's launch script.
 *
 * The rules are a list of spellings, not a guess at entropy: a value is replaced only where the
 * flag or variable name says it is a secret, or where it is a URL's credentials. What is replaced
 * becomes REDACT_MARK, so a reader sees that something was there. */
#include "redact.h"

#include <string.h>
#include <strings.h>

/* Flag names (after the dashes, '-' read as '_') whose value is a secret: the name itself, or a
 * name ending in "_" and one of these ("--hf_token", "--wandb-api-key"). */
static const char *const secret_names[] = {
    "token", "api_key", "apikey", "password", "passwd", "secret", "secret_key", "access_key",
    "auth_token", "access_token", NULL,
};

static char lower_us(char c)
{
    if (c == '-')
        return '_';
    if (c >= 'A' && c <= 'Z')
        return (char)(c - 'A' + 'a');
    return c;
}

/* name[0..n) equals word, reading '-' as '_' and ignoring case. */
static bool same(const char *name, size_t n, const char *word)
{
    if (strlen(word) != n)
        return false;
    for (size_t i = 0; i < n; i++)
        if (lower_us(name[i]) != word[i])
            return false;
    return true;
}

static bool secret_name(const char *name, size_t n)
{
    for (const char *const *w = secret_names; *w; w++) {
        size_t l = strlen(*w);
        if (same(name, n, *w))
            return true;
        if (n > l + 1 && lower_us(name[n - l - 1]) == '_' && same(name + n - l, l, *w))
            return true;
    }
    return false;
}

/* The name of a flag: what follows one or two dashes, up to '=' or the end; NULL if arg is not
 * a flag. */
static const char *flag_name(const char *arg, size_t *n)
{
    if (arg[0] != '-')
        return NULL;
    const char *p = arg + (arg[1] == '-' ? 2 : 1);
    size_t l = strcspn(p, "=");
    if (l == 0)
        return NULL;
    *n = l;
    return p;
}

bool redact_is_secret_flag(const char *arg)
{
    size_t n;
    const char *name = flag_name(arg, &n);
    return name && name[n] == '\0' && secret_name(name, n);
}

/* NAME=V with NAME ending (any case) in _KEY, _TOKEN, _SECRET or PASSWORD. */
static bool secret_assignment(const char *arg, size_t name_len)
{
    static const char *const suffixes[] = { "_key", "_token", "_secret", "password", NULL };
    const char *name = arg;
    while (*name == '-' && name_len > 0) {
        name++;
        name_len--;
    }
    for (const char *const *s = suffixes; *s; s++) {
        size_t l = strlen(*s);
        if (name_len >= l && strncasecmp(name + name_len - l, *s, l) == 0)
            return true;
    }
    return false;
}

struct out {
    char *p;
    size_t cap, len;
};

static void put(struct out *o, const char *s, size_t n)
{
    if (o->len + 1 >= o->cap)
        return;
    size_t room = o->cap - 1 - o->len;
    if (n > room)
        n = room;
    memcpy(o->p + o->len, s, n);
    o->len += n;
    o->p[o->len] = '\0';
}

/* Copies s with the credentials of every "scheme://user:pass@host" in it replaced. */
static bool redact_urls(const char *s, struct out *o)
{
    bool changed = false;
    for (;;) {
        const char *sep = strstr(s, "://");
        if (!sep) {
            put(o, s, strlen(s));
            return changed;
        }
        const char *auth = sep + 3;
        size_t auth_len = strcspn(auth, "/?#");
        /* The last '@' of the authority ends the user information (a password may hold '@'). */
        const char *at = NULL;
        for (const char *q = auth; q < auth + auth_len; q++)
            if (*q == '@')
                at = q;
        put(o, s, (size_t)(auth - s));
        if (!at) {
            s = auth;
            continue;
        }
        const char *colon = memchr(auth, ':', (size_t)(at - auth));
        if (colon) {
            put(o, auth, (size_t)(colon + 1 - auth));
        }
        put(o, REDACT_MARK, strlen(REDACT_MARK));
        changed = true;
        s = at; /* from the '@' on */
    }
}

bool redact_arg(const char *arg, bool after_secret_flag, char *out, size_t cap)
{
    struct out o = { out, cap, 0 };
    if (cap == 0)
        return false;
    out[0] = '\0';
    if (after_secret_flag && arg[0] && strncmp(arg, "--", 2) != 0) {
        put(&o, REDACT_MARK, strlen(REDACT_MARK));
        return true;
    }
    const char *eq = strchr(arg, '=');
    if (eq && eq > arg) {
        size_t n;
        const char *name = flag_name(arg, &n);
        if ((name && secret_name(name, n)) || secret_assignment(arg, (size_t)(eq - arg))) {
            put(&o, arg, (size_t)(eq + 1 - arg));
            put(&o, REDACT_MARK, strlen(REDACT_MARK));
            return true;
        }
    }
    return redact_urls(arg, &o);
}
