/* cmdline.c: finding and rewriting batch and image-size flags in a recorded command line. */
#include "cmdline.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util.h"

/* Spellings with a leading dash take "--flag V" or "--flag=V"; bare keys take "key=V" only
 * (Ultralytics' yolo command). */
static const char *const batch_names[] = {
	"--batch", "--batch-size", "--batch_size", "--per_device_train_batch_size",
	"--per-device-train-batch-size", /* HfArgumentParser adds a dashed alias of every option */
	"--bs", "-b", "batch",
};
static const char *const image_names[] = {
	"--img", "--imgsz", "--img-size", "--img_size", "--image-size", "--image_size", "imgsz",
};
static const char *const accum_names[] = {
	"--gradient_accumulation_steps", "--gradient-accumulation-steps", "--accumulation_steps", "--accumulation-steps",
	"--accumulate_grad_batches", "--accumulate-grad-batches",
};
#define N_NAMES(a) (sizeof(a) / sizeof((a)[0]))

/* A plain positive decimal integer, nothing else. */
static bool parse_count(const char *s, int64_t *out)
{
	if (!s || !*s)
		return false;
	for (const char *p = s; *p; p++)
		if (!isdigit((unsigned char)*p))
			return false;
	errno = 0;
	char *end = NULL;
	long long v = strtoll(s, &end, 10);
	if (errno || *end || v < 1)
		return false;
	*out = (int64_t)v;
	return true;
}

static bool is_python(const char *arg0)
{
	const char *base = util_basename(arg0);
	return strncmp(base, "python", 6) == 0 || strncmp(base, "pypy", 4) == 0;
}

/* Where the program's own arguments start: after a Python interpreter's options and script. */
static size_t first_program_arg(const char *const *argv, size_t argc)
{
	if (argc == 0 || !is_python(argv[0]))
		return argc ? 1 : 0;
	size_t i = 1;
	while (i < argc && argv[i][0] == '-' && argv[i][1]) {
		const char *o = argv[i];
		if (strcmp(o, "-m") == 0 || strcmp(o, "-c") == 0)
			return i + 2 <= argc ? i + 2 : argc; /* module or code, then its arguments */
		if (strcmp(o, "-W") == 0 || strcmp(o, "-X") == 0 || strcmp(o, "--check-hash-based-pycs") == 0)
			i++; /* takes a value */
		i++;
	}
	return i < argc ? i + 1 : argc; /* past the script */
}

void cmdline_find(const char *const *argv, size_t argc, enum cmdline_kind kind, struct cmdline_flag *out)
{
	memset(out, 0, sizeof *out);
	const char *const *names = kind == CMDLINE_BATCH ? batch_names : kind == CMDLINE_IMAGE ? image_names : accum_names;
	size_t n_names = kind == CMDLINE_BATCH ? N_NAMES(batch_names)
	               : kind == CMDLINE_IMAGE ? N_NAMES(image_names) : N_NAMES(accum_names);
	for (size_t i = first_program_arg(argv, argc); i < argc; i++) {
		const char *a = argv[i];
		if (!a)
			continue;
		if (strcmp(a, "--") == 0)
			break;
		for (size_t k = 0; k < n_names; k++) {
			const char *name = names[k];
			size_t len = strlen(name);
			bool dashed = name[0] == '-';
			int64_t v;
			if (dashed && strcmp(a, name) == 0 && i + 1 < argc) {
				/* "--batch 64"; a non-number after it (AutoBatch's -1) leaves it not found */
				out->found = parse_count(argv[i + 1], &v);
				if (out->found) {
					out->form = CMDLINE_SEPARATE;
					out->index = i + 1;
					snprintf(out->name, sizeof out->name, "%s", name);
					out->value = v;
				}
			} else if (strncmp(a, name, len) == 0 && a[len] == '=') {
				out->found = parse_count(a + len + 1, &v);
				if (out->found) {
					out->form = CMDLINE_ATTACHED;
					out->index = i;
					snprintf(out->name, sizeof out->name, "%s=", name);
					out->value = v;
				}
			}
		}
	}
}

char **cmdline_with_edits(const char *const *argv, size_t argc, const struct cmdline_edit *edits, size_t n,
                          size_t *out_n)
{
	size_t extra = 0;
	for (size_t k = 0; k < n; k++)
		extra += edits[k].flag && edits[k].flag->found ? 0 : edits[k].flag ? 2 : 1;
	char **copy = util_xcalloc(argc + extra + 1, sizeof *copy);
	for (size_t i = 0; i < argc; i++) {
		const struct cmdline_flag *f = NULL;
		int64_t value = 0;
		for (size_t k = 0; k < n; k++)
			if (edits[k].flag && edits[k].flag->found && edits[k].flag->index == i) {
				f = edits[k].flag;
				value = edits[k].value;
			}
		if (f) {
			struct strbuf b = {0};
			if (f->form == CMDLINE_ATTACHED)
				sb_add(&b, f->name);
			sb_printf(&b, "%lld", (long long)value);
			copy[i] = util_xstrdup(sb_str(&b));
			sb_free(&b);
		} else {
			copy[i] = util_xstrdup(argv[i] ? argv[i] : "");
		}
	}
	size_t at = argc;
	for (size_t k = 0; k < n; k++) {
		if (edits[k].flag && edits[k].flag->found)
			continue;
		copy[at++] = util_xstrdup(edits[k].name);
		if (edits[k].flag) {
			char v[32];
			snprintf(v, sizeof v, "%lld", (long long)edits[k].value);
			copy[at++] = util_xstrdup(v);
		}
	}
	*out_n = at;
	return copy;
}

