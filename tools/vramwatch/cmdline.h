/* cmdline.h: the batch and image-size flags of a training command line, found as spelled and
 * rewritten in place with a new value. */
#ifndef VRAMWATCH_TOOL_CMDLINE_H
#define VRAMWATCH_TOOL_CMDLINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum cmdline_kind { CMDLINE_BATCH, CMDLINE_IMAGE };

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

/* Whether the script is one of YOLOv5/v7/v9's, whose train scripts accumulate gradients up to a
 * nominal batch of 64 by themselves. */
bool cmdline_is_yolo_accumulating(const char *const *argv, size_t argc);

#endif
