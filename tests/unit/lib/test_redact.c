/* Unit tests of the command-line redaction: what is replaced, what is left alone. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "redact.h"

/* The argv as the report would write it, joined by spaces. */
static const char *redacted(const char *const *argv)
{
    static char joined[4096];
    char one[1024];
    bool secret_next = false;
    joined[0] = '\0';
    for (size_t i = 0; argv[i]; i++) {
        redact_arg(argv[i], secret_next, one, sizeof(one));
        if (i)
            strcat(joined, " ");
        strcat(joined, one);
        secret_next = redact_is_secret_flag(argv[i]);
    }
    return joined;
}

#define REDACTS_TO(expected, ...)                    \
    do {                                             \
        const char *argv_[] = { __VA_ARGS__, NULL }; \
        cr_assert_str_eq(redacted(argv_), expected); \
    } while (0)

Test(redact, flags_with_separate_values)
{
    REDACTS_TO("train.py --token *** --batch 64", "train.py", "--token", "hf_abc123", "--batch", "64");
    REDACTS_TO("x --api-key *** --api_key *** --password *** --secret ***", "x", "--api-key", "k1",
          "--api_key", "k2", "--password", "hunter2", "--secret", "s");
    REDACTS_TO("x --hf_token *** --wandb-api-key *** -token ***", "x", "--hf_token", "a",
          "--wandb-api-key", "b", "-token", "c");
    REDACTS_TO("x --TOKEN ***", "x", "--TOKEN", "abc");
    /* After a secret flag the next argument is its value, even when it starts with dashes; a
     * switch such as --use_auth_token or --no-token takes no value. */
    REDACTS_TO("x --token *** 64", "x", "--token", "--batch", "64");
}

Test(redact, flags_with_equals)
{
    REDACTS_TO("x --token=*** --api-key=*** --password=*** --secret=***", "x", "--token=abc",
          "--api-key=k", "--password=p=w", "--secret=s");
}

Test(redact, assignments)
{
    REDACTS_TO("HF_API_KEY=*** WANDB_TOKEN=*** AWS_SECRET=*** DB_PASSWORD=*** PASSWORD=***",
          "HF_API_KEY=v", "WANDB_TOKEN=v", "AWS_SECRET=v", "DB_PASSWORD=v", "PASSWORD=v");
    REDACTS_TO("wandb.api_key=***", "wandb.api_key=v");
}

Test(redact, urls_with_credentials)
{
    REDACTS_TO("x https://user:***@host/path", "x", "https://user:pass@host/path");
    REDACTS_TO("x --data=s3://ak:***@bucket/a", "x", "--data=s3://ak:sk@bucket/a");
    REDACTS_TO("x https://***@github.com/o/r", "x", "https://ghp_tok@github.com/o/r");
    REDACTS_TO("x a=http://u:***@h,b=http://v:***@k", "x", "a=http://u:p@h,b=http://v:q@k");
    /* '@' after the host is a path, not credentials; the last '@' of the authority counts. */
    REDACTS_TO("x https://host/a@b https://u:***@h", "x", "https://host/a@b", "https://u:p@ss@h");
}

Test(redact, ordinary_arguments_stay)
{
    REDACTS_TO("python3 train.py --batch 64 --max_new_tokens=5 --tokenizer gpt2 --lr=1e-3 https://host/x",
          "python3", "train.py", "--batch", "64", "--max_new_tokens=5", "--tokenizer", "gpt2",
          "--lr=1e-3", "https://host/x");
    REDACTS_TO("a=b --x= = ==", "a=b", "--x=", "=", "==");
}

Test(redact, never_overflows)
{
    char small[8];
    redact_arg("https://u:p@host/very/long/path", false, small, sizeof(small));
    cr_assert_eq(strlen(small), 7);
    redact_arg("anything", false, small, 1);
    cr_assert_eq(small[0], '\0');
}

Test(redact, secret_words_as_name_parts)
{
    REDACTS_TO("x --private-key *** --private_key *** --private-key=*** --PRIVATE_KEY=***", "x",
          "--private-key", "a", "--private_key", "b", "--private-key=c", "--PRIVATE_KEY=d");
    REDACTS_TO("x --key *** --pat *** --PAT *** --gh-pat ***", "x", "--key", "a", "--pat", "b", "--PAT",
          "c", "--gh-pat", "d");
    REDACTS_TO("x --apiKey *** --hubToken *** --APIKey *** --token2 ***", "x", "--apiKey", "a",
          "--hubToken", "b", "--APIKey", "c", "--token2", "d");
    REDACTS_TO("x --auth *** --cookie *** --passphrase *** --credentials ***", "x", "--auth", "u:p",
          "--cookie", "c", "--passphrase", "p", "--credentials", "c");
}

