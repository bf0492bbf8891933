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
};

enum cmdline_form {
	CMDLINE_SEPARATE, /* --batch 64: the value is the next argument */
	CMDLINE_ATTACHED, /* --batch=64 or batch=64: flag and value in one argument */
};

struct cmdline_flag {
	bool found;
	enum cmdline_form form;
	size_t index;   /* the argument that holds the value */
	char name[40];  /* as spelled: "--batch", "--batch-size", "batch=", "-b" */
	int64_t value;  /* always >= 1 */
};

/* Finds the flag of this kind the program will act on (the last one given, as argparse does).
 * Interpreter options in front of a Python script are skipped. Values that are not a plain
 * positive integer (batch=-1, batch=0.7: AutoBatch) count as not found. */
void cmdline_find(const char *const *argv, size_t argc, enum cmdline_kind kind, struct cmdline_flag *out);

/* A copy of argv with the flag's value replaced, spelled the same way. Free with cmdline_free. */
char **cmdline_with_value(const char *const *argv, size_t argc, const struct cmdline_flag *f, int64_t value);
void cmdline_free(char **argv, size_t argc);

/* Whether two command lines are the same job: equal argument by argument, apart from the values
 * of the batch and image-size flags. */
bool cmdline_same_job(const char *const *a, size_t na, const char *const *b, size_t nb);

/* A value to set, or a switch to turn on, in a command line: an existing flag is rewritten in
 * place, a missing one appended at the end (as "--name value", or "--name" for a switch). */
struct cmdline_edit {
	const struct cmdline_flag *flag; /* the flag as found (found or not); NULL for a switch */
	const char *name;                /* spelling to append when not found */
	int64_t value;                   /* ignored for a switch */
};

/* A copy of argv with the edits applied; *out_n gets its length. Free with cmdline_free. */
char **cmdline_with_edits(const char *const *argv, size_t argc, const struct cmdline_edit *edits, size_t n,
                          size_t *out_n);

/* Whether a boolean switch is on: "--fp16", "--fp16=True", "--fp16 true", "--fp16 1" (the last
 * one counts). */
bool cmdline_switch_on(const char *const *argv, size_t argc, const char *name);

enum cmdline_family {
	CMDLINE_GENERIC,
	CMDLINE_YOLO,         /* YOLOv5/v7/v9 training scripts: accumulate to 64, AMP always on */
	CMDLINE_ULTRALYTICS,  /* the yolo command (batch=16 imgsz=640): accumulates to 64, AMP on */
	CMDLINE_HF,           /* Hugging Face Trainer scripts (--per_device_train_batch_size) */
};

/* Which kind of training command this is; it decides what the script already does by itself. */
enum cmdline_family cmdline_family(const char *const *argv, size_t argc);

/* Whether the script is one of YOLOv5/v7/v9's, whose train scripts accumulate gradients up to a
 * nominal batch of 64 by themselves. */
bool cmdline_is_yolo_accumulating(const char *const *argv, size_t argc);

#endif
