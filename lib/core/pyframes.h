/* Python call sites: the calling thread's CPython frames, read without the GIL, turned into
 * frame tokens that live in the same arrays as native return addresses. */
#ifndef VW_PYFRAMES_H
#define VW_PYFRAMES_H

#include <stdbool.h>
#include <stdint.h>

#include "core.h"

/* A Python frame token: the top two bits are 10 (native addresses never have the top bit set
 * in user space), then a file id, a function id (17 bits each) and the line (28 bits). */
#define VW_PY_TAG (2ull << 62)
#define VW_PY_MASK (3ull << 62)
#define VW_PY_STR_BITS 17
#define VW_PY_LINE_BITS 28
#define VW_PY_MAX_STRINGS (1u << VW_PY_STR_BITS)

static inline bool pyframes_is_python(uint64_t token)
{
    return (token & VW_PY_MASK) == VW_PY_TAG;
}

/* Per-version facts, public for the unit tests. All offsets in bytes. */
struct py_layout {
    int minor;        /* 3.minor */
    int tstate_frame; /* offset of the frame pointer (or of cframe) in PyThreadState */
    int cframe_frame; /* 3.11/3.12: offset of current_frame in _PyCFrame; -1: none */
    int frame_code, frame_back, frame_instr;
    int frame_owner;                             /* -1: none */
    int frame_is_entry;                          /* 3.11 only, else -1 */
    int code_filename, code_name, code_qualname; /* qualname -1 before 3.11 */
    int code_adaptive;                           /* start of the bytecode (3.11+), -1 before */
    int instr_kind; /* 0: f_lasti in bytes, 1: f_lasti in code units, 2: pointer */
    int str_ascii_header, str_compact_header;
    int cframe_prev; /* 3.11/3.12: offset of previous in _PyCFrame; -1: none */
};

/* The layout of CPython 3.minor, or NULL for a version we do not know. */
const struct py_layout *pyframes_layout(int major, int minor);

/* Detect CPython in this process (once, at the library's set-up). Returns true when Python
 * frames will be collected; anything unknown or unsafe turns them off with one info line. */
bool pyframes_init(void);
extern bool pyframes_on; /* written by pyframes.c only */
static inline bool pyframes_enabled(void)
{
    return __atomic_load_n(&pyframes_on, __ATOMIC_ACQUIRE);
}

/* The strings of a token: file, function (qualified from 3.11) and line. NULL when unknown. */
void pyframes_describe(uint64_t token, const char **file, const char **function, int *line);

/* Python frames kept per call site: VRAMWATCH_STACK_DEPTH, or 32 when native stacks are off. */
#define VW_PY_DEFAULT_DEPTH 32
#define VW_PY_MERGE_MAX 128
static inline int pyframes_depth(int native_depth)
{
    return native_depth > 0 ? native_depth : VW_PY_DEFAULT_DEPTH;
}

/* The longest chain a call site can have: its native frames (`native_depth`) and, with Python
 * frames asked for, its Python frames; at least 1, at most VW_MAX_FRAMES. What a copy of every
 * site's frames makes room for. */
static inline int pyframes_chain_max(int native_depth, bool python)
{
    int n = (native_depth > 0 ? native_depth : 0) + (python ? pyframes_depth(native_depth) : 0);
    return n < 1 ? 1 : n > VW_MAX_FRAMES ? VW_MAX_FRAMES : n;
}

/* One capture, in two halves around the native walk (stack.h). pyframes_begin walks the
 * thread's Python frames and says how many native frames to ask for in `want`: `native_max`,
 * or, when the frames below the outermost run of the evaluation loop are known from this
 * thread's last full walk, only as far as that run's frame. pyframes_finish merges the native
 * frames with the Python ones into one chain (evaluation-loop frames replaced by the Python
 * frames that run of the loop was executing; Python frames left over follow), at most `cap`
 * entries, or returns -1 when the short walk did not reach that frame: then walk again for
 * `want` frames (now `native_max`) and call it again. */
struct py_capture {
    int np;          /* Python frames */
    int want;        /* native frames to ask for */
    int native_max;  /* native frames kept at most */
    int runs;        /* runs of the evaluation loop on the thread; -1: not known (before 3.11) */
    uintptr_t outer; /* the outermost run's record on the C stack (its identity); 0: none */
    const void *tstate;
    bool partial; /* `want` stops at the outermost run's frame */
    bool check;   /* a full walk made to check the kept frames */
    int nends;
    const uint64_t *tokens;        /* the thread's chain: valid until its next walk */
    int16_t ends[VW_PY_MERGE_MAX]; /* where each run of the loop ends among the tokens */
};
void pyframes_begin(struct py_capture *pc, int native_max);
int pyframes_finish(struct py_capture *pc, const uint64_t *nat, int nn, uint64_t *out, int cap);

/* A full walk's kept frames are checked against a fresh walk once every this many captures
 * that reuse them; one mismatch turns the reuse off for that thread. */
#define VW_PY_TAIL_CHECK 64

/* Both halves over frames walked in full (the unit tests, the sanitizer build's walk). */
int pyframes_merge(const uint64_t *nat, int nn, uint64_t *out, int cap, int py_max);

/* ---- for the unit tests: walk frames in given memory with a given layout ---- */
struct py_walk_env {
    const struct py_layout *lay;
    const void *code_type; /* &PyCode_Type */
    const void *str_type;  /* &PyUnicode_Type */
    int (*addr2line)(const void *code, int byte_offset);
};
int pyframes_walk(const struct py_walk_env *env, const void *tstate, uint64_t *tokens,
                  bool *group_end, int max);

#endif
