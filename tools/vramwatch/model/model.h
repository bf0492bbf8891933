/* model.h: a vramwatch.report/1 file as C structs, loaded and checked once, read by every view. */
#ifndef VRAMWATCH_TOOL_MODEL_H
#define VRAMWATCH_TOOL_MODEL_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

#define MODEL_SCHEMA "vramwatch.report/1"

/* An integer the report may leave unknown (null) or, for fields added after the contract, leave out. */
typedef struct {
    int64_t v;
    bool known;
} model_int;

/* Strings point into the parsed JSON tree, which lives as long as the report. */
struct model_frame {
    bool python;
    /* native */
    const char *module; /* NULL when unknown */
    const char *symbol; /* NULL when unknown */
    int64_t offset;     /* ip - module load base */
    model_int symbol_offset;
    /* python */
    const char *file;
    const char *function;
    int64_t line;
};

struct model_callsite {
    int64_t id;
    struct model_frame *frames; /* innermost first */
    size_t n_frames;
    int64_t live_bytes, live_count, alloc_calls, alloc_bytes_total;
    /* beyond the contract, unknown in reports of earlier versions: live bytes from here when
     * each device last reached its peak (summed over the devices), and at the latest
     * out-of-memory failure (unknown also when there was none) */
    model_int live_bytes_at_peak, live_bytes_at_failure;
    /* When the chain first allocated, and the live memory and peak just before: what the advice
     * finds phases from. Read as they are, unchecked (any integer; unknown when absent, null or
     * not an integer): the phase finder leaves out a site that lacks one. */
    model_int first_alloc_unix_ns, live_bytes_before_first, peak_live_bytes_before_first;
    /* Found when the report is loaded (model_app_frame reads it): the index of the frame just
     * outside the allocator functions the model's line is in, when it is one (a function that
     * only allocates on behalf of the lines that call it); 0 when it is not. */
    size_t past_allocator;
};

/* Another process holding memory on the device when the card ran out (NVML). */
struct model_proc {
    int64_t pid;
    const char *name; /* NULL when unknown */
    model_int used_bytes;
};

struct model_device {
    model_int ordinal; /* unknown for allocations whose device could not be told */
    const char *name;  /* NULL when unknown */
    model_int total_bytes, free_bytes, limit_bytes;
    int64_t live_bytes, peak_live_bytes;
    model_int peak_time_unix_ns;
    int64_t reserved_bytes, peak_reserved_bytes;
    int64_t alloc_calls, free_calls, failed_calls;
    /* written by the library beyond the contract; unknown when absent */
    model_int used_bytes, untracked_bytes, live_count, cache_flushes, va_reserved_bytes;
    /* training steps the program said had ended (steps.count 0: none, or an earlier version) */
    struct model_steps {
        int64_t count, last_unix_ns, live_bytes, peak_bytes, first_peak_bytes;
        model_int phase_count; /* unknown in the first reports that had steps */
    } steps;
    const char *uuid, *pci_bus_id; /* optional physical names, NULL when absent */
    bool procs_known;              /* other_processes was listed (possibly empty) */
    struct model_proc *procs;
    size_t n_procs;
};

enum model_retried { RETRIED_UNKNOWN, RETRIED_SUCCEEDED, RETRIED_FAILED };

struct model_failure {
    int64_t time_unix_ns;
    const char *api;
    model_int device;
    int64_t size, error_code;
    const char *error_name; /* NULL when unknown */
    bool oom;
    int64_t callsite;
    int64_t live_bytes_at_failure, reserved_bytes_at_failure;
    model_int free_bytes_at_failure;
    enum model_retried retried;
    /* what the program freed before its retry (a caching allocator's flush); unknown when there
     * was none or the report predates the field */
    model_int freed_before_retry;
    model_int thread;
};

struct model_live {
    const char *address;
    int64_t size;
    model_int device;
    const char *api;
    int64_t callsite, time_unix_ns;
};

struct model_crossing {
    int64_t time_unix_ns;
    const char *api;
    int64_t device, size, callsite, live_bytes_at_crossing;
};

struct model_pressure {
    const char *kind;
    int64_t time_unix_ns;
    const char *api;
    model_int device;
    int64_t size, freed_bytes, freed_count, callsite;
};

/* vramwatch_mark(): live_bytes on all devices at the marker, and the most live since the previous
 * one (the phase the marker closes). */
