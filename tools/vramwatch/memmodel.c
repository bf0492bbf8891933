/* memmodel.c: a line need = static + per_sample x batch x (image/reference)^2, from reports. */
#include "memmodel.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

const char *memmodel_basis_name(enum memmodel_basis b)
{
	switch (b) {
	case MEMMODEL_RUNS:
		return "runs";
	case MEMMODEL_TIMELINE:
		return "timeline";
	case MEMMODEL_BOUND:
		break;
	}
	return "bound";
}

/* The device the job peaked highest on: the one whose memory decides. */
static const struct model_device *main_device(const struct model_report *r)
{
	const struct model_device *best = NULL;
	for (size_t i = 0; i < r->n_devices; i++)
		if (!best || r->devices[i].peak_reserved_bytes > best->peak_reserved_bytes)
			best = &r->devices[i];
	return best;
}

static bool same_device(model_int a, const struct model_device *d)
{
	return !a.known || !d->ordinal.known || a.v == d->ordinal.v;
}

struct marker {
	int64_t time, live, phase_peak;
	const char *label;
};

/* The report's markers, oldest first; NULL (and 0) when it has none or they do not read. */
static struct marker *read_markers(const struct model_report *r, size_t *n)
{
	*n = 0;
	const cJSON *markers = cJSON_GetObjectItemCaseSensitive(r->root, "markers");
	int count = cJSON_IsArray(markers) ? cJSON_GetArraySize(markers) : 0;
	if (count <= 0)
		return NULL;
	struct marker *out = util_xcalloc((size_t)count, sizeof *out);
	const cJSON *m;
	cJSON_ArrayForEach(m, markers) {
		const cJSON *label = cJSON_GetObjectItemCaseSensitive(m, "label");
		struct marker *k = &out[*n];
		if (!cJSON_IsString(label) || !label->valuestring ||
		    json_int(cJSON_GetObjectItemCaseSensitive(m, "time_unix_ns"), &k->time) != JSON_INT_OK ||
		    json_int(cJSON_GetObjectItemCaseSensitive(m, "live_bytes"), &k->live) != JSON_INT_OK ||
		    json_int(cJSON_GetObjectItemCaseSensitive(m, "phase_peak_bytes"), &k->phase_peak) != JSON_INT_OK ||
		    k->live < 0 || k->phase_peak < 0)
			continue;
		k->label = label->valuestring;
		(*n)++;
	}
	return out;
}

/* The marker that opens training (the first whose label starts with "epoch"), or -1. Memory live
 * there is what the job holds before any batch: weights, optimizer state, EMA. */
static ptrdiff_t training_start(const struct marker *mk, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strncmp(mk[i].label, "epoch", 5) == 0)
			return (ptrdiff_t)i;
	return -1;
}

/* Whether two labels name the same phase of different epochs: equal once digits are ignored. */
static bool same_phase(const char *a, const char *b)
{
	for (;;) {
		while (*a >= '0' && *a <= '9')
			a++;
		while (*b >= '0' && *b <= '9')
			b++;
		if (*a != *b)
			return false;
		if (!*a)
			return true;
		a++;
		b++;
	}
}

/* Memory a repeated phase started with beyond what its first occurrence started with: cache of
 * other phases the allocator carried into it. Unseen on a big card, it is what fragments a small
 * one: the carried segments get split by the phase's own requests and can then no longer be
 * released when the card is full. */
static int64_t carried_cache(const struct marker *mk, size_t n, ptrdiff_t start, const char **phase_out)
{
	int64_t worst = 0;
	*phase_out = NULL;
	for (size_t i = (size_t)start + 1; i < n; i++)
		for (size_t j = (size_t)start; j < i; j++)
			if (same_phase(mk[i].label, mk[j].label)) {
				if (mk[i].live - mk[j].live > worst) {
					worst = mk[i].live - mk[j].live;
					*phase_out = mk[i].label;
				}
				break;
			}
	return worst;
}

