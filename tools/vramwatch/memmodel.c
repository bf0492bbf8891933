/* memmodel.c: a line need = static + per_sample x batch x (image/reference)^2, from reports. */
#include "memmodel.h"

#include <math.h>
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

/* Device memory live at the first marker of a training phase (label "epoch..."), or -1. */
static int64_t level_before_training(const struct model_report *r)
{
	const cJSON *markers = cJSON_GetObjectItemCaseSensitive(r->root, "markers");
	if (!cJSON_IsArray(markers))
		return -1;
	const cJSON *m;
	cJSON_ArrayForEach(m, markers) {
		const cJSON *label = cJSON_GetObjectItemCaseSensitive(m, "label");
		if (!cJSON_IsString(label) || !label->valuestring || strncmp(label->valuestring, "epoch", 5) != 0)
			continue;
		int64_t live;
		if (json_int(cJSON_GetObjectItemCaseSensitive(m, "live_bytes"), &live) != JSON_INT_OK || live < 0)
			return -1;
		return live;
	}
	return -1;
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
		int64_t level = level_before_training(r);
		o->static_level = level >= 0 ? util_sat_add(level, o->untracked) : -1;
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
	if (o->observe && o->x > 0) {
		m->has_upper = true;
		m->upper_per_sample_bytes = ((double)o->upper - fixed) / o->x;
	}
	if (timeline) {
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
		/* failures bound the line from below */
		for (size_t i = 0; i < n; i++) {
			if (obs[i].exact || obs[i].x <= 0)
				continue;
			m->n_bounds++;
			if (m->static_bytes + m->per_sample_bytes * obs[i].x < (double)obs[i].need)
				m->per_sample_bytes = ((double)obs[i].need - m->static_bytes) / obs[i].x;
		}
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
	if (n)
		build_single(&obs[pick], m);
}
