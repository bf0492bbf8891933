/* cmd_advise.c: `vramwatch advise`: concrete changes to the command line, with predicted peaks. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "json.h"
#include "memmodel.h"

#define ADVICE_SCHEMA "vramwatch.advice/1"
#define GiB ((int64_t)1 << 30)
#define MAX_BATCH 1048576
#define MAX_RECS 8

enum tri { TRI_NULL = -1, TRI_FALSE = 0, TRI_TRUE = 1 };

struct rec {
	const char *kind;
	const char *flag;    /* NULL: null */
	int64_t value;
	bool has_value;
	char **command;      /* NULL: null */
	size_t command_n;
	double predicted;
	bool has_predicted;
	enum tri fits;
	struct strbuf note;
};

struct advice {
	const struct model_report *r;
	const struct memmodel_obs *o; /* of the first report */
	struct memmodel m;
	int64_t capacity, usable;
	const char *capacity_from;
	double headroom;
	struct rec recs[MAX_RECS];
	size_t n_recs;
};

static struct rec *add_rec(struct advice *a, const char *kind)
{
	struct rec *x = &a->recs[a->n_recs++];
	memset(x, 0, sizeof *x);
	x->kind = kind;
	x->fits = TRI_NULL;
	return x;
}

/* Whether a run at this batch and image fits the card: certain only when the prediction is not
 * a lower bound, or when even the upper bound fits. */
static enum tri fits_of(const struct advice *a, int64_t batch, int64_t image)
{
	double predicted = memmodel_predict(&a->m, batch, image);
	if (predicted > (double)a->capacity)
		return TRI_FALSE;
	if (predicted > (double)a->usable)
		return TRI_NULL;
	if (!a->m.lower_bound)
		return TRI_TRUE;
	if (a->m.has_upper && memmodel_predict_upper(&a->m, batch, image) <= (double)a->usable)
		return TRI_TRUE;
	return TRI_NULL;
}

static void set_command(struct rec *x, const struct model_report *r, const struct cmdline_flag *f, int64_t v)
{
	x->command = cmdline_with_value(r->process.argv, r->process.argc, f, v);
	x->command_n = r->process.argc;
}

static void add_argv_note(struct strbuf *b, char **argv, size_t n)
{
	util_add_argv(b, (const char *const *)argv, n);
}

/* A byte count computed in double, back to an integer without overflow (NaN and below 0: 0). */
static int64_t clamp_bytes(double v)
{
	if (!(v > 0))
		return 0;
	if (v >= 9.2e18)
		return INT64_MAX;
	return (int64_t)llround(v);
}

static void add_size(struct strbuf *b, double bytes)
{
	char buf[UTIL_SIZE_LEN];
	sb_add(b, util_fmt_size(clamp_bytes(bytes), buf));
}

/* The largest batch whose predicted need fits the usable memory, at this image size; 0 if none. */
static int64_t largest_batch(const struct advice *a, int64_t image)
{
	const struct memmodel *m = &a->m;
	double per = m->per_sample_bytes * (m->image_ref > 0 && image > 0 ? ((double)image / (double)m->image_ref) * ((double)image / (double)m->image_ref) : 1.0);
	double room = (double)a->usable - m->static_bytes;
	if (!(per > 0) || room < per)
		return 0;
	double b = floor(room / per);
	return b > MAX_BATCH ? MAX_BATCH : (int64_t)b;
}

/* The largest multiple of 32 that fits at this batch, at most the current size; 0 if none. */
static int64_t largest_image(const struct advice *a, int64_t batch, int64_t current)
{
	const struct memmodel *m = &a->m;
	double room = (double)a->usable - m->static_bytes;
	if (!(m->per_sample_bytes > 0) || m->image_ref <= 0 || batch < 1 || room <= 0)
		return 0;
	double side = (double)m->image_ref * sqrt(room / (m->per_sample_bytes * (double)batch));
	double img = floor(side / 32.0) * 32.0;
	if (img > (double)current)
		img = (double)current;
	return img >= 32 ? (int64_t)img : 0;
}