/* What the phases between markers say of the need above the static level, from the start of
 * training on. A caching allocator keeps what a phase freed, so the next phase's peak holds the
 * previous one's cache, which a full card would have made it release: each phase is measured by
 * what it added to the level it started from, and the first training phase, which starts from
 * the static level itself, is measured whole. The largest is the working set; a failure adds the
 * bound of its phase (the level at the failure plus what it asked for). Returns -1 when the
 * markers do not allow it. *phase_out names the phase that decided. */
bool memmodel_is_validation(const char *label)
{
	return label && (strstr(label, "val") || strstr(label, "eval") || strstr(label, "test"));
}

static int64_t phase_working_set(const struct model_report *r, const struct marker *mk, size_t n, ptrdiff_t start,
                                 const struct model_failure *f, const char **phase_out, bool *completed,
                                 int64_t *training_best)
{
	int64_t static_live = mk[start].live, best = -1;
	*phase_out = NULL;
	*completed = false;
	*training_best = -1;
	for (size_t i = (size_t)start + 1; i < n; i++) {
		int64_t added = mk[i].phase_peak - mk[i - 1].live;
		*completed = true;
		if (!memmodel_is_validation(mk[i - 1].label) && added > *training_best)
			*training_best = added;
		if (added > best) {
			best = added;
			*phase_out = mk[i - 1].label;
		}
	}
	/* the phase after the last marker: its peak is known when the device peaked in it */
	const struct marker *last = &mk[n - 1];
	int64_t tail_peak = -1;
	for (size_t d = 0; d < r->n_devices; d++) {
		const struct model_device *dev = &r->devices[d];
		if (dev->peak_time_unix_ns.known && dev->peak_time_unix_ns.v >= last->time && dev->peak_live_bytes > tail_peak)
			tail_peak = dev->peak_live_bytes;
	}
	if (tail_peak >= 0 && f == NULL && (ptrdiff_t)n - 1 >= start && tail_peak - last->live > best) {
		*completed = true;
		best = tail_peak - last->live;
		*phase_out = last->label;
	}
	if (f && f->time_unix_ns >= mk[start].time) {
		int64_t bound = util_sat_add(f->reserved_bytes_at_failure, f->size > 0 ? f->size : 0) - static_live;
		if (bound > best) {
			best = bound;
			*phase_out = NULL;
			for (size_t i = (size_t)start; i < n && mk[i].time <= f->time_unix_ns; i++)
				*phase_out = mk[i].label;
		}
	}
	return best;
}

static double scale_of(int64_t image, int64_t ref)
{
	if (ref <= 0 || image <= 0)
		return 1.0;
	double s = (double)image / (double)ref;
	return s * s;
}

