/* redact.c: keeps secrets given on the command line out of reports, which are shared in bug
 * reports and chat far more freely than the job's launch script.
 *
 * The rules are a list of words, not a guess at entropy: a value is replaced only where a name
 * says it is a secret, or where it is a URL's credentials. One rule reads every name (a flag, a
 * variable, a query parameter, a header, a key in a config string): it is cut into parts at
 * '-', '_', '.', changes of case and digits ("--hf_token", "WANDB_API_KEY", "hub.token",
 * "apiKey"), and it is a secret's name when one part, ignoring case, is one of secret_words, or
 * its last part is one of last_secret_words ("DB_PASS", "&sig=", "--session"; not
 * "--pass-through" or "--signature-version"). Whole parts only: "--monkey", "--keep-cache",
 * "--max_new_tokens", "--passes", "--bypass" are ordinary.
 * What is replaced becomes REDACT_MARK, so a reader sees that something was there.
 *
 * No allocation: the report writer calls this with buffers of its own, once a report. */
#include "redact.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

static const char *const secret_words[] = {
    "token",
    "key",
    "secret",
    "password",
    "passwd",
    "passphrase",
    "pat",
    "auth",
    "authorization",
    "credential",
    "credentials",
    "cookie",
    /* the same run together, as one part */
    "apikey",
    "apitoken",
    "accesstoken",
    "authtoken",
    "accesskey",
    "secretkey",
    "privatekey",
    "privkey",
    "pgpassword", /* libpq's PGPASSWORD */
    /* short names of passwords and tokens */
    "pwd", /* MYSQL_PWD, --db-pwd; not the variable PWD, the working directory (secret_name) */
    "passcode",
    "jwt",
    "bearer",
    "otp",
    "totp",
    "hmac",
    NULL,
};

/* Secret words that are ordinary as the first or a middle part of a name: a secret's only when
 * the name ends with them. "--pass", "DB_PASS", "?X-Amz-Signature=", "&sig=", "--session" are
 * secrets; "--pass-through", "--signature-version s3v4", "--sig-level", "--session-name" are not.
 * ("--passes", "--bypass", "--compass", "--sigma" are other words: whole parts only.) */
static const char *const last_secret_words[] = {
    "pass", "pw", "sig", "signature", "session", "dsn", "sas", "cred", "creds", NULL,
};

/* A secret's name whose first part is one of these names a switch ("--use_auth_token",
 * "--no-token"): the argument after it is not its value. A value given with '=' still is. */
static const char *const switch_words[] = {
    "no", "use", "with", "without", "enable", "disable", "skip", "add", "allow", "ignore", NULL,
};

/* HTTP authentication schemes, kept before the credentials they introduce. */
static const char *const auth_schemes[] = {
    "bearer", "basic", "digest", "token", "negotiate", NULL
};

static bool is_lower(char c)
{
    return c >= 'a' && c <= 'z';
}

static bool is_upper(char c)
{
    return c >= 'A' && c <= 'Z';
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool is_alnum(char c)
{
    return is_lower(c) || is_upper(c) || is_digit(c);
}

/* What a name is made of, in flags, variables, query strings and config keys. */
static bool name_char(char c)
{
    return is_alnum(c) || c == '_' || c == '-' || c == '.';
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t';
}

/* p[0..n) equals word (lower case), ignoring the case of p. */
static bool same_word(const char *p, size_t n, const char *word)
{
    if (strlen(word) != n)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = is_upper(p[i]) ? (char)(p[i] - 'A' + 'a') : p[i];
        if (c != word[i])
            return false;
    }
    return true;
}

static bool in_list(const char *p, size_t n, const char *const *list)
{
    for (; *list; list++)
        if (same_word(p, n, *list))
            return true;
    return false;
}

/* Whether a new part starts at name[i] (0 < i < n) inside a run of letters and digits:
 * "apiKey" -> api|Key, "APIKey" -> API|Key, "key2" -> key|2. */
static bool part_boundary(const char *name, size_t n, size_t i)
{
    char a = name[i - 1], b = name[i];
    if (is_digit(a) != is_digit(b))
        return true;
    if (is_lower(a) && is_upper(b))
        return true;
    return is_upper(a) && is_upper(b) && i + 1 < n && is_lower(name[i + 1]);
}