/* A size as vramwatch run --limit takes it back: 16GiB, 512MiB, else bytes. */
static void add_limit_size(struct strbuf *b, int64_t bytes)
{
	if (bytes % GiB == 0)
		sb_printf(b, "%" PRId64 "GiB", bytes / GiB);
	else if (bytes % (1 << 20) == 0)
		sb_printf(b, "%" PRId64 "MiB", bytes / (1 << 20));
	else
		sb_printf(b, "%" PRId64, bytes);
}

static void add_measure_note(struct advice *a, struct rec *x, char **cmd, size_t n)
{
	sb_add(&x->note, "; measure it exactly with: vramwatch run --limit ");
	add_limit_size(&x->note, a->capacity);
	sb_add(&x->note, " --observe -- ");
	add_argv_note(&x->note, cmd, n);
}

static void yolo_note(const struct advice *a, struct rec *x)
{
	if (cmdline_is_yolo_accumulating(a->r->process.argv, a->r->process.argc))
		sb_add(&x->note, "; this script keeps the effective batch at 64 by accumulating gradients over "
		                 "round(64 / batch) steps by itself: no accumulation flag is needed");
}

static void advise_batch_and_image(struct advice *a)
{
	const struct memmodel_obs *o = a->o;
	const struct memmodel *m = &a->m;
	int64_t cur_b = o->batch.found ? o->batch.value : 0;
	int64_t cur_img = o->image.found ? o->image.value : 0;
	if (m->basis == MEMMODEL_BOUND) {
		if (!o->batch.found || cur_b < 2)
			return;
		struct rec *x = add_rec(a, "batch");
		x->flag = o->batch.name;
		x->value = cur_b / 2;
		x->has_value = true;
		set_command(x, a->r, &o->batch, x->value);
		double lower = memmodel_predict(m, x->value, cur_img);
		x->fits = lower > (double)a->capacity ? TRI_FALSE : TRI_NULL;
		sb_add(&x->note, "the need is only known from below (the run failed with nothing else to go on): "
		                 "half the batch is the next run to try");
		add_measure_note(a, x, x->command, x->command_n);
		yolo_note(a, x);
		return;
	}
	int64_t best_b = o->batch.found ? largest_batch(a, cur_img) : 0;
	if (best_b >= 1) {
		struct rec *x = add_rec(a, "batch");
		x->flag = o->batch.name;
		x->value = best_b;
		x->has_value = true;
		set_command(x, a->r, &o->batch, best_b);
		x->predicted = memmodel_predict(m, best_b, cur_img);
		x->has_predicted = true;
		x->fits = fits_of(a, best_b, cur_img);
		sb_printf(&x->note, "the largest batch whose predicted need stays within %.0f%% headroom", a->headroom);
		if (m->has_upper) {
			sb_add(&x->note, "; the need lies between this prediction (from the level at which the run crossed the "
			                 "limit) and ");
			add_size(&x->note, memmodel_predict_upper(m, best_b, cur_img));
			sb_add(&x->note, " (from its peak, the allocator's cache included): confirm with vramwatch run --limit ");
			add_limit_size(&x->note, a->capacity);
			sb_add(&x->note, " -- ");
			add_argv_note(&x->note, x->command, x->command_n);
		} else if (m->lower_bound) {
			sb_add(&x->note, " (the model rests on a failure, so the prediction is a lower bound)");
		}
		yolo_note(a, x);
	}
	if (o->image.found && m->image_ref > 0) {
		int64_t at_b = cur_b > 0 ? cur_b : 1;
		int64_t img = largest_image(a, at_b, cur_img);
		if (img >= 32 && img < cur_img) {
			struct rec *x = add_rec(a, "image_size");
			x->flag = o->image.name;
			x->value = img;
			x->has_value = true;
			set_command(x, a->r, &o->image, img);
			x->predicted = memmodel_predict(m, at_b, img);
			x->has_predicted = true;
			x->fits = fits_of(a, at_b, img);
			sb_printf(&x->note, "the largest multiple of 32 that fits at batch %" PRId64
			                    "; a smaller image changes what the model sees, and can cost accuracy", at_b);
		}
	}
	if (o->batch.found && best_b < 1) {
		struct rec *x = add_rec(a, "multi_gpu");
		x->predicted = memmodel_predict(m, 1, cur_img);
		x->has_predicted = true;
		x->fits = fits_of(a, 1, cur_img);
		sb_add(&x->note, "not even batch 1 fits this card with the headroom: spread the job over several GPUs "
		                 "(torchrun --nproc_per_node=N, or DeepSpeed ZeRO to shard the optimizer state)");
	}
}

