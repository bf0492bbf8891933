/* Unit tests of the command-line redaction: what is replaced, what is left alone. */
#include <criterion/criterion.h>
#include <string.h>

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

#define CHECK(expected, ...)                                                                      \
    do {                                                                                          \
        const char *argv_[] = { __VA_ARGS__, NULL };                                              \
        cr_assert_str_eq(redacted(argv_), expected);                                              \
    } while (0)

Test(redact, flags_with_separate_values)
{
    CHECK("train.py --token *** --batch 64", "train.py", "--token", "hf_abc123", "--batch", "64");
    CHECK("x --api-key *** --api_key *** --password *** --secret ***", "x", "--api-key", "k1", "--api_key",
          "k2", "--password", "hunter2", "--secret", "s");
    CHECK("x --hf_token *** --wandb-api-key *** -token ***", "x", "--hf_token", "a", "--wandb-api-key", "b",
          "-token", "c");
    CHECK("x --TOKEN ***", "x", "--TOKEN", "abc");
    /* A secret flag used as a switch: the next flag is not its value. */
    CHECK("x --token --batch 64", "x", "--token", "--batch", "64");
}

Test(redact, flags_with_equals)
{
    CHECK("x --token=*** --api-key=*** --password=*** --secret=***", "x", "--token=abc", "--api-key=k",
          "--password=p=w", "--secret=s");
}

Test(redact, assignments)
{
    CHECK("HF_API_KEY=*** WANDB_TOKEN=*** AWS_SECRET=*** DB_PASSWORD=*** PASSWORD=***", "HF_API_KEY=v",
          "WANDB_TOKEN=v", "AWS_SECRET=v", "DB_PASSWORD=v", "PASSWORD=v");
    CHECK("wandb.api_key=***", "wandb.api_key=v");
}

Test(redact, urls_with_credentials)
{
    CHECK("x https://user:***@host/path", "x", "https://user:pass@host/path");
    CHECK("x --data=s3://ak:***@bucket/a", "x", "--data=s3://ak:sk@bucket/a");
    CHECK("x https://***@github.com/o/r", "x", "https://ghp_tok@github.com/o/r");
    CHECK("x a=http://u:***@h,b=http://v:***@k", "x", "a=http://u:p@h,b=http://v:q@k");
    /* '@' after the host is a path, not credentials; the last '@' of the authority counts. */
    CHECK("x https://host/a@b https://u:***@h", "x", "https://host/a@b", "https://u:p@ss@h");
}

Test(redact, ordinary_arguments_stay)
{
    CHECK("python3 train.py --batch 64 --max_new_tokens=5 --tokenizer gpt2 --lr=1e-3 https://host/x",
          "python3", "train.py", "--batch", "64", "--max_new_tokens=5", "--tokenizer", "gpt2", "--lr=1e-3",
          "https://host/x");
    CHECK("a=b --x= = ==", "a=b", "--x=", "=", "==");
}

Test(redact, never_overflows)
{
    char small[8];
    redact_arg("https://u:p@host/very/long/path", false, small, sizeof(small));
    cr_assert_eq(strlen(small), 7);
    redact_arg("anything", false, small, 1);
    cr_assert_eq(small[0], '\0');
}