/* The next part of name[0..n) from *i on; false when there is none. */
static bool next_part(const char *name, size_t n, size_t *i, const char **part, size_t *len)
{
    size_t j = *i;
    while (j < n && !is_alnum(name[j]))
        j++;
    if (j >= n)
        return false;
    size_t b = j++;
    while (j < n && is_alnum(name[j]) && !part_boundary(name, n, j))
        j++;
    *part = name + b;
    *len = j - b;
    *i = j;
    return true;
}

static bool secret_name(const char *name, size_t n)
{
    /* PWD (and OLDPWD, one part) is the shell's working directory, not a password. */
    if (n == 3 && memcmp(name, "PWD", 3) == 0)
        return false;
    const char *part, *last = NULL;
    size_t len, last_len = 0, i = 0;
    while (next_part(name, n, &i, &part, &len)) {
        if (in_list(part, len, secret_words))
            return true;
        last = part;
        last_len = len;
    }
    return last && in_list(last, last_len, last_secret_words);
}

/* A flag (one or more dashes, then a name) that names a secret and takes a value. */
static bool value_flag(const char *flag, size_t n)
{
    if (n < 2 || flag[0] != '-')
        return false;
    for (size_t i = 0; i < n; i++)
        if (!name_char(flag[i]))
            return false;
    const char *first;
    size_t len, i = 0;
    if (!next_part(flag, n, &i, &first, &len))
        return false;
    return !in_list(first, len, switch_words) && secret_name(flag, n);
}