bool memmodel_observe(const struct model_report *reports, size_t n, struct memmodel_obs *obs, struct strbuf *err)
{
	for (size_t i = 0; i < n; i++) {
		const struct model_report *r = &reports[i];
		struct memmodel_obs *o = &obs[i];
		memset(o, 0, sizeof *o);
		o->training_need = -1;
		o->report = r;
		o->device = main_device(r);
		if (!o->device) {
			sb_printf(err, "%s: the report holds no device", r->path);
			return false;
		}
		const char *const *argv = r->process.argv;
		size_t argc = r->process.argc;
		if (i > 0 && !cmdline_same_job(reports[0].process.argv, reports[0].process.argc, argv, argc)) {
			sb_printf(err, "%s and %s are not the same job (their command lines differ beyond the batch and image size)",
			          reports[0].path, r->path);
			return false;
		}
		cmdline_find(argv, argc, CMDLINE_BATCH, &o->batch);
		cmdline_find(argv, argc, CMDLINE_IMAGE, &o->image);
		const struct model_device *d = o->device;
		o->untracked = d->untracked_bytes.known && d->untracked_bytes.v > 0 ? d->untracked_bytes.v : 0;
		/* Other processes' memory is in the driver's used memory, so in the untracked part; it
		 * is not the job's need, and the advice counts it against the card instead. */
		for (size_t k = 0; k < d->n_procs; k++)
			if (d->procs[k].used_bytes.known)
				o->others = util_sat_add(o->others, d->procs[k].used_bytes.v);
		o->untracked = o->untracked > o->others ? o->untracked - o->others : 0;
		o->peak = util_sat_add(d->peak_reserved_bytes, o->untracked);
		o->need = o->peak;
		o->upper = o->peak;
		o->exact = true;
		const struct model_failure *f = model_real_oom(r);
		const struct model_crossing *c = NULL;
		for (size_t k = 0; k < r->n_crossings && !c; k++)
			if (!d->ordinal.known || r->crossings[k].device == d->ordinal.v)
				c = &r->crossings[k];
		if (f && same_device(f->device, d)) {
			/* it needed at least what it held plus what it asked for */
			o->oom = true;
			o->exact = false;
			o->need = util_sat_add(util_sat_add(f->reserved_bytes_at_failure, f->size > 0 ? f->size : 0), o->untracked);
			if (o->need < o->peak)
				o->need = o->peak;
		} else if (c) {
			/* Observe mode: nothing had to give way, so a caching allocator kept everything it
			 * ever cached and the peak overstates what the job needs on the smaller card. The
			 * level at the first crossing is what it had reached when the card would have been
			 * full: a lower bound, and the estimate; the uncapped peak is the most it can need. */
			o->observe = true;
			o->exact = false;
			o->need = util_sat_add(c->live_bytes_at_crossing > 0 ? c->live_bytes_at_crossing : 0, o->untracked);
			if (o->need > o->peak)
				o->need = o->peak;
		}
		size_t nmk = 0;
		struct marker *mk = read_markers(r, &nmk);
		ptrdiff_t start = training_start(mk, nmk);
		o->static_level = start >= 0 ? util_sat_add(mk[start].live, o->untracked) : -1;
		if (start >= 0) {
			const struct model_failure *ff = o->oom ? f : NULL;
			bool completed = false;
			int64_t training = -1;
			int64_t ws = phase_working_set(r, mk, nmk, start, ff, &o->phase, &completed, &training);
			o->training_need = training > 0 ? util_sat_add(o->static_level, training) : -1;
			o->carried = carried_cache(mk, nmk, start, &o->carried_phase);
			if (ws > 0) {
				o->phases = true;
				o->phase_complete = completed;
				o->need = util_sat_add(o->static_level, ws);
				if (o->observe) {
					/* every phase ran to its end: the working set is measured, not bounded */
					o->exact = true;
				}
			}
		}
		free(mk);
	}
	int64_t ref = obs[0].image.found ? obs[0].image.value : 0;
	for (size_t i = 0; i < n; i++) {
		double b = obs[i].batch.found ? (double)obs[i].batch.value : 1.0;
		obs[i].x = b * scale_of(obs[i].image.found ? obs[i].image.value : 0, ref);
	}
	return true;
}

double memmodel_predict(const struct memmodel *m, int64_t batch, int64_t image)
{
	double x = (double)batch * scale_of(image, m->image_ref);
	return m->static_bytes + m->per_sample_bytes * x;
}

double memmodel_predict_upper(const struct memmodel *m, int64_t batch, int64_t image)
{
	if (!m->has_upper)
		return memmodel_predict(m, batch, image);
	double x = (double)batch * scale_of(image, m->image_ref);
	return m->static_bytes + m->upper_per_sample_bytes * x;
}

/* One report: the level before training (markers) as the fixed part, else only the untracked. */
static void build_single(const struct memmodel_obs *o, struct memmodel *m)
{
	double need = (double)o->need;
	bool timeline = o->static_level >= 0 && (double)o->static_level < need;
	double fixed = timeline ? (double)o->static_level : (double)o->untracked;
	if (fixed >= need)
		fixed = 0;
	m->static_bytes = fixed;
	m->per_sample_bytes = o->x > 0 ? (need - fixed) / o->x : 0;
	m->n_points = o->exact ? 1 : 0;
	m->n_bounds = o->exact ? 0 : 1;
	if (o->observe && !o->exact && o->x > 0) {
		m->has_upper = true;
		m->upper_per_sample_bytes = ((double)o->upper - fixed) / o->x;
	}
	if (o->oom && !(o->phases && o->phase_complete)) {
		/* a failure before any phase of training ended: only a bound */
		m->basis = MEMMODEL_BOUND;
		m->lower_bound = true;
	} else if (timeline) {
		m->basis = MEMMODEL_TIMELINE;
		m->lower_bound = !o->exact;
	} else if (o->exact || o->observe) {
		/* a single run without markers: everything taken as growing with the batch */
		m->basis = MEMMODEL_RUNS;
		m->lower_bound = o->observe;
	} else {
		m->basis = MEMMODEL_BOUND;
		m->lower_bound = true;
	}
	m->spread = 0.05 * need;
}

