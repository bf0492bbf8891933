/* test_callsite_name.c: which frame names a call site (model_app_frame) when the model's line is
 * a function that only allocates on behalf of its callers: a caching allocator written in Python
 * over ctypes, as examples/train_sim.py has; and where a chain drawn root first starts
 * (model_first_user_frame). Reports are written here, one per case, because the
 * rule looks at the whole report (which lines reach a function). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "check.h"

#include "model.h"

static int failures;

/* clang-format off */
/* Frames as JSON text, each followed by its comma: a call chain is frames written one after the
 * other, ended by OUTER. A Python frame of the job's own files (under /job, the process's
 * folder): */
#define PY(file, fn, line)                                                                       \
    "{\"kind\":\"python\",\"file\":\"/job/" file "\",\"function\":\"" fn "\",\"line\":" #line "},"
#define NATIVE(module, sym)                                                                      \
    "{\"kind\":\"native\",\"module\":\"" module "\",\"symbol\":" sym ",\"offset\":4096},"
/* How ctypes reaches cudaMalloc: what the report holds under the Python frame that called it. */
#define CTYPES                                                                                   \
    NATIVE("/lib/x86_64-linux-gnu/libffi.so.8", "\"ffi_call\"")                                 \
    NATIVE("/usr/lib/python3.11/lib-dynload/_ctypes.cpython-311-x86_64-linux-gnu.so", "null")    \
    NATIVE("/usr/lib/libpython3.11.so.1.0", "\"_PyObject_MakeTpCall\"")
/* How a PyTorch operation reaches the card: its allocator, its libraries and its Python. */
#define TORCH                                                                                    \
    NATIVE("/venv/site-packages/torch/lib/libc10_cuda.so", "null")                              \
    NATIVE("/venv/site-packages/torch/lib/libtorch_cuda.so", "null")                            \
    NATIVE("/usr/lib/libpython3.11.so.1.0", "null")                                             \
    "{\"kind\":\"python\",\"file\":\"/venv/lib/python3.11/site-packages/torch/nn/modules/"     \
    "conv.py\",\"function\":\"Conv2d._conv_forward\",\"line\":456},"
/* The interpreter's entry: the last frame of every chain. */
#define OUTER "{\"kind\":\"native\",\"module\":\"/usr/lib/libpython3.11.so.1.0\",\"symbol\":\"Py_RunMain\",\"offset\":64}"

/* One call site: its id, frames (innermost first) and live bytes. */
#define SITE(id, frames, live)                                                                   \
    "{\"id\":" #id ",\"frames\":[" frames "],\"live_bytes\":" #live                              \
    ",\"live_count\":1,\"alloc_calls\":1,\"alloc_bytes_total\":" #live "}"

/* The allocator's two functions, then the job's line that asked it for memory. */
#define ALLOC_AT(malloc_line, caller)                                                            \
    CTYPES PY("train.py", "Pool._cuda_malloc", 10) PY("train.py", "Pool.malloc", malloc_line)    \
    caller PY("train.py", "<module>", 90) OUTER
/* clang-format on */

static const char head[] =
        "{\"schema\":\"vramwatch.report/1\",\"reason\":\"exit\",\"time_unix_ns\":2000,"
        "\"process\":{\"pid\":7,\"ppid\":1,\"host\":\"h\",\"argv\":[\"python3\",\"train.py\"],"
        "\"cwd\":\"/job\",\"start_unix_ns\":1000,\"rank\":null,\"local_rank\":null,"
        "\"world_size\":null,\"env\":{}},"
        "\"devices\":[],\"failures\":[],\"live\":[],\"live_truncated\":0,"
        "\"limit_crossings\":[],\"callsites\":[";

/* Loads a report of these call sites (a list ended by NULL). */
static void load(struct model_report *r, const char *const *sites)
{
    struct strbuf text = { 0 };
    sb_add(&text, head);
    for (size_t i = 0; sites[i]; i++)
        sb_printf(&text, "%s%s", i ? "," : "", sites[i]);
    sb_add(&text, "]}");
    cJSON *root = cJSON_Parse(sb_str(&text));
    sb_free(&text);
    struct strbuf err = { 0 };
    if (!root || !model_load_tree("test", root, r, &err)) {
        fprintf(stderr, "the test's report does not load: %s\n", sb_str(&err));
        exit(1);
    }
    sb_free(&err);
}

