/* Unit tests of the Python frame walker on frames built in memory: the layouts it knows, the
 * refusals (unknown versions, a frame without a code object, a cycle), the C-shim boundaries of
 * 3.12, the skipped executables of 3.13, and string decoding (ASCII and UCS-2 to UTF-8). */
#include <criterion/criterion.h>
#include <stdalign.h>
#include <string.h>

#include "pyframes.h"

static char code_type[64], str_type[64];

/* A compact str object as CPython lays it out: type at 8, length at 16, state at 32. */
static void make_str(char *obj, const struct py_layout *lay, const void *chars, int64_t len,
                     int kind)
{
    memset(obj, 0, 256);
    *(void **)(obj + 8) = str_type;
    *(int64_t *)(obj + 16) = len;
    uint32_t state = (uint32_t)(kind << 2) | (1u << 5) | (kind == 1 && len >= 0 ? (1u << 6) : 0);
    *(uint32_t *)(obj + 32) = state;
    memcpy(obj + (kind == 1 ? lay->str_ascii_header : lay->str_compact_header), chars,
           (size_t)len * (size_t)kind);
}

static int line_of(const void *code, int byte_offset)
{
    (void)code;
    return 100 + byte_offset / 2;
}

struct fake {
    alignas(16) char tstate[256];
    alignas(16) char cframe[64];
    alignas(16) char frames[4][128];
    alignas(16) char code[2][256];
    alignas(16) char file[256], name[256], name2[256];
};

/* Two frames of one code object for a 3.11+ layout; frame 0 innermost. */
static void build(struct fake *f, const struct py_layout *lay)
{
    memset(f, 0, sizeof(*f));
    make_str(f->file, lay, "train.py", 8, 1);
    make_str(f->name, lay, "Trainer.step", 12, 1);
    static const uint16_t wide[] = { 'g', 0xf6, 0x3b1, 0x4e2d }; /* g, ö, α, 中 */
    make_str(f->name2, lay, wide, 4, 2);
    for (int c = 0; c < 2; c++) {
        *(void **)(f->code[c] + 8) = code_type;
        *(void **)(f->code[c] + lay->code_filename) = f->file;
        *(void **)(f->code[c] + lay->code_name) = c ? f->name2 : f->name;
        if (lay->code_qualname >= 0)
            *(void **)(f->code[c] + lay->code_qualname) = c ? f->name2 : f->name;
    }
    for (int i = 0; i < 2; i++) {
        *(void **)(f->frames[i] + lay->frame_code) = f->code[i];
        *(void **)(f->frames[i] + lay->frame_back) = i == 0 ? f->frames[1] : NULL;
        if (lay->instr_kind == 2)
            *(const char **)(f->frames[i] + lay->frame_instr) =
                    f->code[i] + lay->code_adaptive + 10 * (i + 1);
        else
            *(int *)(f->frames[i] + lay->frame_instr) = 10 * (i + 1);
    }
    if (lay->cframe_frame >= 0) {
        *(void **)(f->tstate + lay->tstate_frame) = f->cframe;
        *(void **)(f->cframe + lay->cframe_frame) = f->frames[0];
    } else {
        *(void **)(f->tstate + lay->tstate_frame) = f->frames[0];
    }
}

static struct py_walk_env env_for(const struct py_layout *lay)
{
    return (struct py_walk_env){
        .lay = lay, .code_type = code_type, .str_type = str_type, .addr2line = line_of
    };
}

Test(pyframes, known_and_unknown_versions)
{
    for (int m = 8; m <= 13; m++)
        cr_assert_not_null(pyframes_layout(3, m), "3.%d", m);
    cr_assert_null(pyframes_layout(3, 7));
    cr_assert_null(pyframes_layout(3, 14));
    cr_assert_null(pyframes_layout(2, 7));
}