Test(redact, assignments_of_secret_names)
{
    REDACTS_TO("TOKEN=*** SECRET=*** APIKEY=*** hub.token=*** GITHUB_PAT=***", "TOKEN=a", "SECRET=b",
          "APIKEY=c", "hub.token=d", "GITHUB_PAT=e");
    REDACTS_TO("AWS_SECRET_ACCESS_KEY=*** SECRET_KEY_BASE=*** password=*** key=***",
          "AWS_SECRET_ACCESS_KEY=a", "SECRET_KEY_BASE=b", "password=c", "key=d");
    /* All of the value, whatever it holds. */
    REDACTS_TO("--password=*** HF_TOKEN=***", "--password=a&b c", "HF_TOKEN=x python train.py");
}

Test(redact, value_starting_with_dashes)
{
    REDACTS_TO("x --token *** --api-key *** --pat ***", "x", "--token", "--X", "--api-key", "-abc",
          "--pat", "-");
    /* "--" ends the options: it is never a value. */
    REDACTS_TO("x --token -- cmd", "x", "--token", "--", "cmd");
}

Test(redact, switches_take_no_value)
{
    REDACTS_TO("x --use_auth_token --batch 64 --no-token --lr 1", "x", "--use_auth_token", "--batch",
          "64", "--no-token", "--lr", "1");
    REDACTS_TO("x --use_auth_token=***", "x", "--use_auth_token=hf_abc");
}

Test(redact, query_parameters)
{
    REDACTS_TO("x https://h/x?token=***", "x", "https://h/x?token=abc");
    REDACTS_TO("x https://h/x?a=1&access_token=***&b=2", "x", "https://h/x?a=1&access_token=abc&b=2");
    REDACTS_TO("x --url=https://u:***@h/p?api_key=***&page=2", "x",
          "--url=https://u:pw@h/p?api_key=k&page=2");
    REDACTS_TO("x wss://h/s?Token=***", "x", "wss://h/s?Token=abc");
}

Test(redact, headers)
{
    REDACTS_TO("curl -H Authorization: Bearer ***", "curl", "-H", "Authorization: Bearer abc.def");
    REDACTS_TO("x authorization: basic *** Proxy-Authorization: ***", "x",
          "authorization: basic dXNlcjpw", "Proxy-Authorization: xyz");
    REDACTS_TO("x --header=Authorization: Bearer *** X-Api-Key: *** Cookie: ***", "x",
          "--header=Authorization: Bearer t", "X-Api-Key: k", "Cookie: session=s; other=o");
}

Test(redact, secrets_inside_one_argument)
{
    REDACTS_TO("{\"hub_token\": \"***\", \"lr\": 1}", "{\"hub_token\": \"hf_x\", \"lr\": 1}");
    REDACTS_TO("{'api_key':'***'}", "{'api_key':'k\\'x'}");
    REDACTS_TO("lr=1 token=*** batch=2", "lr=1 token=abc batch=2");
    REDACTS_TO("python t.py --token *** --batch 64", "python t.py --token abc --batch 64");
    REDACTS_TO("python t.py --api-key=*** --batch 64", "python t.py --api-key=abc --batch 64");
}

Test(redact, ordinary_flags_untouched)
{
    REDACTS_TO("x --batch 64 --keep-cache --monkey 3 --patience 5 --keypoints 17 --num_keys 4 --max_tokens 9",
          "x", "--batch", "64", "--keep-cache", "--monkey", "3", "--patience", "5", "--keypoints",
          "17", "--num_keys", "4", "--max_tokens", "9");
    REDACTS_TO("x https://auth.example.com:8443/v1/token host:8080 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
          "x", "https://auth.example.com:8443/v1/token", "host:8080",
          "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True");
    REDACTS_TO("x --author Alice --keyframes 8 monkey=3 label:token", "x", "--author", "Alice",
          "--keyframes", "8", "monkey=3", "label:token");
}

/* ---- the whole command line, as the report reads it from /proc/self/cmdline ---- */

static char got[1 << 18];
static size_t got_len;

static void collect(void *ctx, const char *arg)
{
    (void)ctx;
    size_t n = strlen(arg);
    cr_assert(got_len + n + 2 < sizeof(got));
    if (got_len)
        got[got_len++] = ' ';
    memcpy(got + got_len, arg, n + 1);
    got_len += n;
}