/* The name the report's tables give call site id. */
static bool named(const struct model_report *r, int64_t id, const char *want)
{
    struct strbuf b = { 0 };
    model_add_callsite(&b, r, id, MODEL_NAME_SHORT);
    bool same = strcmp(sb_str(&b), want) == 0;
    if (!same)
        fprintf(stderr, "  call site %lld: named \"%s\", expected \"%s\"\n", (long long)id,
                sb_str(&b), want);
    sb_free(&b);
    return same;
}

/* The quick start's case: weights (line 40) and activations (line 50) through one allocator,
 * the activations also through its retry (line 22): two rows, each named by its line. */
static void weights_and_activations(void)
{
    struct model_report r;
    load(&r, (const char *const[]){ SITE(1, ALLOC_AT(21, PY("train.py", "main", 50)), 300),
                                    SITE(2, ALLOC_AT(21, PY("train.py", "main", 40)), 200),
                                    SITE(3, ALLOC_AT(22, PY("train.py", "main", 50)), 100), NULL });
    EXPECT(named(&r, 1, "train.py:50 in main"));
    EXPECT(named(&r, 2, "train.py:40 in main"));
    EXPECT(named(&r, 3, "train.py:50 in main"));
    EXPECT(model_user_line(model_callsite(&r, 2)) &&
           model_user_line(model_callsite(&r, 2))->line == 40);
    model_free(&r);
}

/* A run that fitted: no retry, so the inner function has one caller line; it is still the
 * allocator's, because its one caller is. */
static void without_retry(void)
{
    struct model_report r;
    load(&r, (const char *const[]){
                     SITE(1, ALLOC_AT(21, PY("train.py", "main", 50)), 300),
                     SITE(2, ALLOC_AT(21, PY("train.py", "main.<locals>.<listcomp>", 40)), 200),
                     NULL });
    EXPECT(named(&r, 1, "train.py:50 in main"));
    EXPECT(named(&r, 2, "train.py:40 in main.<locals>.<listcomp>"));
    model_free(&r);
}

/* A line that calls cudaMalloc itself, in a function reached from one line, names its call site
 * (main, which also calls the allocator, is not one). */
static void direct_from_one_line(void)
{
    struct model_report r;
    load(&r, (const char *const[]){
                     SITE(1, CTYPES PY("train.py", "main", 60) PY("train.py", "<module>", 90) OUTER,
                          64),
                     SITE(2, ALLOC_AT(21, PY("train.py", "main", 50)), 300),
                     SITE(3, ALLOC_AT(21, PY("train.py", "main", 40)), 200), NULL });
    EXPECT(named(&r, 1, "train.py:60 in main"));
    EXPECT(named(&r, 2, "train.py:50 in main"));
    EXPECT(named(&r, 3, "train.py:40 in main"));
    model_free(&r);
}

/* An allocator that the report shows reached from one line only cannot be told from any other
 * function: its own line names the call site. */
static void allocator_with_one_caller(void)
{
    struct model_report r;
    load(&r, (const char *const[]){ SITE(1, ALLOC_AT(21, PY("train.py", "main", 50)), 300), NULL });
    EXPECT(named(&r, 1, "train.py:10 in Pool._cuda_malloc"));
    model_free(&r);
}

/* A model's layer reached from two lines makes its tensors through PyTorch: it computes, it is
 * the line to change, and it keeps naming them. */
static void layer_through_pytorch(void)
{
    struct model_report r;
    load(&r, (const char *const[]){
                     SITE(1,
                          TORCH PY("model.py", "Conv.forward", 87) PY("model.py", "Net.forward", 12)
                                  PY("train.py", "main", 50) OUTER,
                          300),
                     SITE(2,
                          TORCH PY("model.py", "Conv.forward", 87) PY("model.py", "Net.forward", 13)
                                  PY("train.py", "main", 50) OUTER,
                          200),
                     NULL });
    EXPECT(named(&r, 1, "model.py:87 in Conv.forward"));
    EXPECT(named(&r, 2, "model.py:87 in Conv.forward"));
    model_free(&r);
}

