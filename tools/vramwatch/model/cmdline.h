/* cmdline.h: the batch and image-size flags of a training command line, found as spelled and
 * rewritten in place with a new value. */
#ifndef VRAMWATCH_TOOL_CMDLINE_H
#define VRAMWATCH_TOOL_CMDLINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum cmdline_kind {
    CMDLINE_BATCH,
    CMDLINE_IMAGE,
    CMDLINE_ACCUM, /* gradient accumulation steps: --gradient_accumulation_steps (Hugging Face) */
    CMDLINE_EVAL_BATCH, /* evaluation batch: --per_device_eval_batch_size (Hugging Face) */
    CMDLINE_NBS, /* nominal batch the script accumulates up to: nbs= (Ultralytics, default 64) */
};

enum cmdline_form {
    CMDLINE_SEPARATE, /* --batch 64: the value is the next argument */
    CMDLINE_ATTACHED, /* --batch=64 or batch=64: flag and value in one argument */
};

struct cmdline_flag {
    bool found;
    enum cmdline_form form;
    size_t index;  /* the argument that holds the value */
    char name[40]; /* as spelled: "--batch", "--batch-size", "batch=", "-b" */
    int64_t value; /* always >= 1 */
    /* The batch flag is there but asks for AutoBatch (YOLO's --batch -1, Ultralytics' batch=-1 or
     * batch=0.7): found stays false, as nothing can be scaled from it, but form, index and name say
     * where it is, so cmdline_with_edits and cmdline_with_value replace it with a number in place. */
    bool autobatch;
    double fraction; /* AutoBatch's share of GPU memory when given (batch=0.7), else 0 */
};

/* Finds the flag of this kind the program will act on (the last one given, as argparse does).
 * Interpreter options in front of a Python script and a launcher's own options (torchrun,
 * deepspeed, accelerate launch) are skipped. Values that are not a plain positive integer count as
 * not found; AutoBatch's (batch=-1, batch=0.7, YOLO's --batch -1) set autobatch as well. For the
 * Ultralytics family only its own forms count: batch=16 and --batch=16 (it strips leading dashes),
 * never "--batch 16", which it refuses. */
void cmdline_find(const char *const *argv, size_t argc, enum cmdline_kind kind,
                  struct cmdline_flag *out);

/* A copy of argv with the flag's value replaced, spelled the same way. Free with cmdline_free. */
char **cmdline_with_value(const char *const *argv, size_t argc, const struct cmdline_flag *f,
                          int64_t value);
void cmdline_free(char **argv, size_t argc);

/* Whether two command lines are the same job: equal argument by argument, apart from the values
 * of the batch and image-size flags. */
bool cmdline_same_job(const char *const *a, size_t na, const char *const *b, size_t nb);

/* A value to set, or a switch to turn on, in a command line: an existing flag is rewritten in
 * place, a missing one appended at the end (as "--name value", or "--name" for a switch). */
struct cmdline_edit {
    const struct cmdline_flag *flag; /* the flag as found (found or not); NULL for a switch */
    const char *name;                /* spelling to append when not found; "key=" appends "key=V" */
    int64_t value;                   /* ignored for a switch */
};

/* A copy of argv with the edits applied; *out_n gets its length. Free with cmdline_free. */
char **cmdline_with_edits(const char *const *argv, size_t argc, const struct cmdline_edit *edits,
                          size_t n, size_t *out_n);

/* Whether a boolean switch is on: "--fp16", "--fp16=True", "--fp16 true", "--fp16 1" (the last
 * one counts). Past the leading dashes "-" and "_" are the same letter, as Hugging Face's parser
 * adds the dashed alias of every option (--gradient-checkpointing); its booleans are
 * true/false/yes/no/t/f/y/n/1/0 in any case. For Ultralytics the name is its key ("amp"):
 * amp, --amp, amp=False, --amp=0. */
bool cmdline_switch_on(const char *const *argv, size_t argc, const char *name);

/* The same, three-valued: 1 on, 0 off, -1 not given (so a caller can apply the script's default,
 * e.g. Ultralytics' amp=True). */
int cmdline_switch_state(const char *const *argv, size_t argc, const char *name);

enum cmdline_family {
    CMDLINE_GENERIC,
    CMDLINE_YOLO,        /* YOLOv5/v7/v9 training scripts: accumulate to 64, AMP always on */
    CMDLINE_ULTRALYTICS, /* the yolo command (batch=16 imgsz=640): accumulates to 64, AMP on */
    CMDLINE_HF,          /* Hugging Face Trainer scripts (--per_device_train_batch_size) */
};