/* Runs redact_cmdline on the n bytes of cmd (a file, as /proc/self/cmdline is read). */
static size_t cmdline(const char *cmd, size_t n, size_t work_size, size_t max_bytes)
{
    static char work[REDACT_WORK_SIZE];
    cr_assert(work_size <= sizeof(work));
    FILE *f = tmpfile();
    cr_assert(f);
    cr_assert_eq(fwrite(cmd, 1, n, f), n);
    cr_assert_eq(fflush(f), 0);
    rewind(f);
    got_len = 0;
    got[0] = '\0';
    size_t args = redact_cmdline(fileno(f), work, work_size, max_bytes, collect, NULL);
    fclose(f);
    return args;
}

#define ARGS(lit) lit, sizeof(lit) - 1

Test(redact, cmdline_as_the_arguments)
{
    cr_assert_eq(cmdline(ARGS("python3\0train.py\0--token\0--X\0--batch\0"
                              "64\0https://u:p@h\0"),
                         REDACT_WORK_SIZE, REDACT_ARGV_MAX),
                 7);
    cr_assert_str_eq(got, "python3 train.py --token *** --batch 64 https://u:***@h");
    /* A program that rewrote its arguments may leave no NUL at the end. */
    cmdline(ARGS("a\0HF_TOKEN=x"), REDACT_WORK_SIZE, REDACT_ARGV_MAX);
    cr_assert_str_eq(got, "a HF_TOKEN=***");
    cr_assert_eq(cmdline("", 0, REDACT_WORK_SIZE, REDACT_ARGV_MAX), 0);
}

/* The report keeps 64 KiB of the command line. Cut first and redacted after, a URL cut before
 * its '@' showed its password ("https://user:hunt"); redacted first, the cut only shortens. */
Test(redact, cmdline_cut_after_redaction)
{
    static char cmd[2 * REDACT_ARGV_MAX];
    size_t filler = REDACT_ARGV_MAX - 18;
    memset(cmd, 'a', filler);
    cmd[filler] = '\0';
    const char url[] = "https://user:hunter2@host/x";
    memcpy(cmd + filler + 1, url, sizeof(url));
    size_t n = filler + 1 + sizeof(url);
    for (size_t max = REDACT_ARGV_MAX - 16; max <= REDACT_ARGV_MAX + 16; max++) {
        cmdline(cmd, n, REDACT_WORK_SIZE, max);
        cr_assert(got_len < max, "at most max bytes");
        cr_assert_null(strstr(got, "hu"), "no part of the password at a cut at %zu: %s", max,
                       got + filler);
    }
    cmdline(cmd, n, REDACT_WORK_SIZE, REDACT_ARGV_MAX);
    cr_assert_str_eq(got + filler + 1, "https://user:***");
}

Test(redact, cmdline_stops_at_its_limit)
{
    static char cmd[1 << 17];
    size_t n = 0;
    for (int i = 0; i < 10000; i++) {
        memcpy(cmd + n, "--token\0abc\0", 12);
        n += 12;
    }
    size_t args = cmdline(cmd, n, REDACT_WORK_SIZE, 1000);
    cr_assert_leq(got_len + 1, 1000);
    cr_assert_lt(args, 200);
    cr_assert_null(strstr(got, "abc"));
    /* A cut never splits a UTF-8 sequence. */
    cmdline(ARGS("\xc3\xa9\xc3\xa9\xc3\xa9\0"), REDACT_WORK_SIZE, 4);
    cr_assert_str_eq(got, "\xc3\xa9");
}

/* An argument longer than the window is redacted as far as it is seen, as text that goes on;
 * what follows it is read as usual. */
Test(redact, cmdline_longer_than_the_window)
{
    static char cmd[4096];
    const char head[] = "x\0https://user:";
    size_t n = sizeof(head) - 1;
    memcpy(cmd, head, n);
    memset(cmd + n, 'p', 300);
    n += 300;
    memcpy(cmd + n, ARGS("@host/\0--api-key\0k\0--batch\0"
                         "64\0"));
    n += sizeof("@host/\0--api-key\0k\0--batch\0"
                "64\0") -
         1;
    cr_assert_eq(cmdline(cmd, n, 3 * 64 + 8, REDACT_ARGV_MAX), 6);
    cr_assert_str_eq(got, "x https://*** --api-key *** --batch 64");
    /* Any window gives what the arguments one by one give, for arguments that fit in it. */
    const char many[] =
            "a\0--token\0t1\0bb\0--password=p\0c\0--pat\0-x\0https://u:v@w\0ddd\0--key\0k\0e\0";
    for (size_t w = 16; w <= 64; w++) {
        cmdline(many, sizeof(many) - 1, 3 * w + 8, REDACT_ARGV_MAX);
        cr_assert_str_eq(
                got, "a --token *** bb --password=*** c --pat *** https://u:***@w ddd --key *** e",
                "window %zu", w);
    }
}

