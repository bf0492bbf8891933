/* test_topview.c: the pure pieces of `vramwatch top`'s screen (commands/topview.c): the name a
 * process goes by and the memory bar. */
#include <stdio.h>
#include <string.h>

#include "check.h"

#include "topview.h"

static int failures;

static void name_is(const char *line, const char *want)
{
    char got[64];
    topview_script_name(line, got, sizeof(got));
    if (strcmp(got, want) != 0) {
        fprintf(stderr, "FAIL  script name of %-60s: %s, expected %s\n", line, got, want);
        failures++;
    }
}

static void bar_is(int64_t used, int64_t limit, int64_t cap, int width, const char *want)
{
    struct strbuf b = { 0 };
    topview_bar(&b, used, limit, cap, width);
    if (strcmp(sb_str(&b), want) != 0) {
        fprintf(stderr, "FAIL  bar(%lld, %lld, %lld, %d): [%s], expected [%s]\n", (long long)used,
                (long long)limit, (long long)cap, width, sb_str(&b), want);
        failures++;
    }
    sb_free(&b);
}

static void wrap_is(const char *text, int width, const char *want)
{
    struct strbuf b = { 0 };
    topview_wrap(&b, "> ", "  ", text, width);
    if (strcmp(sb_str(&b), want) != 0) {
        fprintf(stderr, "FAIL  wrap(%s, %d):\n%s\nexpected\n%s\n", text, width, sb_str(&b), want);
        failures++;
    }
    sb_free(&b);
}

int main(void)
{
    /* 12 columns: 10 for the text. At spaces; a word longer than a line cut; UTF-8 counted as
     * characters. */
    wrap_is("python3 train.py --epochs 1", 12, "> python3\n  train.py\n  --epochs 1\n");
    wrap_is("/a/very/long/path.py x", 12, "> /a/very/lo\n  ng/path.py\n  x\n");
    wrap_is("äöü äöü äöü", 12, "> äöü äöü\n  äöü\n");
    wrap_is("", 12, "> \n");
    wrap_is("abc", 12, "> abc\n");

    name_is("/home/ada/.pyenv/versions/3.11.9/bin/python3 /job/train_dual.py --batch 8",
            "train_dual.py");
    name_is("python3 -u train.py", "train.py");
    name_is("python -W ignore -X dev /a/b/run.py x", "run.py");
    name_is("python3.11 -Wignore -OO fit.py", "fit.py");
    name_is("/usr/bin/python3 -m torch.distributed.run --nproc_per_node 2 train.py",
            "torch.distributed.run");
    name_is("python3 -um mod.main", "mod.main");
    name_is("python3 -c import torch", "-c");
    name_is("pypy3 bench.py", "bench.py");
    name_is("python3 -- x.py", "x.py");
    name_is("python3 -u --", "python3");
    name_is("/opt/bin/trainer --steps 3", "trainer");
    name_is("python3", "python3");
    name_is("", "?");
    name_is("   ", "?");
    name_is("/usr/bin/python3 /very/long/"
            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.py",
            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"); /* cut to the buffer */

    /* 16 columns: 14 inside. Half the card used, the limit at three quarters. */
    bar_is(8, 12, 16, 16, "[███████   |   ]"); /* 10.5: the mark in column 10 */
    /* 5/16 of 14 columns = 4.375: four full and three eighths. */
    bar_is(5, -1, 16, 16, "[████▍         ]");
    bar_is(0, -1, 16, 16, "[              ]");
    bar_is(16, -1, 16, 16, "[██████████████]");
    /* More than the capacity (observe mode): full, never past the bracket. */
    bar_is(40, 12, 16, 16, "[██████████|███]");
    /* No capacity: the limit is the scale, its mark at the end. */
    bar_is(4, 8, -1, 10, "[████   |]");
    bar_is(4, -1, -1, 10, "[        ]");
    bar_is(1, 1, 1, 2, "");
    bar_is(0, 0, 0, 3, "[ ]");
    return failures ? 1 : 0;
}
