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
    "--batch",
    "--batch-size",
    "--batch_size",
    "--per_device_train_batch_size",
    "--per-device-train-batch-size", /* HfArgumentParser adds a dashed alias of every option */
    "--bs",
    "-b",
    "batch",
};
static const char *const image_names[] = {
    "--img", "--imgsz", "--img-size", "--img_size", "--image-size", "--image_size", "imgsz",
};
static const char *const accum_names[] = {
    "--gradient_accumulation_steps",
    "--gradient-accumulation-steps",
    "--accumulation_steps",
    "--accumulation-steps",
    "--accumulate_grad_batches",
    "--accumulate-grad-batches",
    "--accumulate",
    "--grad-accum",
    "--grad_accum", /* common in plain PyTorch scripts */
};
static const char *const eval_batch_names[] = {
    "--per_device_eval_batch_size",
    "--per-device-eval-batch-size",
};
static const char *const nbs_names[] = { "nbs" };
/* Ultralytics reads only the keys of its cfg/default.yaml, as key=value. */
static const char *const ultra_batch[] = { "batch" };
static const char *const ultra_image[] = { "imgsz" };
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

/* ---- launchers ---- */

/* The launchers' options that take no value (store_true); every other option of theirs takes one
 * (as "--opt V" or "--opt=V"), so the script is the first argument that is neither. From
 * torch/distributed/run.py get_args_parser (plus launch.py's --use-env), deepspeed/launcher/
 * runner.py parse_args and accelerate/commands/launch.py launch_command_parser. */
static const char *const torchrun_switches[] = {
    "--standalone", "-m",         "--module",  "--no-python", "--no_python",
    "--run-path",   "--run_path", "--use-env", "--use_env",
};
static const char *const deepspeed_switches[] = {
    "--module",   "--no_python",        "--no_local_rank",      "--no_ssh_check", "--force_multi",
    "--save_pid", "--elastic_training", "--bind_cores_to_rank", "--no_ssh",
};
/* accelerate accepts each of its options with dashes for underscores too: compared after
 * folding '-' to '_' */
static const char *const accelerate_switches[] = {
    "--cpu",
    "--multi_gpu",
    "--tpu",
    "--ipex",
    "--use_xpu",
    "--use_deepspeed",
    "--use_fsdp",
    "--use_megatron_lm",
    "-q",
    "--quiet",
    "-m",
    "--module",
    "--no_python",
    "--same_network",
    "--debug",
    "--enable_cpu_affinity",
    "--dynamo_use_fullgraph",
    "--dynamo_use_dynamic",
    "--downcast_bf16",
    "--tpu_use_cluster",
    "--tpu_use_sudo",
};

/* Compares two option names with '-' and '_' taken as one letter past the leading dashes. */
static bool same_option(const char *a, size_t la, const char *b)
{
    size_t lb = strlen(b);
    if (la != lb)
        return false;
    size_t i = 0;
    while (i < la && a[i] == '-' && b[i] == '-')
        i++;
    for (; i < la; i++) {
        char x = a[i] == '-' ? '_' : a[i], y = b[i] == '-' ? '_' : b[i];
        if (x != y)
            return false;
    }
    return true;
}

static bool in_list(const char *a, size_t la, const char *const *list, size_t n, bool fold)
{
    for (size_t k = 0; k < n; k++)
        if (fold ? same_option(a, la, list[k])
                 : strlen(list[k]) == la && strncmp(a, list[k], la) == 0)
            return true;
    return false;
}

static enum cmdline_launcher launcher_of(const char *base)
{
    if (strcmp(base, "torchrun") == 0)
        return CMDLINE_LAUNCH_TORCHRUN;
    if (strcmp(base, "deepspeed") == 0)
        return CMDLINE_LAUNCH_DEEPSPEED;
    if (strcmp(base, "accelerate") == 0)
        return CMDLINE_LAUNCH_ACCELERATE;
    return CMDLINE_LAUNCH_NONE;
}

