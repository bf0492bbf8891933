/* json.c: reads report files into cJSON trees that keep each number's literal digits, and prints them back. */
#include "json.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static bool read_all(const char *path, char **data, size_t *len, struct strbuf *err)
{
    /* Reports are files. A FIFO or a terminal can block for ever, a device such as /dev/zero
     * never ends, and opening one can act on it (/dev/ptmx): none is opened (util_open_regular). */
    struct stat st;
    const char *kind = NULL;
    int fd = util_open_regular(AT_FDCWD, path, 0, &st, &kind);
    if (fd < 0) {
        if (kind)
            sb_printf(err, "is %s, not a report file", kind);
        else
            sb_printf(err, "cannot open: %s", strerror(errno));
        return false;
    }
    /* A regular file's size is known before reading: a file over the limit is refused at once,
     * without touching its contents (a 1 GB file costs one fstat, not a second and a gigabyte). */
    if ((uint64_t)st.st_size > JSON_MAX_FILE) {
        sb_printf(err, "larger than %d MiB: not a vramwatch report", JSON_MAX_FILE_MIB);
        close(fd);
        return false;
    }
    size_t cap = st.st_size > 0 ? (size_t)st.st_size + 1 : 1 << 16, n = 0;
    char *buf = util_xmalloc(cap + 1);
    for (;;) {
        if (n == cap) {
            /* Files that grow while read, or whose size says 0 (/proc): the same limit,
             * counted as they come. */
            if (cap > JSON_MAX_FILE) {
                sb_printf(err, "larger than %d MiB: not a vramwatch report", JSON_MAX_FILE_MIB);
                goto fail;
            }
            cap = cap * 2 > JSON_MAX_FILE + 1 ? JSON_MAX_FILE + 1 : cap * 2;
            buf = util_xrealloc(buf, cap + 1);
        }
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            sb_printf(err, "cannot read: %s", strerror(errno));
            goto fail;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    if (n > JSON_MAX_FILE) {
        sb_printf(err, "larger than %d MiB: not a vramwatch report", JSON_MAX_FILE_MIB);
        goto fail;
    }
    close(fd);
    buf[n] = '\0';
    *data = buf;
    *len = n;
    return true;
fail:
    close(fd);
    free(buf);
    return false;
}

enum check_result {
    CHECK_OK,
    CHECK_EARLY_END,
    CHECK_ERROR,
    CHECK_TOO_DEEP,
    CHECK_TOO_MANY,
    CHECK_TRAILING,
    CHECK_BAD_UTF8
};

struct checker {
    const char *s;
    size_t len, i; /* i: where a problem is, on return */
    size_t values; /* counted up to JSON_MAX_VALUES + 1 */
};

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool is_hex(char c)
{
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* Whether the n bytes at s (the end of the text) could begin a UTF-8 sequence that the cut took
 * the rest of: then the file was truncated, not badly encoded. */
static bool utf8_prefix(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t want = p[0] >= 0xf0 && p[0] <= 0xf4   ? 4
                  : p[0] >= 0xe0                 ? 3
                  : p[0] >= 0xc2 && p[0] <= 0xdf ? 2
                                                 : 0;
    if (want == 0 || n >= want)
        return false;
    for (size_t i = 1; i < n; i++)
        if ((p[i] & 0xc0) != 0x80)
            return false;
    return true;
}

/* A string from its opening quote; leaves i after the closing one. */
static enum check_result check_string(struct checker *k)
{
    const char *s = k->s;
    size_t j = k->i + 1;
    for (;;) {
        if (j >= k->len)
            return CHECK_EARLY_END;
        unsigned char c = (unsigned char)s[j];
        if (c == '"')
            break;
        if (c < 0x20) {
            k->i = j;
            return CHECK_ERROR;
        }
        if (c >= 0x80) {
            /* JSON text is UTF-8 (RFC 8259), and the library writes nothing else: bytes that
             * are not would only reach a terminal or a web page as garbage. */
            size_t l = util_utf8_len((const unsigned char *)s + j, k->len - j);
            if (l == 0) {
                k->i = j;
                return j + 4 > k->len && utf8_prefix(s + j, k->len - j) ? CHECK_EARLY_END
                                                                        : CHECK_BAD_UTF8;
            }
            j += l;
            continue;
        }
        if (c != '\\') {
            j++;
            continue;
        }
        if (j + 1 >= k->len)
            return CHECK_EARLY_END;
        char e = s[j + 1];
        if (e == 'u') {
            for (size_t h = 0; h < 4; h++) {
                if (j + 2 + h >= k->len)
                    return CHECK_EARLY_END;
                if (!is_hex(s[j + 2 + h])) {
                    k->i = j;
                    return CHECK_ERROR;
                }
            }
            j += 6;
        } else if (strchr("\"\\/bfnrt", e) && e) {
            j += 2;
        } else {
            k->i = j;
            return CHECK_ERROR;
        }
    }
    k->i = j + 1;
    return CHECK_OK;
}

/* One or more digits from *j, which moves past them. */
static enum check_result check_digits(struct checker *k, size_t *j)
{
    if (*j >= k->len)
        return CHECK_EARLY_END;
    if (!is_digit(k->s[*j])) {
        k->i = *j;
        return CHECK_ERROR;
    }
    while (*j < k->len && is_digit(k->s[*j]))
        (*j)++;
    return CHECK_OK;
}

/* A number by RFC 8259's grammar. */
static enum check_result check_number(struct checker *k)
{
    const char *s = k->s;
    size_t j = k->i, len = k->len;
    enum check_result r;
    if (s[j] == '-')
        j++;
    if (j < len && s[j] == '0')
        j++;
    else if ((r = check_digits(k, &j)) != CHECK_OK)
        return r;
    if (j < len && s[j] == '.') {
        j++;
        if ((r = check_digits(k, &j)) != CHECK_OK)
            return r;
    }
    if (j < len && (s[j] == 'e' || s[j] == 'E')) {
        j++;
        if (j < len && (s[j] == '+' || s[j] == '-'))
            j++;
        if ((r = check_digits(k, &j)) != CHECK_OK)
            return r;
    }
    k->i = j;
    return CHECK_OK;
}

static enum check_result check_word(struct checker *k, const char *word)
{
    size_t n = strlen(word);
    for (size_t w = 0; w < n; w++) {
        if (k->i + w >= k->len)
            return CHECK_EARLY_END;
        if (k->s[k->i + w] != word[w]) {
            k->i += w;
            return CHECK_ERROR;
        }
    }
    k->i += n;
    return CHECK_OK;
}

/* What the checker expects next. */
enum want { W_VALUE, W_VALUE_OR_CLOSE, W_KEY_OR_CLOSE, W_KEY, W_COLON, W_COMMA_OR_CLOSE, W_END };

/* Checks the whole text against JSON's grammar before cJSON sees it, without recursion. It tells
 * a file cut short (every byte fine, the text just stops) from a broken one, and bounds the
 * nesting and the number of values, so what cJSON then builds is bounded too. */
static enum check_result check(struct checker *k)
{
    char stack[JSON_MAX_DEPTH];
    size_t depth = 0;
    enum want want = W_VALUE;
    const char *s = k->s;
    k->i = 0;
    for (;;) {
        while (k->i < k->len &&
               (s[k->i] == ' ' || s[k->i] == '\t' || s[k->i] == '\n' || s[k->i] == '\r'))
            k->i++;
        if (k->i >= k->len)
            return want == W_END ? CHECK_OK : CHECK_EARLY_END;
        char c = s[k->i];
        enum check_result r = CHECK_OK;
        bool value_done = false;
        switch (want) {
        case W_END:
            return CHECK_TRAILING;
        case W_COLON:
            if (c != ':')
                return CHECK_ERROR;
            k->i++;
            want = W_VALUE;
            continue;
        case W_KEY:
        case W_KEY_OR_CLOSE:
            if (c == '}' && want == W_KEY_OR_CLOSE) {
                k->i++;
                depth--;
                value_done = true;
                break;
            }
            if (c != '"')
                return CHECK_ERROR;
            if ((r = check_string(k)) != CHECK_OK)
                return r;
            want = W_COLON;
            continue;
        case W_COMMA_OR_CLOSE:
            if (c == ',') {
                k->i++;
                want = stack[depth - 1] == '[' ? W_VALUE : W_KEY;
                continue;
            }
            if ((c == ']' && stack[depth - 1] == '[') || (c == '}' && stack[depth - 1] == '{')) {
                k->i++;
                depth--;
                value_done = true;
                break;
            }
            return CHECK_ERROR;
        case W_VALUE:
        case W_VALUE_OR_CLOSE:
            if (c == ']' && want == W_VALUE_OR_CLOSE) {
                k->i++;
                depth--;
                value_done = true;
                break;
            }
            if (++k->values > JSON_MAX_VALUES)
                return CHECK_TOO_MANY;
            if (c == '[' || c == '{') {
                if (depth == JSON_MAX_DEPTH)
                    return CHECK_TOO_DEEP;
                stack[depth++] = c;
                k->i++;
                want = c == '[' ? W_VALUE_OR_CLOSE : W_KEY_OR_CLOSE;
                continue;
            }
            if (c == '"')
                r = check_string(k);
            else if (c == '-' || is_digit(c))
                r = check_number(k);
            else if (c == 't')
                r = check_word(k, "true");
            else if (c == 'f')
                r = check_word(k, "false");
            else if (c == 'n')
                r = check_word(k, "null");
            else
                return CHECK_ERROR;
            if (r != CHECK_OK)
                return r;
            value_done = true;
            break;
        }
        if (value_done)
            want = depth == 0 ? W_END : W_COMMA_OR_CLOSE;
    }
}

/* The next number literal of text (which check() accepted) from *pos on: outside strings,
 * only a number starts with '-' or a digit. Found afresh rather than noted by check(), as a
 * list of every literal's place would cost 16 bytes a number more at the peak. */
static bool next_number(const char *s, size_t len, size_t *pos, size_t *start)
{
    size_t i = *pos;
    while (i < len) {
        char c = s[i];
        if (c == '"') {
            for (i++; i < len && s[i] != '"'; i++)
                if (s[i] == '\\')
                    i++;
            i++;
        } else if (c == '-' || is_digit(c)) {
            *start = i;
            while (i < len && (is_digit(s[i]) || strchr("+-.eE", s[i])))
                i++;
            *pos = i;
            return true;
        } else {
            i++;
        }
    }
    *pos = len;
    return false;
}

/* Gives every number node its literal: cJSON builds number nodes in document order, and the
 * walk here goes in the same order. Depth is bounded by check(). */
static bool attach(cJSON *item, const char *text, size_t len, size_t *pos)
{
    for (; item; item = item->next) {
        size_t start;
        if (cJSON_IsNumber(item)) {
            if (!next_number(text, len, pos, &start))
                return false;
            size_t n = *pos - start;
            char *lit = util_xmalloc(n + 1);
            memcpy(lit, text + start, n);
            lit[n] = '\0';
            item->valuestring = lit; /* freed by cJSON_Delete like a string's */
        }
        if (item->child && !attach(item->child, text, len, pos))
            return false;
    }
    return true;
}

static void position(const char *s, size_t off, size_t *line, size_t *col)
{
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < off; i++) {
        if (s[i] == '\n') {
            (*line)++;
            *col = 1;
        } else {
            (*col)++;
        }
    }
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* A name given twice in one object. cJSON keeps both and its lookups find the first, where
 * Python's json (and most readers) take the last: a report with "failures": [] before the real
 * "failures" read as a run without failures here and with them there. Such a file is refused,
 * at any depth. The names of each object are sorted, so a large object costs n log n. Writes
 * where the duplicate is ("failures[0]: ") and the name into err; depth is bounded by check(). */
static bool duplicate_key(const cJSON *item, struct strbuf *where, struct strbuf *err)
{
    size_t n = 0;
    for (const cJSON *c = item->child; c; c = c->next)
        n++;
    if (cJSON_IsObject(item) && n > 1) {
        const char **names = util_xcalloc(n, sizeof(*names));
        size_t i = 0;
        for (const cJSON *c = item->child; c; c = c->next)
            names[i++] = c->string ? c->string : "";
        qsort(names, n, sizeof(*names), compare_names);
        const char *dup = NULL;
        for (i = 1; i < n && !dup; i++)
            if (strcmp(names[i - 1], names[i]) == 0)
                dup = names[i];
        if (dup)
            sb_printf(err, "%s%sduplicate key \"%s\": not a vramwatch report", sb_str(where),
                      where->len ? ": " : "", dup);
        free(names);
        if (dup)
            return true;
    }
    size_t index = 0;
    for (const cJSON *c = item->child; c; c = c->next, index++) {
        if (!c->child)
            continue;
        size_t keep = where->len;
        if (cJSON_IsObject(item))
            sb_printf(where, "%s%s", keep ? "." : "", c->string ? c->string : "");
        else
            sb_printf(where, "[%zu]", index);
        bool found = duplicate_key(c, where, err);
        sb_truncate(where, keep);
        if (found)
            return true;
    }
    return false;
}

cJSON *json_load_file(const char *path, struct strbuf *err)
{
    char *text;
    size_t len;
    if (!read_all(path, &text, &len, err))
        return NULL;
    cJSON *root = NULL;
    struct checker k = { text, len, 0, 0 };
    size_t line, col;
    switch (check(&k)) {
    case CHECK_OK:
        break;
    case CHECK_EARLY_END:
        if (strspn(text, " \t\r\n") == len)
            sb_add(err, "empty file: not a vramwatch report");
        else
            sb_add(err, "not valid JSON: the text ends before the JSON does (truncated?)");
        goto out;
    case CHECK_TOO_DEEP:
        sb_printf(err, "nested more than %d levels deep: not a vramwatch report", JSON_MAX_DEPTH);
        goto out;
    case CHECK_TOO_MANY:
        sb_printf(err,
                  "more than %d million JSON values: not a vramwatch report (a merged job this "
                  "large: merge fewer reports at a time)",
                  JSON_MAX_VALUES / 1000000);
        goto out;
    case CHECK_TRAILING:
        position(text, k.i, &line, &col);
        sb_printf(err, "not valid JSON: more text after the end, at line %zu, column %zu", line,
                  col);
        goto out;
    case CHECK_BAD_UTF8:
        position(text, k.i, &line, &col);
        sb_printf(err, "not valid JSON: bytes that are not UTF-8 at line %zu, column %zu", line,
                  col);
        goto out;
    case CHECK_ERROR:
        position(text, k.i, &line, &col);
        sb_printf(err, "not valid JSON at line %zu, column %zu", line, col);
        goto out;
    }
    const char *end = NULL;
    root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!root) {
        /* Grammatical JSON cJSON still refuses, such as a lone UTF-16 surrogate escape. */
        size_t off = end && end >= text && end <= text + len ? (size_t)(end - text) : 0;
        position(text, off, &line, &col);
        sb_printf(err, "not valid JSON at line %zu, column %zu", line, col);
        goto out;
    }
    struct strbuf where = { 0 };
    bool dup = duplicate_key(root, &where, err);
    sb_free(&where);
    if (dup) {
        cJSON_Delete(root);
        root = NULL;
        goto out;
    }
    size_t pos = 0, start;
    if (!attach(root, text, len, &pos) || next_number(text, len, &pos, &start)) {
        /* Only reachable if cJSON ever builds numbers other than the grammar's. */
        sb_add(err, "could not read its numbers exactly");
        cJSON_Delete(root);
        root = NULL;
    }
out:
    free(text);
    return root;
}

/* A plain JSON integer literal: -?digits, no fraction, no exponent. */
static bool plain_integer(const char *s)
{
    if (*s == '-')
        s++;
    if (!*s)
        return false;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return false;
    return true;
}

enum json_int_status json_int(const cJSON *item, int64_t *out)
{
    if (!cJSON_IsNumber(item))
        return JSON_INT_NOT_NUMBER;
    if (item->valuestring && plain_integer(item->valuestring)) {
        errno = 0;
        char *end;
        long long v = strtoll(item->valuestring, &end, 10);
        if (errno == ERANGE || *end)
            return JSON_INT_RANGE;
        *out = v;
        return JSON_INT_OK;
    }
    /* 1e3 or 2.0: whole numbers written another way; only exact within a double's 53 bits. */
    double d = item->valuedouble;
    if (!isfinite(d))
        return JSON_INT_RANGE;
    if (floor(d) != d)
        return JSON_INT_FRACTION;
    if (fabs(d) > 9007199254740992.0)
        return JSON_INT_RANGE;
    *out = (int64_t)d;
    return JSON_INT_OK;
}

cJSON *json_new_int(int64_t v)
{
    cJSON *n = cJSON_CreateNumber((double)v);
    if (!n) {
        util_err("out of memory");
        exit(EXIT_USAGE);
    }
    char lit[24];
    snprintf(lit, sizeof lit, "%" PRId64, v);
    n->valuestring = util_xstrdup(lit);
    return n;
}

static void print_number(FILE *f, const cJSON *item)
{
    /* Parsed and json_new_int() numbers carry their literal; others print from the double. */
    if (item->valuestring) {
        fputs(item->valuestring, f);
        return;
    }
    double d = item->valuedouble;
    if (!isfinite(d))
        fputs("null", f);
    else if (floor(d) == d && fabs(d) < 9.2e18)
        fprintf(f, "%.0f", d);
    else
        fprintf(f, "%.17g", d);
}

static void print_string(FILE *f, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t n = strlen(s);
    fputc('"', f);
    while (n > 0) {
        unsigned c = *p;
        size_t l = 1;
        switch (c) {
        case '"':
            fputs("\\\"", f);
            break;
        case '\\':
            fputs("\\\\", f);
            break;
        case '\b':
            fputs("\\b", f);
            break;
        case '\f':
            fputs("\\f", f);
            break;
        case '\n':
            fputs("\\n", f);
            break;
        case '\r':
            fputs("\\r", f);
            break;
        case '\t':
            fputs("\\t", f);
            break;
        default:
            if (c < 0x20) {
                fprintf(f, "\\u%04x", c);
            } else if ((l = util_utf8_len(p, n)) == 0) {
                /* JSON text is UTF-8; a byte that is not becomes U+FFFD. */
                fputs("\\ufffd", f);
                l = 1;
            } else {
                fwrite(p, 1, l, f);
            }
        }
        p += l;
        n -= l;
    }
    fputc('"', f);
}

static void indent(FILE *f, int depth)
{
    for (int i = 0; i < depth; i++)
        fputs("  ", f);
}

static void print_value(FILE *f, const cJSON *item, int depth)
{
    switch (item->type & 0xff) {
    case cJSON_False:
        fputs("false", f);
        return;
    case cJSON_True:
        fputs("true", f);
        return;
    case cJSON_NULL:
        fputs("null", f);
        return;
    case cJSON_Number:
        print_number(f, item);
        return;
    case cJSON_String:
        print_string(f, item->valuestring ? item->valuestring : "");
        return;
    case cJSON_Array:
    case cJSON_Object: {
        bool obj = (item->type & 0xff) == cJSON_Object;
        if (!item->child) {
            fputs(obj ? "{}" : "[]", f);
            return;
        }
        fputs(obj ? "{\n" : "[\n", f);
        for (const cJSON *c = item->child; c; c = c->next) {
            indent(f, depth + 1);
            if (obj) {
                print_string(f, c->string ? c->string : "");
                fputs(": ", f);
            }
            print_value(f, c, depth + 1);
            fputs(c->next ? ",\n" : "\n", f);
        }
        indent(f, depth);
        fputc(obj ? '}' : ']', f);
        return;
    }
    default:
        /* Raw or invalid nodes never come out of the parser. */
        fputs("null", f);
    }
}

void json_print(FILE *f, const cJSON *item)
{
    print_value(f, item, 0);
    fputc('\n', f);
}