bool redact_is_secret_flag(const char *arg)
{
    return value_flag(arg, strlen(arg));
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

static void mark(struct out *o)
{
    put(o, REDACT_MARK, strlen(REDACT_MARK));
}

/* At s + i, just after "scheme:": the "//" and the authority of a URL. Writes them with the
 * user information's secret replaced and returns where to go on, or 0 when there was none.
 * truncated: the text was cut at its end, so an authority that runs to the end may have lost
 * the '@' that would have shown its credentials. */
static size_t url_authority(const char *s, size_t i, bool truncated, struct out *o, bool *changed)
{
    const char *auth = s + i + 2;
    size_t auth_len = strcspn(auth, "/?#");
    /* The last '@' of the authority ends the user information (a password may hold '@'). */
    const char *at = NULL;
    for (const char *q = auth; q < auth + auth_len; q++)
        if (*q == '@')
            at = q;
    if (!at) {
        if (!truncated || auth[auth_len] != '\0' || auth_len == 0)
            return 0;
        put(o, "//", 2);
        mark(o);
        *changed = true;
        return i + 2 + auth_len;
    }
    put(o, "//", 2);
    const char *colon = memchr(auth, ':', (size_t)(at - auth));
    if (colon)
        put(o, auth, (size_t)(colon + 1 - auth)); /* the user name stays, the password goes */
    mark(o);
    *changed = true;
    return (size_t)(at - s); /* from the '@' on */
}

/* The end of a quoted value that starts at s[i] (the quote), or the end of the text. */
static size_t quoted_end(const char *s, size_t i)
{
    char q = s[i];
    for (size_t j = i + 1; s[j]; j++) {
        if (s[j] == '\\' && s[j + 1])
            j++;
        else if (s[j] == q)
            return j;
    }
    return strlen(s);
}

/* At s[i], a name s[i..j) followed by what may be its value: "name=V", "name: V" (a header, a
 * YAML or JSON key), "--flag V" inside one argument ("sh -c '... --token V'"). When the name is a
 * secret's, writes the name and what separates it, REDACT_MARK for the value, and returns where
 * to go on; returns 0 otherwise. */
static size_t named_value(const char *s, size_t i, size_t j, struct out *o, bool *changed)
{
    size_t k = j;
    bool quoted_name = i > 0 && (s[i - 1] == '"' || s[i - 1] == '\'') && s[k] == s[i - 1];
    if (quoted_name)
        k++;
    while (is_space(s[k]))
        k++;
    char sep = s[k];
    bool flag_word = sep != '=' && s[i] == '-' && is_space(s[j]) && value_flag(s + i, j - i);
    if (sep == ':') {
        /* Not "host:port", "https://" or "auth.example.com:443": a header or a key is
         * followed by a space or a quote, or is itself quoted, and has no dots. */
        if (memchr(s + i, '.', j - i) ||
            !(quoted_name || is_space(s[k + 1]) || s[k + 1] == '"' || s[k + 1] == '\''))
            return 0;
    } else if (sep != '=' && !flag_word) {
        return 0;
    }
    if (!flag_word && !secret_name(s + i, j - i))
        return 0;
    size_t v = flag_word ? k : k + 1;
    while (is_space(s[v]))
        v++;
    if (!s[v])
        return 0; /* nothing there to hide */
    put(o, s + i, v - i);
    size_t end;
    if (s[v] == '"' || s[v] == '\'') {
        end = quoted_end(s, v);
        put(o, s + v, 1);
        mark(o);
        *changed = true;
        return end; /* the closing quote is copied as it comes */
    }
    if (sep == ':' && !flag_word) {
        /* "Authorization: Bearer X": the scheme says what kind of credentials were there. */
        size_t w = v;
        while (is_alnum(s[w]))
            w++;
        if (is_space(s[w]) && in_list(s + v, w - v, auth_schemes)) {
            while (is_space(s[w]))
                w++;
            put(o, s + v, w - v);
            v = w;
        }
        end = v + strcspn(s + v, "\r\n"); /* a header's value runs to the end of its line */
    } else if (flag_word) {
        end = v;
        while (s[end] && !is_space(s[end]))
            end++;
    } else {
        /* "?token=X&page=2", "lr=1 token=X": the value ends where the next pair starts */
        end = v;
        while (s[end] && s[end] != '&' && !is_space(s[end]))
            end++;
    }
    mark(o);
    *changed = true;
    return end;
}

/* Copies s into o with the secrets inside it replaced. */
static bool redact_text(const char *s, bool truncated, struct out *o)
{
    bool changed = false;
    size_t i = 0;
    while (s[i]) {
        if (s[i] == ':' && s[i + 1] == '/' && s[i + 2] == '/') {
            put(o, ":", 1);
            size_t next = url_authority(s, i + 1, truncated, o, &changed);
            if (next) {
                i = next;
                continue;
            }
            i++;
            continue;
        }
        if (name_char(s[i]) && (i == 0 || !name_char(s[i - 1]))) {
            size_t j = i;
            while (name_char(s[j]))
                j++;
            size_t next = named_value(s, i, j, o, &changed);
            if (next) {
                i = next;
                continue;
            }
            put(o, s + i, j - i);
            i = j;
            continue;
        }
        put(o, s + i, 1);
        i++;
    }
    return changed;
}

static bool redact_one(const char *arg, bool after_secret_flag, bool truncated, struct out *o)
{
    o->p[0] = '\0';
    /* After "--token", the next argument is its value, whatever it looks like ("--token
     * -Xk3..."): a secret may start with a dash. Only "--", the end of the options, is not. */
    if (after_secret_flag && arg[0] && strcmp(arg, "--") != 0) {
        mark(o);
        return true;
    }
    /* NAME=V as one argument, NAME after any dashes: all of V is the value ("--password=a&b c"). */
    size_t n = strspn(arg, "-");
    while (name_char(arg[n]))
        n++;
    if (arg[n] == '=' && n > 0 && secret_name(arg, n)) {
        put(o, arg, n + 1);
        mark(o);
        return true;
    }
    return redact_text(arg, truncated, o);
}

bool redact_arg(const char *arg, bool after_secret_flag, char *out, size_t cap)
{
    if (cap == 0)
        return false;
    struct out o = { out, cap, 0 };
    return redact_one(arg, after_secret_flag, false, &o);
}

/* How many of the first n bytes of s are name characters. */
static size_t strspn_name(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n && name_char(s[i]))
        i++;
    return i;
}