static enum cmdline_launcher launcher_module(const char *mod)
{
    if (strcmp(mod, "torch.distributed.run") == 0)
        return CMDLINE_LAUNCH_TORCHRUN;
    if (strcmp(mod, "torch.distributed.launch") == 0)
        return CMDLINE_LAUNCH_TORCH_LAUNCH;
    if (strcmp(mod, "deepspeed.launcher.runner") == 0)
        return CMDLINE_LAUNCH_DEEPSPEED;
    if (strcmp(mod, "accelerate.commands.launch") == 0)
        return CMDLINE_LAUNCH_ACCELERATE;
    return CMDLINE_LAUNCH_NONE;
}

const char *cmdline_launcher_name(enum cmdline_launcher l)
{
    switch (l) {
    case CMDLINE_LAUNCH_TORCHRUN:
        return "torchrun";
    case CMDLINE_LAUNCH_TORCH_LAUNCH:
        return "torch.distributed.launch";
    case CMDLINE_LAUNCH_DEEPSPEED:
        return "deepspeed";
    case CMDLINE_LAUNCH_ACCELERATE:
        return "accelerate";
    case CMDLINE_LAUNCH_NONE:
        break;
    }
    return "";
}

/* A count that may be written "1:4" (torchrun's elastic range): only a plain number is known. */
static int64_t count_or_zero(const char *v)
{
    int64_t n;
    return v && parse_count(v, &n) ? n : 0;
}

/* Walks the launcher's options from j->launcher_opts to its script. */
static void parse_launcher(const char *const *argv, size_t argc, struct cmdline_job *j)
{
    const char *const *sw;
    size_t n_sw;
    bool fold = j->launcher == CMDLINE_LAUNCH_ACCELERATE;
    if (j->launcher == CMDLINE_LAUNCH_DEEPSPEED) {
        sw = deepspeed_switches;
        n_sw = N_NAMES(deepspeed_switches);
    } else if (fold) {
        sw = accelerate_switches;
        n_sw = N_NAMES(accelerate_switches);
    } else {
        sw = torchrun_switches;
        n_sw = N_NAMES(torchrun_switches);
    }
    size_t i = j->launcher_opts;
    while (i < argc) {
        const char *a = argv[i] ? argv[i] : "";
        if (a[0] != '-' || !a[1])
            break;
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        const char *eq = strchr(a, '=');
        size_t len = eq ? (size_t)(eq - a) : strlen(a);
        const char *value = NULL;
        size_t value_at = i;
        if (eq) {
            value = eq + 1;
            i++;
        } else if (in_list(a, len, sw, n_sw, fold)) {
            if (strcmp(a, "-m") == 0 || same_option(a, len, "--module"))
                j->module = true;
            i++;
            continue;
        } else {
            value = i + 1 < argc ? argv[i + 1] : NULL;
            value_at = i + 1;
            i += 2;
        }
        bool nproc = j->launcher == CMDLINE_LAUNCH_DEEPSPEED
                             ? same_option(a, len, "--num_gpus") ||
                                       same_option(a, len, "--num_accelerators")
                     : fold ? same_option(a, len, "--num_processes")
                            : same_option(a, len, "--nproc_per_node");
        bool nnodes = j->launcher == CMDLINE_LAUNCH_DEEPSPEED ? same_option(a, len, "--num_nodes")
                      : fold ? same_option(a, len, "--num_machines")
                             : same_option(a, len, "--nnodes");
        if (nproc && value_at < argc) {
            j->nproc_given = true;
            j->nproc_index = value_at;
            j->nproc_attached = eq != NULL;
            j->nproc = count_or_zero(value);
        } else if (nnodes) {
            j->nnodes = count_or_zero(value);
        }
    }
    j->script = i < argc ? i : argc;
    j->args = i < argc ? i + 1 : argc;
    if (j->launcher == CMDLINE_LAUNCH_ACCELERATE)
        j->world_size = j->nproc_given ? j->nproc : 0; /* accelerate's count is of all machines */
    else if (j->launcher == CMDLINE_LAUNCH_DEEPSPEED)
        j->world_size = j->nproc_given ? j->nproc * j->nnodes : 0; /* else every visible GPU */
    else
        j->world_size = (j->nproc_given ? j->nproc : 1) * j->nnodes; /* torchrun's default is 1 */
}