struct model_marker {
    int64_t time_unix_ns;
    const char *label;
    int64_t live_bytes, phase_peak_bytes;
};

/* The whole-run timeline (the report's "timeline"): per device, buckets of bucket_ns from
 * start_unix_ns, each with extremes and last values; see docs/report-format.md. */
struct model_tl_bucket {
    int64_t t, live_min, live_max, live, peak_t, reserved_max, reserved, events;
    model_int untracked_max, untracked;
};

struct model_tl_step {
    int64_t time_unix_ns, size, live_bytes_after, callsite;
    const char *api;
};

struct model_tl_device {
    model_int ordinal;
    int64_t start_unix_ns, bucket_ns, merges, events;
    model_int capacity_bytes, limit_bytes;
    struct model_tl_bucket *buckets; /* oldest first, checked to be in time order */
    size_t n_buckets;
    struct model_tl_step *steps; /* largest first */
    size_t n_steps;
};

struct model_timeline {
    bool known; /* false: a report written before the field existed */
    int64_t buckets_max;
    struct model_tl_device *devices;
    size_t n_devices;
};

/* The report's "trace": the latest allocations and frees one by one, oldest first (absent in
 * reports of earlier versions: known false). */
struct model_trace_event {
    int64_t time_unix_ns;
    bool is_free;        /* action "free"; else "alloc" */
    const char *address; /* "0x…" as written */
    uint64_t addr;       /* the same as a number */
    int64_t size;
    model_int device;
    const char *api;
    int64_t callsite; /* the allocation's, for a free too */
};

struct model_trace {
    bool known;
    int64_t capacity, total, kept, lost;
    struct model_trace_event *events;
    size_t n_events;
};

/* One variable of the job's environment as the report lists it. */
struct model_env_var {
    const char *name, *value;
};

/* process.launcher: the ids launchers give every process of one job, and its parent. Read as
 * they are, unchecked: an empty or non-string id is NULL, a negative or non-integer number
 * unknown (which is how jobs were told apart before the model held them). */
struct model_launcher {
    bool known; /* false: absent or not an object (a report of an earlier version) */
    const char *torchrun_run_id, *slurm_job_id, *slurm_step_id, *mpi_job_id, *parent_name;
    model_int parent_pid, parent_start_unix_ns;
};

struct model_process {
    int64_t pid;
    model_int ppid;
    const char *host;
    const char **argv;
    size_t argc;
    const char *cwd; /* NULL when unknown */
    model_int start_unix_ns;
    model_int rank, local_rank, world_size;
    struct model_env_var *env; /* in the report's order */
    size_t n_env;
    const char *exe; /* NULL when unknown */
    /* beyond the contract, read unchecked as the launcher: when the library was loaded into the
     * process (unknown when absent, negative or not an integer) */
    model_int loaded_unix_ns;
    struct model_launcher launcher;
    /* the program promised a vramwatch_step after every step (steps_reported; -1 when absent, as
     * in reports of earlier versions): a device without steps then completed none */
    int steps_reported;
};

struct model_host_pinned {
    bool known;
    int64_t live_bytes, peak_live_bytes, alloc_calls, free_calls, failed_calls;
};

/* PyTorch's own out-of-memory verdict (the report's "framework"), when the report has one. */
struct model_framework {
    bool known; /* false: null, or a report written before the field existed */
    const char *name, *exception, *message, *format; /* NULL when absent or null */
    model_int time_unix_ns, thread, count, device;
    model_int requested_bytes, capacity_bytes, free_bytes, process_in_use_bytes, allowed_bytes;
    model_int allocated_bytes, reserved_unallocated_bytes, private_pools_bytes;
};

struct model_report {
    const char *path;
    char *path_owned; /* set when path was made for this report ("job.json, processes[2]"); freed with it */
    cJSON *root; /* owned; --json prints it back */
    const char *reason;
    int64_t time_unix_ns;
    struct model_process process;
    struct model_device *devices;
    size_t n_devices;
    struct model_failure *failures;
    size_t n_failures;
    struct model_callsite *callsites;
    size_t n_callsites;
    struct model_live *live;
    size_t n_live;
    int64_t live_truncated;
    struct model_crossing *crossings;
    size_t n_crossings;
    /* beyond the contract */
    const char *version; /* vramwatch.version of the writer, NULL when absent */
    model_int stack_depth;
    int python; /* -1 unknown, 0 off, 1 on */
    model_int failures_total, callsites_dropped;
    model_int pressure_events_total; /* also those beyond the ones listed */
    struct model_pressure *pressure;
    size_t n_pressure;
    struct model_host_pinned host_pinned;
    struct model_framework framework;
    struct model_marker *markers; /* oldest first; none in reports without the field */
    size_t n_markers;
    struct model_timeline timeline;
    struct model_trace trace;
};