/* Which kind of training command this is; it decides what the script already does by itself. */
enum cmdline_family cmdline_family(const char *const *argv, size_t argc);

/* Whether the script is one of YOLOv5/v7/v9's, whose train scripts accumulate gradients up to a
 * nominal batch of 64 by themselves. */
bool cmdline_is_yolo_accumulating(const char *const *argv, size_t argc);

/* The family's spelling of a flag of this kind, for a cmdline_edit that appends it: "batch=" for
 * Ultralytics, "--per_device_train_batch_size" for Hugging Face, ...; NULL when the family has
 * none (YOLO and Ultralytics accumulate by themselves). */
const char *cmdline_append_name(const char *const *argv, size_t argc, enum cmdline_kind kind);

/* The program that starts the job's processes, when there is one in front of the script. */
enum cmdline_launcher {
    CMDLINE_LAUNCH_NONE,
    CMDLINE_LAUNCH_TORCHRUN,     /* torchrun, python -m torch.distributed.run */
    CMDLINE_LAUNCH_TORCH_LAUNCH, /* python -m torch.distributed.launch (deprecated, same options) */
    CMDLINE_LAUNCH_DEEPSPEED,    /* deepspeed */
    CMDLINE_LAUNCH_ACCELERATE,   /* accelerate launch */
};

/* Where a command line's parts are: interpreter, launcher and its options, script, script
 * arguments. Indexes are into argv; a missing part has index argc. */
struct cmdline_job {
    enum cmdline_launcher launcher;
    size_t launcher_at; /* "torchrun", "deepspeed", "accelerate", or the "-m" before torch.distributed.run */
    size_t launcher_opts; /* the launcher's first own option (after "launch" for accelerate) */
    size_t script;        /* the script, module (module true) or program run */
    size_t args;          /* the script's first argument */
    bool module;          /* script is a module name: python -m mod, torchrun -m mod */
    bool nproc_given;     /* the launcher was given a process count ... */
    size_t nproc_index;   /* ... in this argument: the value, or the whole "--nproc_per_node=8" */
    bool nproc_attached;
    int64_t nproc;      /* processes per node (accelerate: in all), 0 when not a number ("auto") */
    int64_t nnodes;     /* 1 when not given, 0 when not a plain number (elastic "1:4") */
    int64_t world_size; /* processes of the whole job: 1 without a launcher, 0 when unknown */
};

void cmdline_job_parse(const char *const *argv, size_t argc, struct cmdline_job *out);
const char *cmdline_launcher_name(enum cmdline_launcher l); /* "torchrun", ..., "" for none */

/* The job's number of processes (world size): 1 without a launcher, the launcher's count with one
 * (torchrun's default is 1 per node), 0 when the command line does not say (deepspeed without
 * --num_gpus uses every visible GPU; accelerate without --num_processes reads its config). */
int64_t cmdline_world_size(const char *const *argv, size_t argc);

/* The same job on nproc processes of this node: an existing launcher gets its count replaced in
 * place (torchrun/torch.distributed.launch --nproc_per_node, deepspeed --num_gpus, accelerate
 * launch --num_processes) or added right after its name; a plain Python command becomes
 * "python3 [its own options] -m torch.distributed.run --nproc_per_node N [-m] script args", the
 * interpreter's options staying in front of -m where Python reads them. NULL (and *out_n 0) for
 * what cannot be launched that way: python -c, a program that is not Python. Free with
 * cmdline_free. */
char **cmdline_with_launcher(const char *const *argv, size_t argc, int64_t nproc, size_t *out_n);

/* What the batch flag counts under several processes. */
enum cmdline_batch_scope {
    CMDLINE_BATCH_PER_RANK, /* each process's own: Hugging Face's per_device, generic --batch-size */
    CMDLINE_BATCH_TOTAL, /* the job's, split over the processes: YOLOv5/v7/v9 --batch, Ultralytics batch= */
};
enum cmdline_batch_scope cmdline_batch_scope(const char *const *argv, size_t argc);

/* A batch that the script accepts on world processes: YOLOv5/v7/v9 assert
 * batch % WORLD_SIZE == 0, so theirs is rounded down to a multiple of world (at least world);
 * other families take any batch and get it unchanged. */
int64_t cmdline_batch_for_world(const char *const *argv, size_t argc, int64_t batch, int64_t world);

#endif