void cmdline_job_parse(const char *const *argv, size_t argc, struct cmdline_job *j)
{
    memset(j, 0, sizeof *j);
    j->launcher_at = j->launcher_opts = j->script = j->args = j->nproc_index = argc;
    j->nnodes = 1;
    j->world_size = 1;
    if (argc == 0 || !argv[0])
        return;
    size_t i = 0;
    if (is_python(argv[0])) {
        i = 1;
        while (i < argc && argv[i] && argv[i][0] == '-' && argv[i][1]) {
            const char *o = argv[i];
            if (strcmp(o, "-m") == 0 && i + 1 < argc && argv[i + 1]) {
                enum cmdline_launcher l = launcher_module(argv[i + 1]);
                if (l != CMDLINE_LAUNCH_NONE) {
                    j->launcher = l;
                    j->launcher_at = i;
                    j->launcher_opts = i + 2;
                    parse_launcher(argv, argc, j);
                    return;
                }
                j->module = true;
                j->script = i + 1;
                j->args = i + 2;
                return;
            }
            if (strcmp(o, "-m") == 0 || strcmp(o, "-c") == 0) {
                /* code, then its arguments */
                j->script = i + 1 < argc ? i + 1 : argc;
                j->args = i + 2 <= argc ? i + 2 : argc;
                return;
            }
            if (strcmp(o, "-W") == 0 || strcmp(o, "-X") == 0 ||
                strcmp(o, "--check-hash-based-pycs") == 0)
                i++; /* takes a value */
            i++;
        }
        if (i >= argc)
            return;
    }
    const char *base = util_basename(argv[i] ? argv[i] : "");
    enum cmdline_launcher l = launcher_of(base);
    /* accelerate is a launcher only as "accelerate launch"; its other commands run nothing */
    if (l == CMDLINE_LAUNCH_ACCELERATE &&
        !(i + 1 < argc && argv[i + 1] && strcmp(argv[i + 1], "launch") == 0))
        l = CMDLINE_LAUNCH_NONE;
    if (l == CMDLINE_LAUNCH_NONE) {
        j->script = i;
        j->args = i + 1;
        return;
    }
    j->launcher = l;
    j->launcher_at = i;
    j->launcher_opts = l == CMDLINE_LAUNCH_ACCELERATE ? i + 2 : i + 1;
    parse_launcher(argv, argc, j);
}

int64_t cmdline_world_size(const char *const *argv, size_t argc)
{
    struct cmdline_job j;
    cmdline_job_parse(argv, argc, &j);
    return j.world_size;
}

static bool is_ultralytics_script(const char *const *argv, size_t argc, const struct cmdline_job *j)
{
    if (j->script >= argc || j->module || !argv[j->script])
        return false;
    const char *base = util_basename(argv[j->script]);
    /* the yolo and ultralytics entry points; an installed one run as "python3 /usr/local/bin/yolo" */
    return strcmp(base, "yolo") == 0 || strcmp(base, "ultralytics") == 0;
}

/* Reads the value of a batch flag: a count, or AutoBatch's -1 (YOLO and Ultralytics) or
 * fraction 0 < f < 1 (Ultralytics). */