static void advise_allocator(struct advice *a)
{
	const struct model_report *r = a->r;
	const struct model_device *d = a->o->device;
	const char *names[] = {"PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"};
	for (size_t i = 0; i < 2; i++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(r->process.env, names[i]);
		if (cJSON_IsString(v) && v->valuestring && strstr(v->valuestring, "expandable_segments:True"))
			return;
	}
	int64_t flushes = d->cache_flushes.known ? d->cache_flushes.v : 0;
	int64_t idle = -1;
	const struct model_framework *fw = &r->framework;
	if (fw->known && fw->reserved_unallocated_bytes.known && fw->reserved_unallocated_bytes.v > 0) {
		int64_t held = fw->reserved_unallocated_bytes.v;
		int64_t total = fw->allocated_bytes.known ? util_sat_add(fw->allocated_bytes.v, held) : 0;
		if (held >= GiB || (total > 0 && (double)held >= 0.1 * (double)total))
			idle = held;
	}
	if (flushes <= 0 && idle < 0)
		return;
	struct rec *x = add_rec(a, "allocator");
	x->flag = "PYTORCH_CUDA_ALLOC_CONF";
	x->command_n = r->process.argc + 2;
	x->command = util_xcalloc(x->command_n + 1, sizeof *x->command);
	x->command[0] = util_xstrdup("env");
	x->command[1] = util_xstrdup("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True");
	for (size_t i = 0; i < r->process.argc; i++)
		x->command[i + 2] = util_xstrdup(r->process.argv[i] ? r->process.argv[i] : "");
	sb_add(&x->note, "expandable segments let PyTorch grow segments instead of keeping many of fixed size");
	if (idle >= 0) {
		double predicted = (double)a->o->need - (double)idle;
		x->predicted = predicted > 0 ? predicted : 0;
		x->has_predicted = true;
		x->fits = TRI_NULL;
		sb_add(&x->note, "; PyTorch held ");
		add_size(&x->note, (double)idle);
		sb_add(&x->note, " reserved but unallocated (fragmentation) that this would recover at most");
	}
	if (flushes > 0)
		sb_printf(&x->note, "; the caching allocator had to flush its cache %" PRId64 " time%s", flushes,
		          flushes == 1 ? "" : "s");
}

static const char *tri_text(enum tri t)
{
	return t == TRI_TRUE ? "fits" : t == TRI_FALSE ? "does not fit" : "may fit (not certain)";
}