Test(pyframes, walks_and_decodes_every_layout)
{
    /* Each version gets frames at addresses of its own: a thread remembers its last chain by
     * frame address, code object and instruction, which within one process (one layout)
     * determine the answer. */
    static struct fake fakes[6];
    for (int m = 8; m <= 13; m++) {
        const struct py_layout *lay = pyframes_layout(3, m);
        struct fake *fp = &fakes[m - 8];
        build(fp, lay);
        struct py_walk_env env = env_for(lay);
        uint64_t tok[8];
        bool ge[8];
        int n = pyframes_walk(&env, fp->tstate, tok, ge, 8);
        cr_assert_eq(n, 2, "3.%d: %d frames", m, n);
        const char *file, *fn;
        int line;
        pyframes_describe(tok[0], &file, &fn, &line);
        cr_assert_str_eq(file, "train.py");
        cr_assert_str_eq(fn, "Trainer.step");
        /* f_lasti counts code units on 3.10 only: byte offset 20 there, else 10 */
        cr_assert_eq(line, m == 10 ? 110 : 105, "3.%d line %d", m, line);
        pyframes_describe(tok[1], &file, &fn, &line);
        cr_assert_str_eq(fn, "g\xc3\xb6\xce\xb1\xe4\xb8\xad", "UCS-2 name as UTF-8 (3.%d)", m);
        cr_assert(ge[1], "the outermost frame ends a run");
        cr_assert(pyframes_is_python(tok[0]));
    }
}

Test(pyframes, refuses_a_frame_without_code)
{
    const struct py_layout *lay = pyframes_layout(3, 11);
    struct fake f;
    build(&f, lay);
    *(void **)(f.code[1] + 8) = str_type; /* not a code object */
    struct py_walk_env env = env_for(lay);
    uint64_t tok[8];
    bool ge[8];
    cr_assert_eq(pyframes_walk(&env, f.tstate, tok, ge, 8), -1);
}

Test(pyframes, refuses_a_cycle)
{
    const struct py_layout *lay = pyframes_layout(3, 12);
    struct fake f;
    build(&f, lay);
    *(void **)(f.frames[1] + lay->frame_back) = f.frames[0];
    /* a shim frame in the loop, so the walk keeps going without filling its output */
    *(uint8_t *)(f.frames[0] + lay->frame_owner) = 3;
    *(uint8_t *)(f.frames[1] + lay->frame_owner) = 3;
    struct py_walk_env env = env_for(lay);
    uint64_t tok[8];
    bool ge[8];
    cr_assert_eq(pyframes_walk(&env, f.tstate, tok, ge, 8), -1);
}

Test(pyframes, c_shims_end_runs_and_313_skips_non_code)
{
    const struct py_layout *lay = pyframes_layout(3, 12);
    struct fake f;
    build(&f, lay);
    /* frame 0 -> shim (frame 2) -> frame 1 */
    *(void **)(f.frames[0] + lay->frame_back) = f.frames[2];
    *(void **)(f.frames[2] + lay->frame_code) = f.code[0];
    *(uint8_t *)(f.frames[2] + lay->frame_owner) = 3;
    *(void **)(f.frames[2] + lay->frame_back) = f.frames[1];
    struct py_walk_env env = env_for(lay);
    uint64_t tok[8];
    bool ge[8];
    cr_assert_eq(pyframes_walk(&env, f.tstate, tok, ge, 8), 2);
    cr_assert(ge[0], "the shim ends the inner run");

    lay = pyframes_layout(3, 13);
    build(&f, lay);
    *(void **)(f.frames[0] + lay->frame_back) = f.frames[2];
    *(void **)(f.frames[2] + lay->frame_code) = f.file; /* a str, not code: skipped on 3.13 */
    *(void **)(f.frames[2] + lay->frame_back) = f.frames[1];
    env = env_for(lay);
    cr_assert_eq(pyframes_walk(&env, f.tstate, tok, ge, 8), 2);
}

Test(pyframes, no_thread_state_no_frames)
{
    struct py_walk_env env = env_for(pyframes_layout(3, 11));
    uint64_t tok[4];
    bool ge[4];
    cr_assert_eq(pyframes_walk(&env, NULL, tok, ge, 4), 0);
}