/* Loads and checks one report. On failure returns false with a one-line reason in err
 * (without the file name), e.g. "devices[0].live_bytes: expected an integer, found a string". */
bool model_load(const char *path, struct model_report *r, struct strbuf *err);
/* The same from a parsed tree, which the report takes over (freed by model_free, also on failure);
 * path names it in messages. */
bool model_load_tree(const char *path, cJSON *root, struct model_report *r, struct strbuf *err);
void model_free(struct model_report *r);

/* The value of the process's environment variable (the first listed of that name), or NULL. */
const char *model_env(const struct model_report *r, const char *name);
/* The call site with this id, or NULL. */
const struct model_callsite *model_callsite(const struct model_report *r, int64_t id);
/* The device with this ordinal, or NULL. */
const struct model_device *model_device(const struct model_report *r, int64_t ordinal);
/* The failure that is the real out-of-memory: the earliest that model_report_failure_is_real_oom
 * says is one. NULL if none. */
const struct model_failure *model_real_oom(const struct model_report *r);
/* The moment every view counts a report's times from, so that `report`, `timeline` and the
 * trace say the same time for the same event: the process start; unknown when the report does
 * not say it. */
model_int model_time_origin(const struct model_report *r);
/* Whether a failure is the retry of an earlier one whose retry failed (the same thread asking
 * for the same size on the same device next): the application saw one failure, not two. */
bool model_failure_is_retry(const struct model_report *r, const struct model_failure *f);
/* Whether the program tells when its training steps end on device d (NULL: on any device): it
 * said some ended (vramwatch_step), or it promised a call after every step (steps_reported),
 * and then a device without steps completed none. */
bool model_tells_steps(const struct model_report *r, const struct model_device *d);
/* Whether a failure is a real out-of-memory: oom true and its retry did not succeed (a retry that
 * succeeded was the caching allocator flushing: pressure). */
bool model_failure_is_real_oom(const struct model_failure *f);
/* The same for a failure of this report: in a report written because a retry succeeded (reason
 * "pressure"), the report itself says no failure so far was final, so only one whose retry is
 * known to have failed counts. */
bool model_report_failure_is_real_oom(const struct model_report *r, const struct model_failure *f);
/* A run under memory pressure: failures that cache flushes rescued, none final, and no
 * out-of-memory error raised by the framework either. Such a run fitted. */
bool model_under_pressure(const struct model_report *r);
/* Whether the report gives the call sites' live bytes at the peak (live_bytes_at_peak). */
bool model_has_peak_sites(const struct model_report *r);
/* A run that did not fit its card: an allocation ran out of memory for good, PyTorch raised its
 * out-of-memory error, or in observe mode an allocation went over the emulated limit (it would
 * have failed there). What makes report and advise exit 1, and run print the advice. A run under
 * pressure (flushes its retries rescued) fitted. */
bool model_did_not_fit(const struct model_report *r);
/* Cache flushes rescued by a retry, by the largest count the report gives of them (its pressure
 * events, the devices' cache_flushes, the failures retried with success); 0 when none. */
int64_t model_flushes(const struct model_report *r);
/* The most memory one listed cache flush released; -1 when no flush is listed. */
int64_t model_flush_largest(const struct model_report *r);
/* ---- Naming a call site: one rule for every view (report, timeline, the Leak: line, advise, the
 * job view). A call site is named by its application frame: the innermost Python frame outside
 * the machinery (PyTorch, the standard library, code without a file, installed launchers such as
 * bin/yolo, vramwatch's companion): the user's own line, or an installed package's (Ultralytics'
 * layers, transformers' models) when the user's file only calls into one; else the innermost
 * native frame outside the known libraries (CUDA, the frameworks, the interpreter, the C
 * runtime); else the outermost framework frame below the interpreter and the C runtime (a thread
 * the framework started, an operation's binding); else the innermost frame.
 * The rule is in docs/report-format.md too. ---- */