/* Random arguments made of the pieces the rules look at: never more than 2 * length + 8 bytes
 * out (the bound the report's buffers are sized by), and never past a small buffer. */
Test(redact, growth_stays_within_its_bound)
{
    static const char *const pieces[] = { "token", "key", "pat", "=",       ":",  "://",
                                          "@",     "?",   "&",   " ",       "\"", "'",
                                          "\\",    "-",   "--",  "Bearer ", "a",  "\xc3\xa9",
                                          ".",     "_",   "x:",  "k=" };
    const size_t n_pieces = sizeof(pieces) / sizeof(pieces[0]);
    unsigned seed = 20241130;
    char arg[256], out[2 * sizeof(arg) + 8], small[9];
    for (int round = 0; round < 20000; round++) {
        size_t len = 0;
        int count = (int)(rand_r(&seed) % 24);
        for (int i = 0; i < count; i++) {
            const char *p = pieces[(size_t)rand_r(&seed) % n_pieces];
            size_t l = strlen(p);
            if (len + l >= sizeof(arg))
                break;
            memcpy(arg + len, p, l);
            len += l;
        }
        arg[len] = '\0';
        bool after = rand_r(&seed) % 4 == 0;
        size_t cap = 2 * len + 8;
        redact_arg(arg, after, out, cap);
        cr_assert_lt(strlen(out) + 1, cap, "cut: [%s] -> [%s]", arg, out);
        redact_arg(arg, after, small, sizeof(small));
        cr_assert_lt(strlen(small), sizeof(small));
    }
}

/* Issue 24: 32 forms were tried on a report; these stayed in it. Each is replaced now. */
Test(redact, short_and_last_part_secret_names)
{
    REDACTS_TO("x --pass *** DB_PASS=*** MYSQL_PWD=*** --db-pwd=*** --db-pass ***", "x", "--pass", "S01",
          "DB_PASS=S02", "MYSQL_PWD=S03", "--db-pwd=S05", "--db-pass", "S04");
    REDACTS_TO("x --jwt *** JWT=*** --session *** --bearer *** SESSION=***", "x", "--jwt", "S28",
          "JWT=S29", "--session", "S30", "--bearer", "S32", "SESSION=S31");
    REDACTS_TO("x --pwd *** --pw *** DB_PW=*** PGPASSWORD=*** --passcode *** --otp *** --totp=***", "x",
          "--pwd", "a", "--pw", "b", "DB_PW=c", "PGPASSWORD=d", "--passcode", "e", "--otp", "f",
          "--totp=g");
    REDACTS_TO("x --dsn *** SENTRY_DSN=*** --sig *** --signature *** --hmac-key *** --creds ***", "x",
          "--dsn", "a", "SENTRY_DSN=b", "--sig", "c", "--signature", "d", "--hmac-key", "e",
          "--creds", "f");
    REDACTS_TO("x --client-secret *** --access-key *** --private-key *** --session-token *** "
          "--refresh-token *** --x-amz-security-token ***",
          "x", "--client-secret", "a", "--access-key", "b", "--private-key", "c", "--session-token",
          "d", "--refresh-token", "e", "--x-amz-security-token", "f");
    REDACTS_TO("x --credential *** --credentials *** --auth *** --cookie *** --passwd ***", "x",
          "--credential", "a", "--credentials", "b", "--auth", "c", "--cookie", "d", "--passwd",
          "e");
}