/* Failures bound the line from below: where it passes under one, its slope is raised to meet it. */
static void raise_to_bounds(const struct memmodel_obs *obs, size_t n, struct memmodel *m)
{
	for (size_t i = 0; i < n; i++) {
		if (obs[i].exact || obs[i].x <= 0)
			continue;
		m->n_bounds++;
		if (m->static_bytes + m->per_sample_bytes * obs[i].x < (double)obs[i].need)
			m->per_sample_bytes = ((double)obs[i].need - m->static_bytes) / obs[i].x;
	}
}

void memmodel_build(const struct memmodel_obs *obs, size_t n, struct memmodel *m)
{
	memset(m, 0, sizeof *m);
	m->image_ref = n && obs[0].image.found ? obs[0].image.value : 0;
	/* least squares over the measured points */
	double sx = 0, sy = 0, sxx = 0, sxy = 0;
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		if (!obs[i].exact)
			continue;
		double x = obs[i].x, y = (double)obs[i].need;
		sx += x;
		sy += y;
		sxx += x * x;
		sxy += x * y;
		k++;
	}
	double var = k ? sxx - sx * sx / (double)k : 0;
	double slope = var > 1e-9 ? (sxy - sx * sy / (double)k) / var : 0;
	if (k >= 2 && var > 1e-9 && slope > 0) {
		m->basis = MEMMODEL_RUNS;
		m->per_sample_bytes = slope;
		m->static_bytes = (sy - slope * sx) / (double)k;
		if (m->static_bytes < 0)
			m->static_bytes = 0;
		m->n_points = k;
		double rss = 0, mean = sy / (double)k;
		for (size_t i = 0; i < n; i++) {
			if (!obs[i].exact)
				continue;
			double e = (double)obs[i].need - (m->static_bytes + slope * obs[i].x);
			rss += e * e;
		}
		m->spread = k > 2 ? sqrt(rss / (double)(k - 2)) : 0;
		if (m->spread < 0.05 * mean)
			m->spread = 0.05 * mean;
		raise_to_bounds(obs, n, m);
		return;
	}
	/* One measured run and the static level from the markers of any report: the line through
	 * both, raised to the failures. */
	int64_t fixed = -1;
	for (size_t i = 0; i < n; i++)
		if (obs[i].static_level >= 0 && (fixed < 0 || obs[i].static_level < fixed))
			fixed = obs[i].static_level;
	if (n >= 2 && k == 1 && fixed >= 0 && sx > 0 && sy > (double)fixed) {
		m->basis = MEMMODEL_RUNS;
		m->static_bytes = (double)fixed;
		m->per_sample_bytes = (sy - (double)fixed) / sx;
		m->n_points = 1;
		m->spread = 0.05 * sy;
		raise_to_bounds(obs, n, m);
		return;
	}
	/* one usable report: prefer a measured one with markers, then any with markers, then a
	 * measured one, then the first */
	size_t pick = 0;
	int best = -1;
	for (size_t i = 0; i < n; i++) {
		int score = (obs[i].static_level >= 0 ? 2 : 0) + (obs[i].exact || obs[i].observe ? 1 : 0);
		if (score > best) {
			best = score;
			pick = i;
		}
	}
	if (!n)
		return;
	build_single(&obs[pick], m);
	if (n > 1) {
		m->n_bounds = 0;
		raise_to_bounds(obs, n, m);
	}
}