static void print_text(FILE *out, const struct advice *a)
{
	const struct memmodel_obs *o = a->o;
	const struct memmodel *m = &a->m;
	char b1[UTIL_SIZE_LEN], b2[UTIL_SIZE_LEN], b3[UTIL_SIZE_LEN];
	struct strbuf s = {0};
	util_add_argv(&s, a->r->process.argv, a->r->process.argc);
	fprintf(out, "vramwatch advise: %s\n\n", sb_str(&s));
	sb_free(&s);
	if (o->device->ordinal.known)
		fprintf(out, "Device %" PRId64 ": ", o->device->ordinal.v);
	else
		fputs("Device: ", out);
	fprintf(out, "capacity %s (%s), %.0f%% headroom: %s usable\n", util_fmt_size(a->capacity, b1), a->capacity_from,
	        a->headroom, util_fmt_size(a->usable, b2));
	fputs("Observed: ", out);
	if (o->batch.found)
		fprintf(out, "batch %" PRId64 " (%s), ", o->batch.value, o->batch.name);
	else
		fputs("no batch flag found, ", out);
	if (o->image.found)
		fprintf(out, "image %" PRId64 " (%s), ", o->image.value, o->image.name);
	fprintf(out, "peak %s", util_fmt_size(o->peak, b1));
	if (o->oom)
		fprintf(out, "; ran out of memory: needs at least %s", util_fmt_size(o->need, b2));
	else if (o->observe)
		fprintf(out, "; observe mode: crossed the limit at %s (its peak holds the allocator's cache, which it would have released on a full card)",
		        util_fmt_size(o->need, b2));
	fputc('\n', out);
	fprintf(out, "Model (%s): need = %s + %s per sample", memmodel_basis_name(m->basis),
	        util_fmt_size(clamp_bytes(m->static_bytes), b1), util_fmt_size(clamp_bytes(m->per_sample_bytes), b2));
	if (m->image_ref > 0)
		fprintf(out, " at image %" PRId64 " (scaling with the image side squared)", m->image_ref);
	fprintf(out, ", +/- %s", util_fmt_size(clamp_bytes(m->spread), b3));
	if (m->lower_bound)
		fputs(", a lower bound", out);
	fprintf(out, "\n  from %zu measured run%s and %zu lower bound%s (out-of-memory failures, observe-mode crossings)\n",
	        m->n_points, m->n_points == 1 ? "" : "s", m->n_bounds, m->n_bounds == 1 ? "" : "s");
	fputc('\n', out);
	if (a->n_recs == 0) {
		fputs("No change to recommend from these reports.\n", out);
		return;
	}
	fputs("Recommendations, best first:\n", out);
	for (size_t i = 0; i < a->n_recs; i++) {
		const struct rec *x = &a->recs[i];
		fprintf(out, "  %zu. %s", i + 1, x->kind);
		if (x->has_value)
			fprintf(out, " %s%s%" PRId64, x->flag, x->flag[strlen(x->flag) - 1] == '=' ? "" : " ", x->value);
		if (x->has_predicted)
			fprintf(out, ": predicted peak %s, %s", util_fmt_size(clamp_bytes(x->predicted), b1), tri_text(x->fits));
		else
			fprintf(out, ": %s", tri_text(x->fits));
		fputc('\n', out);
		if (x->command) {
			struct strbuf c = {0};
			util_add_argv(&c, (const char *const *)x->command, x->command_n);
			fprintf(out, "     %s\n", sb_str(&c));
			sb_free(&c);
		}
		fputs("     ", out);
		util_put_text(out, sb_str(&x->note));
		fputc('\n', out);
	}
}

static cJSON *int_or_null(bool known, double v)
{
	if (!known)
		return cJSON_CreateNull();
	return json_new_int(clamp_bytes(v));
}

static cJSON *exact_or_null(bool known, int64_t v)
{
	return known ? json_new_int(v) : cJSON_CreateNull();
}

static cJSON *argv_json(const char *const *argv, size_t n)
{
	cJSON *arr = cJSON_CreateArray();
	for (size_t i = 0; i < n; i++)
		cJSON_AddItemToArray(arr, cJSON_CreateString(argv[i] ? argv[i] : ""));
	return arr;
}

