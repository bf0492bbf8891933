/* simcard.h: the simulated card a command runs a program on (run --sim, fit --sim, and sim, the
 * same card without vramwatch): what CARD names, and the one environment that puts a program on it.
 *
 * Why LD_PRELOAD and not only LD_LIBRARY_PATH: PyTorch's pip wheels find their own nvidia/
 * libraries through DT_RPATH, which ld.so searches before LD_LIBRARY_PATH; a library already
 * loaded under the same soname beats both. So every stand-in is preloaded (after libvramwatch.so,
 * whose definitions must come first in the global scope), and the folder also goes first on
 * LD_LIBRARY_PATH for what is opened by name later (dlopen("libcuda.so.1")). */
#ifndef VRAMWATCH_TOOL_SIMCARD_H
#define VRAMWATCH_TOOL_SIMCARD_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "sb.h"
#include "util.h"

/* The smallest card taken: a size below it is a unit left out ("16" for 16GiB). */
#define SIMCARD_MIN_BYTES (UINT64_C(1) << 20)
/* The largest the simulator models per device (docs/simgpu.md, SIMGPU_MEMORY). */
#define SIMCARD_MAX_BYTES (UINT64_C(16) << 40)

struct simcard {
    const char *key;  /* a card of tools/simgpu/cards.def (SIMGPU_CARD), or NULL for a size */
    const char *name; /* its full name, NULL for a size */
    uint64_t bytes;   /* the size given, or the named card's memory */
};

/* CARD as written: a card's name, in any case ("h100", "A100-80GB"), or a size in the grammar of
 * lib/base/sizes.c ("16GiB", "24G", "80GB") of SIMCARD_MIN_BYTES to SIMCARD_MAX_BYTES. False with a
 * short reason in why ("not a size or a card the simulator knows (V100, ...)"). */
bool simcard_parse(const char *s, struct simcard *out, struct strbuf *why);

/* The cards the simulator knows, for --help: one "  KEY  MEMORY  NAME" line each. */
void simcard_list(FILE *f);

/* One variable of the environment; a NULL value unsets it. */
struct simcard_var {
    const char *name;
    char *value;
};
struct simcard_env {
    struct simcard_var v[8];
    size_t n;
};

/* The environment that runs a program on `card`, built from the current one:
 * - LD_PRELOAD: `lib` (libvramwatch.so's absolute path) when given, then every stand-in of the
 *   simulator's folder (preload_find_simgpu, preload_standins), behind any sanitizer runtime and in
 *   front of the entries already there (less those that name one of ours). Without `lib`, nothing
 *   of vramwatch: libvramwatch.so is taken out of LD_PRELOAD, and the companion's folder out of
 *   PYTHONPATH.
 * - LD_LIBRARY_PATH: the folder first, then the entries already there.
 * - SIMGPU_MEMORY=<bytes> for a size (SIMGPU_CARD unset), SIMGPU_CARD=<key> for a named card
 *   (SIMGPU_MEMORY unset): CARD alone says what the card is.
 * False with the reason in why (no simulator, a path LD_PRELOAD cannot hold). */
bool simcard_env(const struct simcard *card, const char *lib, struct simcard_env *env,
                 struct strbuf *why);
/* Sets (and unsets) the variables in this process, for the program it starts. */
bool simcard_apply(const struct simcard_env *env, struct strbuf *why);
/* The variables as shell lines, for eval: "export NAME='value'", and "unset NAME" for a variable
 * that is set now and must not be. */
void simcard_print(FILE *f, const struct simcard_env *env);
void simcard_env_free(struct simcard_env *env);

/* For run and fit: reads --sim CARD's value (one line "CMD: --sim CARD: why" and false when it is
 * not one). */
bool simcard_option(struct util_args *a, struct simcard *out);
/* For run and fit: the environment with the library, applied; one line "CMD: ..." and false when
 * it cannot be. */
bool simcard_setup(const char *cmd, const struct simcard *card, const char *lib);

#endif
