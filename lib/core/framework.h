/* A framework's own out-of-memory verdict (the message of the exception PyTorch throws when
 * its allocator gives up), parsed into figures, kept for the report and written as its
 * top-level "framework" field. */
#ifndef VW_FRAMEWORK_H
#define VW_FRAMEWORK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct jsonw;

/* What is kept of the message: enough for every known format and a few lines of context. */
#define VW_FRAMEWORK_MESSAGE_MAX 4096

/* Figures are bytes, -1 where the message does not say. */
struct framework_verdict {
    int64_t requested;            /* "Tried to allocate X" */
    int64_t capacity;             /* the device's total capacity */
    int64_t free;                 /* the device's free memory */
    int64_t process_in_use;       /* all memory of this process on the device (current format) */
    int64_t allowed;              /* the per-process limit (set_per_process_memory_fraction) */
    int64_t allocated;            /* allocated by PyTorch (private pools included) */
    int64_t reserved_unallocated; /* reserved by PyTorch but not handed out: fragmentation */
    int64_t private_pools;        /* allocated in private pools (CUDA graphs) */
    int device;                   /* "GPU d", -1 when absent or unreadable */
    const char *format;           /* "current", "1.x", "cudaMallocAsync", or NULL (unknown) */
    const char *exception;        /* the C++ type thrown (a static string); NULL: not said */
    char message[VW_FRAMEWORK_MESSAGE_MAX]; /* the message, cut at a UTF-8 character boundary */
};

/* The C++ types PyTorch has thrown its out-of-memory error as. */
enum framework_exception {
    FRAMEWORK_EXC_NONE,     /* any other type */
    FRAMEWORK_EXC_OOM,      /* c10::OutOfMemoryError: PyTorch 1.13 and later */
    FRAMEWORK_EXC_CUDA_OOM, /* c10::CUDAOutOfMemoryError: 1.5 to 1.12 */
    FRAMEWORK_EXC_ERROR,    /* plain c10::Error: 1.4 and before, and every other PyTorch error */
};

/* Which of them a std::type_info name (mangled, without the leading '*' of a local type) is.
 * Called for every C++ throw in the process: one short comparison for any other type. */
enum framework_exception framework_exception_kind(const char *mangled);

/* "c10::OutOfMemoryError", ...: the type as the report names it; NULL for FRAMEWORK_EXC_NONE. */
const char *framework_exception_name(enum framework_exception kind);

/* Whether the message of a plain c10::Error is the caching allocator's out-of-memory message:
 * it starts with "CUDA out of memory. Tried to allocate " (PyTorch 1.4 and before threw it as
 * a plain c10::Error; any other text of that type is some other error). */
bool framework_plain_error_is_oom(const char *msg);

/* Whether a library's dynamic string table (`n` bytes) names c10::OutOfMemoryError or
 * c10::CUDAOutOfMemoryError: a libc10_cuda.so that does throws its out-of-memory error as a
 * type of its own, so none of its plain c10::Errors is one. */
bool framework_names_oom_type(const char *names, size_t n);

/* Parse PyTorch's out-of-memory message, current ("... GPU 0 has a total capacity of ..."),
 * 1.x ("... (GPU 0; 16.00 GiB total capacity; ...)") or cudaMallocAsync backend ("Allocation on
 * device 0 would exceed allowed memory. ...") format, anywhere in `msg` (a prefix such as
 * "torch.OutOfMemoryError: " and text after it are allowed). `out` is always filled: the
 * message copy, and -1 for every figure that was not found; `exception` is left NULL for the
 * caller. Returns whether a known format was recognised. Never reads past the terminating NUL;
 * any bytes are safe. */
bool framework_parse_pytorch(const char *msg, struct framework_verdict *out);

/* Keep `v` as the latest verdict (thread-safe, no malloc), with the time and calling thread. */
void framework_store(const struct framework_verdict *v);

/* Forget every verdict and re-create the lock: the child side of fork (the verdict was the
 * parent's, and the lock may have been held by a thread that does not exist in the child). */
void framework_reset(void);

/* How many verdicts were stored since the start (or the last reset). */
uint64_t framework_count(void);

/* The top-level report field: "framework": { ... } for the latest verdict, or null. */
void framework_write(struct jsonw *w);

#endif