/* Whether a frame is code the user did not write: CUDA, the frameworks, ctypes, the interpreter,
 * the C runtime, installed or standard Python packages, PyTorch. */
bool model_frame_is_library(const struct model_frame *f);
/* Whether a frame is machinery between the model's code and the card: a library frame other than
 * an installed package's Python (Ultralytics' trainer is the job's code; PyTorch's is not). */
bool model_frame_is_machinery(const struct model_frame *f);
/* Index in cs->frames of the application frame (above); 0 for NULL or no frames. */
size_t model_app_frame(const struct model_callsite *cs);
/* Index in cs->frames of the outermost frame of the application's own, where a call chain drawn
 * root first starts (the flame graphs; --full draws every frame): from the application frame
 * outward, the outermost Python frame outside the machinery when that frame is Python, else the
 * last of the native frames outside the known libraries that run on from it (a C program's main;
 * the C runtime and the process's entry above it are left out). Never inside the application
 * frame; 0 for NULL or no frames. */
size_t model_first_user_frame(const struct model_callsite *cs);
/* A native frame of the Python interpreter (the executable or libpython): its eval loop and call
 * machinery between two Python lines. */
bool model_frame_in_interpreter(const struct model_frame *f);
/* The application frame when it is a line of the user's Python code, else NULL: call sites that
 * end in one line are one row of the report's table. */
const struct model_frame *model_user_line(const struct model_callsite *cs);
/* Finds the call sites whose model line is in a function that only allocates on behalf of the
 * lines that call it, and sets their past_allocator (model_app_frame's rule, model.c). The
 * loaders call it; a report made otherwise (vramwatch top's, from its live files) calls it once
 * its call sites are in place. */
void model_find_allocators(struct model_report *r);
/* Which rule named the call site, when it is an installed package's line: "the innermost line
 * outside PyTorch, in ultralytics: your train.py:5 in <module> only calls into it" (or "no line of
 * your own code is on the stack"); when it is the line that called an allocator: "the line that
 * calls train.py:194 in Pool.malloc, which only allocates for the lines that call it". False, with
 * nothing written, for the user's own line and native frames, which need no saying. */
bool model_add_site_rule(struct strbuf *b, const struct model_report *r,
                         const struct model_callsite *cs);

/* How long a frame's text is: FULL as recorded (whole paths and symbols, symbol offsets), SHORT
 * for tables (a Python file from the process's folder or from inside site-packages, a C++ name
 * without its parameters, a module's base name), BRIEF for annotations (SHORT with a Python
 * file's base name), STACK for the flame graphs' standard formats (SHORT's parts with the
 * function first, and a native frame without its offset when its symbol is known, so that one
 * function is one frame whatever line of it ran). All name the same frame. */
enum model_name_form { MODEL_NAME_SHORT, MODEL_NAME_FULL, MODEL_NAME_BRIEF, MODEL_NAME_STACK };
/* "file:line in function" for Python, "symbol (module+0xoffset)" or "module+0xoffset" for
 * native code; in the STACK form "function (file:line)" and "symbol (module)". */
void model_add_frame(struct strbuf *b, const struct model_report *r, const struct model_frame *f,
                     enum model_name_form form);
/* The one line that names a call site: its application frame, or why it has none. */
void model_add_callsite(struct strbuf *b, const struct model_report *r, int64_t id,
                        enum model_name_form form);
/* model_add_callsite in the BRIEF form, for annotations: "train.py:212 in step". */
void model_callsite_short(struct strbuf *b, const struct model_report *r, int64_t id);

/* The device a report is about, for every view that speaks of one (the leak's projection, the
 * advice): the one that ran out of memory for good when a failure says which, else the one with
 * the highest peak reserved memory (what the card had to hold, pools' cache included: live alone
 * understates a card a caching allocator filled), ties to the higher peak live memory, then to
 * the first listed. NULL when the report has no device. */
const struct model_device *model_main_device(const struct model_report *r);
/* The timeline resampled into n columns over [from, to): per column the most live and reserved
 * memory of the buckets that start in it; a column without a bucket holds the previous bucket's
 * last values (nothing changed then), and columns before the first bucket hold 0. */
void model_tl_columns(const struct model_tl_device *d, int64_t from, int64_t to, size_t n,
                      int64_t *live, int64_t *reserved);
/* Sum of live_bytes over all devices (saturating). */
int64_t model_total_live(const struct model_report *r);

#endif