static void print_json(FILE *out, const struct advice *a)
{
	const struct memmodel_obs *o = a->o;
	cJSON *root = cJSON_CreateObject();
	cJSON_AddStringToObject(root, "schema", ADVICE_SCHEMA);
	cJSON *dev = cJSON_AddObjectToObject(root, "device");
	cJSON_AddItemToObject(dev, "ordinal", exact_or_null(o->device->ordinal.known, o->device->ordinal.v));
	cJSON_AddItemToObject(dev, "capacity_bytes", json_new_int(a->capacity));
	cJSON *obs = cJSON_AddObjectToObject(root, "observed");
	cJSON_AddItemToObject(obs, "argv", argv_json(a->r->process.argv, a->r->process.argc));
	cJSON_AddItemToObject(obs, "batch", exact_or_null(o->batch.found, o->batch.value));
	cJSON_AddItemToObject(obs, "image_size", exact_or_null(o->image.found, o->image.value));
	cJSON_AddItemToObject(obs, "peak_bytes", json_new_int(o->peak));
	cJSON_AddItemToObject(obs, "need_lower_bound_bytes", exact_or_null(o->oom || o->observe, o->need));
	cJSON *mod = cJSON_AddObjectToObject(root, "model");
	cJSON_AddItemToObject(mod, "static_bytes", int_or_null(true, a->m.static_bytes));
	cJSON_AddItemToObject(mod, "per_sample_bytes", int_or_null(true, a->m.per_sample_bytes));
	cJSON_AddItemToObject(mod, "image_size", exact_or_null(a->m.image_ref > 0, a->m.image_ref));
	cJSON_AddStringToObject(mod, "basis", memmodel_basis_name(a->m.basis));
	cJSON *recs = cJSON_AddArrayToObject(root, "recommendations");
	for (size_t i = 0; i < a->n_recs; i++) {
		const struct rec *x = &a->recs[i];
		cJSON *r = cJSON_CreateObject();
		cJSON_AddStringToObject(r, "kind", x->kind);
		if (x->flag)
			cJSON_AddStringToObject(r, "flag", x->flag);
		else
			cJSON_AddNullToObject(r, "flag");
		cJSON_AddItemToObject(r, "value", exact_or_null(x->has_value, x->value));
		if (x->command)
			cJSON_AddItemToObject(r, "command", argv_json((const char *const *)x->command, x->command_n));
		else
			cJSON_AddNullToObject(r, "command");
		cJSON_AddItemToObject(r, "predicted_peak_bytes", int_or_null(x->has_predicted, x->predicted));
		if (x->fits == TRI_NULL)
			cJSON_AddNullToObject(r, "fits");
		else
			cJSON_AddBoolToObject(r, "fits", x->fits == TRI_TRUE);
		cJSON_AddStringToObject(r, "note", sb_str(&x->note));
		cJSON_AddItemToArray(recs, r);
	}
	json_print(out, root);
	cJSON_Delete(root);
}

static const char usage[] =
	"usage: vramwatch advise [--json] [--target SIZE] [--headroom PCT] REPORT...\n"
	"\n"
	"Concrete changes to the command line so the next run fits, with predicted peaks: the largest\n"
	"batch, the largest image size, the allocator setting, or more GPUs. Several reports of one\n"
	"job (other batch or image sizes) sharpen the memory model; all must be the same command\n"
	"apart from those values.\n"
	"\n"
	"  --json           print vramwatch.advice/1\n"
	"  --target SIZE    the card to fit (16GiB, 24GB, bytes); default: the report's emulated\n"
	"                   limit, else the card's total memory\n"
	"  --headroom PCT   share of the capacity kept free (default 10)\n"
	"  --help           this text\n"
	"\n"
	"Exit status: 0 advice printed; 2 bad usage, unreadable reports, or reports of different jobs.\n";

static bool parse_percent(const char *s, double *out)
{
	char *end = NULL;
	double v = strtod(s, &end);
	if (end == s || (*end && strcmp(end, "%") != 0) || !(v >= 0) || !(v < 100))
		return false;
	*out = v;
	return true;
}