static void read_value(const char *v, enum cmdline_kind kind, enum cmdline_family fam,
                       struct cmdline_flag *out)
{
    int64_t n;
    if (v && parse_count(v, &n)) {
        out->found = true;
        out->value = n;
        return;
    }
    if (!v || kind != CMDLINE_BATCH || (fam != CMDLINE_YOLO && fam != CMDLINE_ULTRALYTICS))
        return;
    if (strcmp(v, "-1") == 0) {
        out->autobatch = true;
        return;
    }
    char *end = NULL;
    errno = 0;
    double f = strtod(v, &end);
    if (fam == CMDLINE_ULTRALYTICS && !errno && end != v && !*end && f > 0 && f < 1) {
        out->autobatch = true;
        out->fraction = f;
    }
}

static enum cmdline_family family_of(const char *const *argv, size_t argc,
                                     const struct cmdline_job *j);

static void find_in(const char *const *argv, size_t argc, enum cmdline_kind kind,
                    enum cmdline_family fam, size_t start, struct cmdline_flag *out)
{
    memset(out, 0, sizeof *out);
    const char *const *names;
    size_t n_names;
    bool ultra = fam == CMDLINE_ULTRALYTICS;
    switch (kind) {
    case CMDLINE_BATCH:
        names = ultra ? ultra_batch : batch_names;
        n_names = ultra ? N_NAMES(ultra_batch) : N_NAMES(batch_names);
        break;
    case CMDLINE_IMAGE:
        names = ultra ? ultra_image : image_names;
        n_names = ultra ? N_NAMES(ultra_image) : N_NAMES(image_names);
        break;
    case CMDLINE_ACCUM:
        names = accum_names;
        n_names = ultra ? 0 : N_NAMES(accum_names);
        break;
    case CMDLINE_EVAL_BATCH:
        names = eval_batch_names;
        n_names = ultra ? 0 : N_NAMES(eval_batch_names);
        break;
    case CMDLINE_NBS:
    default:
        names = nbs_names;
        n_names = N_NAMES(nbs_names);
        break;
    }
    for (size_t i = start; i < argc; i++) {
        const char *a = argv[i];
        if (!a)
            continue;
        if (strcmp(a, "--") == 0)
            break;
        /* Ultralytics strips the leading "--" of "--batch=16" (cfg/__init__.py entrypoint) */
        const char *key = ultra && strncmp(a, "--", 2) == 0 ? a + 2 : a;
        for (size_t k = 0; k < n_names; k++) {
            const char *name = names[k];
            size_t len = strlen(name);
            bool dashed = name[0] == '-';
            if (dashed && strcmp(a, name) == 0 && i + 1 < argc) {
                /* "--batch 64"; a non-number after it leaves it not found */
                memset(out, 0, sizeof *out);
                read_value(argv[i + 1], kind, fam, out);
                out->form = CMDLINE_SEPARATE;
                out->index = i + 1;
                snprintf(out->name, sizeof out->name, "%s", name);
            } else if (strncmp(key, name, len) == 0 && key[len] == '=') {
                memset(out, 0, sizeof *out);
                read_value(key + len + 1, kind, fam, out);
                out->form = CMDLINE_ATTACHED;
                out->index = i;
                snprintf(out->name, sizeof out->name, "%.*s=", (int)(key - a + len), a);
            }
        }
    }
    if (!out->found && !out->autobatch)
        memset(out, 0, sizeof *out);
}

void cmdline_find(const char *const *argv, size_t argc, enum cmdline_kind kind,
                  struct cmdline_flag *out)
{
    struct cmdline_job j;
    cmdline_job_parse(argv, argc, &j);
    find_in(argv, argc, kind, family_of(argv, argc, &j), j.args, out);
}

/* A flag an edit rewrites in place: one with a value, or AutoBatch's, which gets a number. */
static bool in_place(const struct cmdline_flag *f)
{
    return f && (f->found || f->autobatch);
}