bool redact_line(const char *line, char *work, size_t work_size, char *out, size_t cap)
{
    if (cap == 0 || work_size == 0)
        return false;
    /* First the text rules over the whole line, which see across its spaces: a header's value,
     * a quoted key's value, "--token X" ... */
    bool changed = redact_arg(line, false, work, work_size);
    /* ... then each word as the argument it most likely was, with the state of the word before:
     * the value after a secret flag whatever it looks like ("--token -Xk"), after a secret
     * header's name, its scheme kept ("Authorization: Bearer X"). */
    struct out o = { out, cap, 0 };
    out[0] = '\0';
    bool secret_next = false, after_header = false;
    for (char *w = work;;) {
        char *end = strchr(w, ' ');
        char keep = end ? *end : '\0';
        if (end)
            *end = '\0';
        size_t n = strlen(w);
        if (after_header && in_list(w, n, auth_schemes)) {
            put(&o, w, n); /* the scheme says what kind of credentials follow; the next is them */
        } else {
            size_t room = o.cap - o.len;
            changed |= redact_arg(w, secret_next, o.p + o.len, room);
            o.len += strlen(o.p + o.len);
            after_header = n > 1 && w[n - 1] == ':' && strspn_name(w, n - 1) == n - 1 &&
                           secret_name(w, n - 1);
            secret_next = after_header || redact_is_secret_flag(w);
        }
        if (!end)
            break;
        *end = keep;
        put(&o, " ", 1);
        w = end + 1;
    }
    return changed;
}

/* Where to cut s (at least n bytes long) at most n bytes in without splitting a UTF-8 sequence:
 * when s[n] continues one, before the byte that starts it. */
static size_t utf8_cut(const char *s, size_t n)
{
    size_t i = n;
    while (i > 0 && n - i < 3 && ((unsigned char)s[i] & 0xc0) == 0x80)
        i--;
    return ((unsigned char)s[i] & 0xc0) == 0x80 ? n : i;
}

size_t redact_cmdline(int fd, char *work, size_t work_size, size_t max_bytes,
                      void (*emit)(void *ctx, const char *arg), void *ctx)
{
    if (work_size < 3 * 16 + 8)
        return 0;
    /* One argument is seen whole in the window (the kernel allows 128 KiB at exec; a program
     * that rewrote its arguments may have made one longer), and its redacted copy, which can
     * grow to twice its length, goes into the rest. */
    size_t window = (work_size - 8) / 3;
    char *in = work;
    struct out o = { work + window, work_size - window, 0 };
    size_t have = 0, emitted = 0, args = 0;
    bool eof = false, skipping = false, secret_next = false;
    while (emitted < max_bytes) {
        char *nul = memchr(in, '\0', have);
        if (!nul && !eof && have < window) {
            ssize_t r = read(fd, in + have, window - have);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0)
                eof = true;
            else
                have += (size_t)r;
            continue;
        }
        if (skipping) {
            /* the rest of an argument longer than the window, already written as far as seen */
            size_t drop = nul ? (size_t)(nul - in) + 1 : have;
            memmove(in, in + drop, have - drop);
            have -= drop;
            skipping = !nul;
            if (!nul && eof)
                break;
            continue;
        }
        if (!nul && have == 0)
            break; /* the end */
        size_t len = nul ? (size_t)(nul - in) : have < window ? have : window - 1;
        bool truncated = !nul && have == window;
        char keep = in[len];
        in[len] = '\0';
        o.len = 0;
        redact_one(in, secret_next, truncated, &o);
        secret_next = !truncated && redact_is_secret_flag(in);
        in[len] = keep;
        /* Cut after redacting, so a cut can only take text away, never uncover a secret. */
        size_t n = o.len;
        if (n + 1 > max_bytes - emitted) {
            n = utf8_cut(o.p, max_bytes - emitted - 1);
            o.p[n] = '\0';
            emit(ctx, o.p);
            args++;
            break;
        }
        emit(ctx, o.p);
        args++;
        emitted += n + 1;
        if (truncated) {
            skipping = true;
            have = 0;
            continue;
        }
        size_t drop = nul ? len + 1 : have;
        memmove(in, in + drop, have - drop);
        have -= drop;
    }
    return args;
}