static bool truthy(const char *v, bool *on)
{
	if (strcasecmp(v, "true") == 0 || strcmp(v, "1") == 0 || strcasecmp(v, "yes") == 0) {
		*on = true;
		return true;
	}
	if (strcasecmp(v, "false") == 0 || strcmp(v, "0") == 0 || strcasecmp(v, "no") == 0) {
		*on = false;
		return true;
	}
	return false;
}

bool cmdline_switch_on(const char *const *argv, size_t argc, const char *name)
{
	bool on = false;
	size_t len = strlen(name);
	for (size_t i = first_program_arg(argv, argc); i < argc; i++) {
		const char *a = argv[i] ? argv[i] : "";
		if (strcmp(a, "--") == 0)
			break;
		if (strcmp(a, name) == 0) {
			bool v;
			if (i + 1 < argc && argv[i + 1] && truthy(argv[i + 1], &v)) {
				on = v;
				i++;
			} else {
				on = true;
			}
		} else if (strncmp(a, name, len) == 0 && a[len] == '=') {
			bool v;
			if (truthy(a + len + 1, &v))
				on = v;
		}
	}
	return on;
}

enum cmdline_family cmdline_family(const char *const *argv, size_t argc)
{
	if (cmdline_is_yolo_accumulating(argv, argc))
		return CMDLINE_YOLO;
	if (argc && argv[0] && strcmp(util_basename(argv[0]), "yolo") == 0)
		return CMDLINE_ULTRALYTICS;
	struct cmdline_flag f;
	cmdline_find(argv, argc, CMDLINE_BATCH, &f);
	if (f.found && (strcmp(f.name, "--per_device_train_batch_size") == 0 ||
	                strcmp(f.name, "--per-device-train-batch-size") == 0))
		return CMDLINE_HF;
	if (f.found && strcmp(f.name, "batch=") == 0)
		return CMDLINE_ULTRALYTICS;
	return CMDLINE_GENERIC;
}

char **cmdline_with_value(const char *const *argv, size_t argc, const struct cmdline_flag *f, int64_t value)
{
	/* a flag that was not found is left out, never appended: the copy is then argv as it was */
	struct cmdline_edit e = {f, NULL, value};
	size_t n;
	return cmdline_with_edits(argv, argc, &e, f->found ? 1 : 0, &n);
}

void cmdline_free(char **argv, size_t argc)
{
	if (!argv)
		return;
	for (size_t i = 0; i < argc; i++)
		free(argv[i]);
	free(argv);
}

/* Marks the arguments holding a batch or image value, so they are left out of the comparison. */
static void value_slots(const char *const *argv, size_t argc, size_t slots[2], bool has[2])
{
	struct cmdline_flag f;
	cmdline_find(argv, argc, CMDLINE_BATCH, &f);
	has[0] = f.found;
	slots[0] = f.index;
	cmdline_find(argv, argc, CMDLINE_IMAGE, &f);
	has[1] = f.found;
	slots[1] = f.index;
}

/* An attached value's flag part: "--batch=" of "--batch=64". */
static size_t flag_part(const char *a)
{
	const char *eq = strchr(a, '=');
	return eq ? (size_t)(eq - a) + 1 : strlen(a);
}

bool cmdline_same_job(const char *const *a, size_t na, const char *const *b, size_t nb)
{
	if (na != nb)
		return false;
	size_t sa[2], sb[2];
	bool ha[2], hb[2];
	value_slots(a, na, sa, ha);
	value_slots(b, nb, sb, hb);
	for (int k = 0; k < 2; k++)
		if (ha[k] != hb[k] || (ha[k] && sa[k] != sb[k]))
			return false;
	for (size_t i = 0; i < na; i++) {
		const char *x = a[i] ? a[i] : "", *y = b[i] ? b[i] : "";
		bool slot = (ha[0] && i == sa[0]) || (ha[1] && i == sa[1]);
		if (!slot) {
			if (strcmp(x, y) != 0)
				return false;
		} else {
			size_t lx = flag_part(x), ly = flag_part(y);
			bool attached_x = strchr(x, '=') != NULL, attached_y = strchr(y, '=') != NULL;
			if (attached_x != attached_y || (attached_x && (lx != ly || strncmp(x, y, lx) != 0)))
				return false;
		}
	}
	return true;
}

static bool contains_nocase(const char *s, const char *needle)
{
	size_t n = strlen(needle);
	for (; *s; s++)
		if (strncasecmp(s, needle, n) == 0)
			return true;
	return false;
}

bool cmdline_is_yolo_accumulating(const char *const *argv, size_t argc)
{
	size_t start = first_program_arg(argv, argc);
	if (start == 0 || start > argc)
		return false;
	const char *script = argv[start - 1] ? argv[start - 1] : "";
	const char *base = util_basename(script);
	if (strcmp(base, "train_dual.py") == 0 || strcmp(base, "train_triple.py") == 0 ||
	    strcmp(base, "train_aux.py") == 0)
		return true;
	/* train.py of a yolov5/v7/v9 checkout, or given a yolov5/7/9 model */
	if (strcmp(base, "train.py") != 0)
		return false;
	for (size_t i = 0; i < argc; i++) {
		const char *x = argv[i] ? argv[i] : "";
		if (contains_nocase(x, "yolov5") || contains_nocase(x, "yolov7") || contains_nocase(x, "yolov9") ||
		    contains_nocase(x, "yolor") || contains_nocase(x, "gelan"))
			return true;
	}
	return false;
}