char **cmdline_with_edits(const char *const *argv, size_t argc, const struct cmdline_edit *edits,
                          size_t n, size_t *out_n)
{
    size_t extra = 0;
    for (size_t k = 0; k < n; k++)
        extra += in_place(edits[k].flag) ? 0 : edits[k].flag ? 2 : 1;
    char **copy = util_xcalloc(argc + extra + 1, sizeof *copy);
    for (size_t i = 0; i < argc; i++) {
        const struct cmdline_flag *f = NULL;
        int64_t value = 0;
        for (size_t k = 0; k < n; k++)
            if (in_place(edits[k].flag) && edits[k].flag->index == i) {
                f = edits[k].flag;
                value = edits[k].value;
            }
        if (f) {
            struct strbuf b = { 0 };
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
        if (in_place(edits[k].flag))
            continue;
        size_t len = strlen(edits[k].name);
        if (edits[k].flag && len && edits[k].name[len - 1] == '=') {
            /* "batch=": Ultralytics takes key and value as one argument, never "batch 8" */
            struct strbuf b = { 0 };
            sb_printf(&b, "%s%lld", edits[k].name, (long long)edits[k].value);
            copy[at++] = util_xstrdup(sb_str(&b));
            sb_free(&b);
            continue;
        }
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

/* Hugging Face's string_to_bool (hf_argparser.py): yes/no, true/false, t/f, y/n, 1/0, any case. */
static bool truthy(const char *v, bool *on)
{
    static const char *const yes[] = { "true", "yes", "t", "y", "1" };
    static const char *const no[] = { "false", "no", "f", "n", "0" };
    for (size_t k = 0; k < N_NAMES(yes); k++) {
        if (strcasecmp(v, yes[k]) == 0) {
            *on = true;
            return true;
        }
        if (strcasecmp(v, no[k]) == 0) {
            *on = false;
            return true;
        }
    }
    return false;
}

/* Ultralytics' smart_value: true/false/none in any case, else a Python literal; a number is on
 * when it is not zero. */
static bool ultra_truthy(const char *v, bool *on)
{
    if (strcasecmp(v, "true") == 0 || strcasecmp(v, "false") == 0 || strcasecmp(v, "none") == 0) {
        *on = strcasecmp(v, "true") == 0;
        return true;
    }
    char *end = NULL;
    errno = 0;
    double d = strtod(v, &end);
    if (errno || end == v || *end)
        return false;
    *on = d != 0;
    return true;
}

static int switch_in(const char *const *argv, size_t argc, const char *name,
                     enum cmdline_family fam, size_t start)
{
    int state = -1;
    bool ultra = fam == CMDLINE_ULTRALYTICS;
    if (ultra)
        while (*name == '-')
            name++;
    for (size_t i = start; i < argc; i++) {
        const char *a = argv[i] ? argv[i] : "";
        if (strcmp(a, "--") == 0)
            break;
        if (ultra && strncmp(a, "--", 2) == 0)
            a += 2;
        const char *eq = strchr(a, '=');
        size_t len = eq ? (size_t)(eq - a) : strlen(a);
        if (!same_option(a, len, name))
            continue;
        bool v;
        if (eq) {
            if (ultra ? ultra_truthy(eq + 1, &v) : truthy(eq + 1, &v))
                state = v;
        } else if (!ultra && i + 1 < argc && argv[i + 1] && truthy(argv[i + 1], &v)) {
            /* HfArgumentParser's booleans take an optional value (nargs="?", const=True) */
            state = v;
            i++;
        } else {
            state = 1;
        }
    }
    return state;
}

int cmdline_switch_state(const char *const *argv, size_t argc, const char *name)
{
    struct cmdline_job j;
    cmdline_job_parse(argv, argc, &j);
    return switch_in(argv, argc, name, family_of(argv, argc, &j), j.args);
}

bool cmdline_switch_on(const char *const *argv, size_t argc, const char *name)
{
    return cmdline_switch_state(argv, argc, name) == 1;
}

static bool yolo_script(const char *const *argv, size_t argc, const struct cmdline_job *j);

static enum cmdline_family family_of(const char *const *argv, size_t argc,
                                     const struct cmdline_job *j)
{
    if (yolo_script(argv, argc, j))
        return CMDLINE_YOLO;
    if (is_ultralytics_script(argv, argc, j))
        return CMDLINE_ULTRALYTICS;
    struct cmdline_flag f;
    find_in(argv, argc, CMDLINE_BATCH, CMDLINE_GENERIC, j->args, &f);
    if (f.found && (strcmp(f.name, "--per_device_train_batch_size") == 0 ||
                    strcmp(f.name, "--per-device-train-batch-size") == 0))
        return CMDLINE_HF;
    find_in(argv, argc, CMDLINE_EVAL_BATCH, CMDLINE_GENERIC, j->args, &f);
    if (f.found)
        return CMDLINE_HF;
    /* a bare batch= is Ultralytics' spelling, whatever runs it */
    find_in(argv, argc, CMDLINE_BATCH, CMDLINE_ULTRALYTICS, j->args, &f);
    if ((f.found || f.autobatch) && f.name[0] != '-')
        return CMDLINE_ULTRALYTICS;
    return CMDLINE_GENERIC;
}

enum cmdline_family cmdline_family(const char *const *argv, size_t argc)
{
    struct cmdline_job j;
    cmdline_job_parse(argv, argc, &j);
    return family_of(argv, argc, &j);
}

char **cmdline_with_value(const char *const *argv, size_t argc, const struct cmdline_flag *f,
                          int64_t value)
{
    /* a flag that is not there is left out, never appended: the copy is then argv as it was */
    struct cmdline_edit e = { f, NULL, value };
    size_t n;
    return cmdline_with_edits(argv, argc, &e, in_place(f) ? 1 : 0, &n);
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
    has[0] = in_place(&f); /* a run at --batch -1 and one at --batch 16 are the same job */
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

static bool yolo_script(const char *const *argv, size_t argc, const struct cmdline_job *j)
{
    if (j->script >= argc || j->module)
        return false;
    const char *script = argv[j->script] ? argv[j->script] : "";
    const char *base = util_basename(script);
    if (strcmp(base, "train_dual.py") == 0 || strcmp(base, "train_triple.py") == 0 ||
        strcmp(base, "train_aux.py") == 0)
        return true;
    /* train.py of a yolov5/v7/v9 checkout, or given a yolov5/7/9 model */
    if (strcmp(base, "train.py") != 0)
        return false;
    for (size_t i = 0; i < argc; i++) {
        const char *x = argv[i] ? argv[i] : "";
        if (contains_nocase(x, "yolov5") || contains_nocase(x, "yolov7") ||
            contains_nocase(x, "yolov9") || contains_nocase(x, "yolor") ||
            contains_nocase(x, "gelan"))
            return true;
    }
    return false;
}

bool cmdline_is_yolo_accumulating(const char *const *argv, size_t argc)
{
    struct cmdline_job j;
    cmdline_job_parse(argv, argc, &j);
    return yolo_script(argv, argc, &j);
}

static void push(char **c, size_t *k, const char *s)
{
    c[(*k)++] = util_xstrdup(s ? s : "");
}

char **cmdline_with_launcher(const char *const *argv, size_t argc, int64_t nproc, size_t *out_n)
{
    *out_n = 0;
    struct cmdline_job j;
    cmdline_job_parse(argv, argc, &j);
    char n[24];
    snprintf(n, sizeof n, "%lld", (long long)nproc);
    char **c = util_xcalloc(argc + 6, sizeof *c);
    size_t k = 0;
    if (j.launcher != CMDLINE_LAUNCH_NONE) {
        const char *name = j.launcher == CMDLINE_LAUNCH_DEEPSPEED    ? "--num_gpus"
                           : j.launcher == CMDLINE_LAUNCH_ACCELERATE ? "--num_processes"
                                                                     : "--nproc_per_node";
        for (size_t i = 0; i < argc; i++) {
            if (!j.nproc_given && i == j.launcher_opts) {
                push(c, &k, name);
                push(c, &k, n);
            }
            if (j.nproc_given && i == j.nproc_index) {
                struct strbuf b = { 0 };
                if (j.nproc_attached)
                    sb_printf(&b, "%.*s=", (int)(strchr(argv[i], '=') - argv[i]), argv[i]);
                sb_add(&b, n);
                push(c, &k, sb_str(&b));
                sb_free(&b);
            } else {
                push(c, &k, argv[i]);
            }
        }
        if (!j.nproc_given && j.launcher_opts >= argc) {
            push(c, &k, name);
            push(c, &k, n);
        }
        *out_n = k;
        return c;
    }
    /* a plain Python script or module: torchrun goes after the interpreter's own options, which
     * torchrun would refuse as its own ("-u" is python's) */
    bool code = j.script < argc && j.script > 0 && argv[j.script - 1] &&
                strcmp(argv[j.script - 1], "-c") == 0;
    if (argc == 0 || !is_python(argv[0]) || j.script >= argc || code) {
        free(c);
        return NULL;
    }
    size_t interp_end = j.module ? j.script - 1 : j.script; /* without python's own -m */
    for (size_t i = 0; i < interp_end; i++)
        push(c, &k, argv[i]);
    push(c, &k, "-m");
    push(c, &k, "torch.distributed.run");
    push(c, &k, "--nproc_per_node");
    push(c, &k, n);
    if (j.module)
        push(c, &k, "-m"); /* torchrun's own --module switch: the script is a module */
    for (size_t i = j.script; i < argc; i++)
        push(c, &k, argv[i]);
    *out_n = k;
    return c;
}

enum cmdline_batch_scope cmdline_batch_scope(const char *const *argv, size_t argc)
{
    /* YOLOv5/v7/v9: batch_size // WORLD_SIZE per rank (train_dual.py); Ultralytics' trainer
     * divides batch by the world size too. Everyone else gives each rank its own. */
    enum cmdline_family fam = cmdline_family(argv, argc);
    return fam == CMDLINE_YOLO || fam == CMDLINE_ULTRALYTICS ? CMDLINE_BATCH_TOTAL
                                                             : CMDLINE_BATCH_PER_RANK;
}

int64_t cmdline_batch_for_world(const char *const *argv, size_t argc, int64_t batch, int64_t world)
{
    if (world <= 1 || cmdline_family(argv, argc) != CMDLINE_YOLO)
        return batch;
    /* train_dual.py main(): assert opt.batch_size % WORLD_SIZE == 0 */
    int64_t b = batch / world * world;
    return b < world ? world : b;
}

const char *cmdline_append_name(const char *const *argv, size_t argc, enum cmdline_kind kind)
{
    enum cmdline_family fam = cmdline_family(argv, argc);
    switch (kind) {
    case CMDLINE_BATCH:
        return fam == CMDLINE_ULTRALYTICS ? "batch="
               : fam == CMDLINE_HF        ? "--per_device_train_batch_size"
               : fam == CMDLINE_YOLO      ? "--batch"
                                          : "--batch-size";
    case CMDLINE_IMAGE:
        return fam == CMDLINE_ULTRALYTICS ? "imgsz="
               : fam == CMDLINE_HF        ? NULL
               : fam == CMDLINE_YOLO      ? "--img"
                                          : "--image-size";
    case CMDLINE_ACCUM:
        /* YOLO and Ultralytics accumulate up to their nominal batch by themselves, with no flag */
        return fam == CMDLINE_YOLO || fam == CMDLINE_ULTRALYTICS ? NULL
                                                                 : "--gradient_accumulation_steps";
    case CMDLINE_EVAL_BATCH:
        return fam == CMDLINE_HF ? "--per_device_eval_batch_size" : NULL;
    case CMDLINE_NBS:
        return fam == CMDLINE_ULTRALYTICS ? "nbs=" : NULL;
    }
    return NULL;
}