Test(redact, signed_urls)
{
    /* S3: the credential and the signature both; the other parameters stay */
    REDACTS_TO("x https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=***"
          "&X-Amz-Date=20261206T000000Z&X-Amz-Expires=3600&X-Amz-Security-Token=***"
          "&X-Amz-SignedHeaders=host&X-Amz-Signature=***",
          "x",
          "https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIA%2F20261206"
          "&X-Amz-Date=20261206T000000Z&X-Amz-Expires=3600&X-Amz-Security-Token=S09"
          "&X-Amz-SignedHeaders=host&X-Amz-Signature=S06");
    /* Google Cloud Storage */
    REDACTS_TO("x https://storage.googleapis.com/b/o?X-Goog-Algorithm=GOOG4-RSA-SHA256"
          "&X-Goog-Credential=***&X-Goog-Signature=***",
          "x",
          "https://storage.googleapis.com/b/o?X-Goog-Algorithm=GOOG4-RSA-SHA256"
          "&X-Goog-Credential=sa%40p.iam&X-Goog-Signature=S08");
    /* Azure shared access signatures: sv=..&sig= */
    REDACTS_TO("x https://a.blob.core.windows.net/c/b?sv=2022-11-02&ss=b&sp=r&se=2026-12-07&sig=***",
          "x", "https://a.blob.core.windows.net/c/b?sv=2022-11-02&ss=b&sp=r&se=2026-12-07&sig=S07");
    REDACTS_TO("x --url=https://h/x?Signature=***&Expires=1", "x", "--url=https://h/x?Signature=S10&Expires=1");
    /* a DSN: the URL's password, and key=value pairs */
    REDACTS_TO("x --dsn *** postgresql://u:***@db/app host=db password=*** sslmode=require", "x", "--dsn",
          "postgresql://u:p@db/app", "postgresql://u:p@db/app", "host=db password=p sslmode=require");
}

/* Whole parts only, and the last-part words only at the end of a name. */
Test(redact, near_misses_stay)
{
    REDACTS_TO("x --passes 3 --bypass 1 --compass n --pass-through 1 --sigma 0.5 --sig-level 0.05", "x",
          "--passes", "3", "--bypass", "1", "--compass", "n", "--pass-through", "1", "--sigma", "0.5",
          "--sig-level", "0.05");
    REDACTS_TO("x --signature-version s3v4 --session-name run1 --session-dir /tmp --passage 2", "x",
          "--signature-version", "s3v4", "--session-name", "run1", "--session-dir", "/tmp",
          "--passage", "2");
    REDACTS_TO("x --batch 64 --sessions 4 --signatures 2 --swp 1 --dsnr 2 --pwm 3", "x", "--batch", "64",
          "--sessions", "4", "--signatures", "2", "--swp", "1", "--dsnr", "2", "--pwm", "3");
    REDACTS_TO("PWD=/home/ana/seg OLDPWD=/home/ana compass=3 bypass=1 passes=2 sigma=1", "PWD=/home/ana/seg",
          "OLDPWD=/home/ana", "compass=3", "bypass=1", "passes=2", "sigma=1");
    REDACTS_TO("x --no-pass --no-session --batch 8", "x", "--no-pass", "--no-session", "--batch", "8");
}

static const char *line_redacted(const char *line)
{
    static char out[4096];
    char work[2048];
    redact_line(line, work, sizeof(work), out, sizeof(out));
    return out;
}

/* vramwatch top has only the arguments joined by spaces. */
Test(redact, joined_line)
{
    cr_assert_str_eq(line_redacted("python3 train.py --token hf_x --batch 64"),
                     "python3 train.py --token *** --batch 64");
    cr_assert_str_eq(line_redacted("x --pass S01 DB_PASS=S02 --db-pwd=S05 --jwt S28 --session S30"),
                     "x --pass *** DB_PASS=*** --db-pwd=*** --jwt *** --session ***");
    /* a value starting with dashes, after a secret flag */
    cr_assert_str_eq(line_redacted("x --api-key -Xk3 --batch 2"), "x --api-key *** --batch 2");
    cr_assert_str_eq(line_redacted("curl https://u:p@h/?sig=S -H Authorization: Bearer abc.def"),
                     "curl https://u:***@h/?sig=*** -H Authorization: Bearer ***");
    /* a header's value runs to the end of the line: what follows it in a joined line is lost */
    cr_assert_str_eq(line_redacted("curl -H Authorization: Bearer abc.def -o x"),
                     "curl -H Authorization: Bearer ***");
    cr_assert_str_eq(line_redacted("x {\"hub_token\": \"hf x\"} lr=1"), "x {\"hub_token\": \"***\"} lr=1");
    cr_assert_str_eq(line_redacted("python3 train.py --batch 64 --passes 3"),
                     "python3 train.py --batch 64 --passes 3");
    cr_assert_str_eq(line_redacted(""), "");
    /* never past its buffers */
    char small[8], work[8];
    redact_line("--token abcdefgh", work, sizeof(work), small, sizeof(small));
    cr_assert_lt(strlen(small), sizeof(small));
    cr_assert_null(strstr(small, "abc"));
}