/* A function that reaches the card both through ctypes and through PyTorch does more than
 * allocate for its callers: it names its call sites. */
static void helper_that_also_computes(void)
{
    struct model_report r;
    load(&r,
         (const char *const[]){
                 SITE(1, CTYPES PY("train.py", "helper", 5) PY("train.py", "main", 40) OUTER, 300),
                 SITE(2, CTYPES PY("train.py", "helper", 5) PY("train.py", "main", 50) OUTER, 200),
                 SITE(3, TORCH PY("train.py", "helper", 7) PY("train.py", "main", 50) OUTER, 100),
                 NULL });
    EXPECT(named(&r, 1, "train.py:5 in helper"));
    EXPECT(named(&r, 2, "train.py:5 in helper"));
    EXPECT(named(&r, 3, "train.py:7 in helper"));
    model_free(&r);
}

/* The frame a call chain drawn root first starts at (model_first_user_frame), in the STACK form. */
static bool starts_at(const struct model_report *r, int64_t id, const char *want)
{
    const struct model_callsite *cs = model_callsite(r, id);
    struct strbuf b = { 0 };
    model_add_frame(&b, r, &cs->frames[model_first_user_frame(cs)], MODEL_NAME_STACK);
    bool ok = strcmp(sb_str(&b), want) == 0;
    if (!ok)
        fprintf(stderr, "call site %lld starts at %s, expected %s\n", (long long)id, sb_str(&b),
                want);
    sb_free(&b);
    return ok;
}

/* clang-format off */
#define SITE_PY(file, fn, line)                                                                  \
    "{\"kind\":\"python\",\"file\":\"" file "\",\"function\":\"" fn "\",\"line\":" #line "},"
/* clang-format on */

/* The outermost frame of the application: the script's <module> across PyTorch's Python between
 * its lines; an installed package's entry when a launcher runs it; a C program's main, under the
 * C runtime and its _start. */
static void first_frames(void)
{
    struct model_report r;
    /* clang-format off: one frame a line */
    load(&r,
         (const char *const[]){
                 SITE(1,
                      TORCH PY("model.py", "Conv.forward", 87)
                      SITE_PY("/venv/lib/python3.11/site-packages/torch/nn/modules/module.py",
                              "Module._call_impl", 1501)
                      PY("train.py", "main", 40) PY("train.py", "<module>", 90) OUTER,
                      100),
                 SITE(2,
                      TORCH SITE_PY("/venv/lib/python3.11/site-packages/ultralytics/nn/conv.py",
                                    "Conv.forward", 87)
                      SITE_PY("/venv/lib/python3.11/site-packages/ultralytics/cfg/__init__.py",
                              "entrypoint", 900)
                      SITE_PY("/venv/bin/yolo", "<module>", 8) OUTER,
                      100),
                 SITE(3,
                      NATIVE("/usr/lib/libcudart.so.12", "\"cudaMalloc\"")
                      NATIVE("/opt/app/trainer", "\"grow_pool(unsigned long)\"")
                      NATIVE("/opt/app/trainer", "\"main\"")
                      NATIVE("/lib/x86_64-linux-gnu/libc.so.6", "\"__libc_start_main\"")
                      "{\"kind\":\"native\",\"module\":\"/opt/app/trainer\",\"symbol\":\"_start\","
                      "\"offset\":64}",
                      100),
                 NULL });
    /* clang-format on */
    EXPECT(starts_at(&r, 1, "<module> (train.py:90)"));
    EXPECT(starts_at(&r, 2, "entrypoint (ultralytics/cfg/__init__.py:900)"));
    EXPECT(starts_at(&r, 3, "main (trainer)"));
    EXPECT(named(&r, 3, "grow_pool (trainer+0x1000)"));
    model_free(&r);
}

int main(void)
{
    weights_and_activations();
    without_retry();
    direct_from_one_line();
    allocator_with_one_caller();
    layer_through_pytorch();
    helper_that_also_computes();
    first_frames();
    if (failures)
        fprintf(stderr, "%d check(s) failed\n", failures);
    return failures ? 1 : 0;
}