int cmd_advise(int argc, char **argv)
{
	bool json = false, only_files = false;
	const char *target = NULL;
	double headroom = 10;
	char **paths = util_xcalloc((size_t)argc, sizeof *paths);
	size_t n = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (only_files || a[0] != '-' || !a[1]) {
			paths[n++] = argv[i];
		} else if (strcmp(a, "--") == 0) {
			only_files = true;
		} else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			free(paths);
			fputs(usage, stdout);
			return EXIT_DONE;
		} else if (strcmp(a, "--json") == 0) {
			json = true;
		} else if (strcmp(a, "--target") == 0 || strcmp(a, "--headroom") == 0) {
			if (i + 1 >= argc) {
				free(paths);
				util_err("advise: %s needs a value", a);
				return EXIT_USAGE;
			}
			const char *v = argv[++i];
			if (strcmp(a, "--target") == 0) {
				target = v;
			} else if (!parse_percent(v, &headroom)) {
				free(paths);
				util_err("advise: --headroom %s: expected a percentage from 0 to below 100", v);
				return EXIT_USAGE;
			}
		} else {
			free(paths);
			util_err("advise: unknown option %s (see vramwatch advise --help)", a);
			return EXIT_USAGE;
		}
	}
	uint64_t target_bytes = 0;
	const char *why = NULL;
	if (target && (!util_parse_size(target, &target_bytes, &why) || target_bytes == 0 || target_bytes > INT64_MAX)) {
		free(paths);
		util_err("advise: --target %s: %s", target, why ? why : "expected a size above 0");
		return EXIT_USAGE;
	}
	if (n == 0) {
		free(paths);
		util_err("advise: no report file given (usage: vramwatch advise [--json] [--target SIZE] [--headroom PCT] REPORT...)");
		return EXIT_USAGE;
	}
	struct model_report *reports = util_xcalloc(n, sizeof *reports);
	struct memmodel_obs *obs = util_xcalloc(n, sizeof *obs);
	int status = EXIT_DONE;
	size_t loaded = 0;
	for (size_t i = 0; i < n && status == EXIT_DONE; i++) {
		struct strbuf err = {0};
		if (!model_load(paths[i], &reports[i], &err)) {
			util_err("%s: %s", paths[i], sb_str(&err));
			status = EXIT_USAGE;
		} else {
			loaded++;
		}
		sb_free(&err);
	}
	struct advice a;
	memset(&a, 0, sizeof a);
	if (status == EXIT_DONE) {
		struct strbuf err = {0};
		if (!memmodel_observe(reports, n, obs, &err)) {
			util_err("advise: %s", sb_str(&err));
			status = EXIT_USAGE;
		}
		sb_free(&err);
	}
	if (status == EXIT_DONE) {
		a.r = &reports[0];
		a.o = &obs[0];
		a.headroom = headroom;
		const struct model_device *d = a.o->device;
		if (target) {
			a.capacity = (int64_t)target_bytes;
			a.capacity_from = "--target";
		} else if (d->limit_bytes.known && d->limit_bytes.v > 0) {
			a.capacity = d->limit_bytes.v;
			a.capacity_from = "the emulated limit";
		} else if (d->total_bytes.known && d->total_bytes.v > 0) {
			a.capacity = d->total_bytes.v;
			a.capacity_from = "the card's total";
		} else {
			util_err("advise: %s: the card's capacity is not known; give --target SIZE", reports[0].path);
			status = EXIT_USAGE;
		}
	}
	if (status == EXIT_DONE) {
		a.usable = (int64_t)floor((double)a.capacity * (1.0 - headroom / 100.0));
		memmodel_build(obs, n, &a.m);
		advise_batch_and_image(&a);
		advise_allocator(&a);
		if (json)
			print_json(stdout, &a);
		else
			print_text(stdout, &a);
	}
	for (size_t i = 0; i < a.n_recs; i++) {
		cmdline_free(a.recs[i].command, a.recs[i].command_n);
		sb_free(&a.recs[i].note);
	}
	for (size_t i = 0; i < loaded; i++)
		model_free(&reports[i]);
	free(obs);
	free(reports);
	free(paths);
	if (fflush(stdout) != 0 && status == EXIT_DONE) {
		util_err("advise: cannot write the output");
		status = EXIT_USAGE;
	}
	return status;
}
