/* simconfig.h: the SIMGPU_* environment settings of the simulated driver, read once per process. */
#ifndef SIMGPU_CONFIG_H
#define SIMGPU_CONFIG_H

#include <stdint.h>
#include <stdio.h>

#define SIMGPU_MAX_DEVICES 64
#define SIMGPU_MAX_FAIL_RULES 32
#define SIMGPU_NAME_LEN 256
#define SIMGPU_FUNC_LEN 64

#define SIMGPU_DEFAULT_MEMORY (16ULL << 30)
#define SIMGPU_DEFAULT_CONTEXT_BYTES (300ULL << 20)
#define SIMGPU_DEFAULT_NAME "vramwatch simulated GPU"
/* Upper bound per device: keeps every address computation far away from overflow. */
#define SIMGPU_MAX_MEMORY (16ULL << 40)

/*
 * A card the simulator can be (SIMGPU_CARD): what the driver reports for it. The named cards are
 * the rows of cards.def; simgpu_default_card is the device of a run that names none.
 */
struct simgpu_card {
    const char *key; /* what SIMGPU_CARD names; NULL for the default card */
    const char *name;
    uint64_t bytes;
    int major, minor, sms, bf16;
    int mem_clock_khz, bus_bits, l2_bytes, clock_khz;
    int threads_per_sm, smem_per_sm, smem_optin, blocks_per_sm;
};

extern const struct simgpu_card simgpu_default_card;
extern const struct simgpu_card simgpu_cards[];
extern const int simgpu_ncards;

/* The named card whose key is `key` (case does not matter), or NULL. */
const struct simgpu_card *simgpu_card_find(const char *key);

/* SIMGPU_FAIL entry: the nth call of func returns err. */
struct simgpu_fail_rule {
    char func[SIMGPU_FUNC_LEN];
    uint64_t nth;
    int err;
    uint64_t seen; /* calls counted so far */
};

struct simgpu_config {
    int devices;
    /* The physical device behind each ordinal: the identity, with CUDA_VISIBLE_DEVICES applied
     * by simgpu_config_visible(); the others are indexed by ordinal once it has run. */
    int physical[SIMGPU_MAX_DEVICES];
    uint64_t memory[SIMGPU_MAX_DEVICES];
    uint64_t context_bytes[SIMGPU_MAX_DEVICES];
    uint64_t other_bytes[SIMGPU_MAX_DEVICES];
    const struct simgpu_card *card[SIMGPU_MAX_DEVICES]; /* never NULL */
    char name[SIMGPU_NAME_LEN]; /* SIMGPU_NAME, or the default card's name */
    int name_set;               /* SIMGPU_NAME was given: it names every device */
    struct simgpu_fail_rule fail[SIMGPU_MAX_FAIL_RULES];
    int nfail;
};

/* "16GiB", "16G", "16000MB", "1.5 GiB", "4096": 0 and *out on success, -1 if malformed. */
int simgpu_parse_size(const char *s, uint64_t *out);

/*
 * A size for every device ("8GiB") and/or per device ("0:16GiB,1:8GiB"). out[] (of
 * SIMGPU_MAX_DEVICES entries) must hold the defaults; entries named in s overwrite them.
 * *highest gets the largest device index named, -1 if none. 0 on success, -1 if malformed
 * (out[] is then left untouched).
 */
int simgpu_parse_device_sizes(const char *s, uint64_t *out, int *highest);

/*
 * Fills cfg from the environment. A bad value prints one line "simgpu: ..." on stderr and
 * keeps the default. is_known_func (may be NULL) vets SIMGPU_FAIL function names.
 */
void simgpu_config_load(struct simgpu_config *cfg, int (*is_known_func)(const char *name));

/* The same, with the complaints about bad values written to `warn` (NULL: nowhere). The
 * simulated NVML reads quietly, so a bad value is reported once, by the driver. */
void simgpu_config_read(struct simgpu_config *cfg, int (*is_known_func)(const char *name),
                        FILE *warn);

/* The name of device dev: SIMGPU_NAME when set, else its card's. */
const char *simgpu_device_name(const struct simgpu_config *cfg, int dev);

/*
 * Applies CUDA_VISIBLE_DEVICES as the real driver does: the listed physical devices become
 * ordinals 0, 1, ... in that order (their capacities and other settings follow them), and the
 * list ends at the first entry that is not a device: a number out of range, a repeat, or
 * anything else; an empty value hides every device. Entries are numbers or UUIDs (GPU-…, a
 * unique prefix is enough). The simulated NVML does not call this: NVML ignores the variable.
 */
void simgpu_config_visible(struct simgpu_config *cfg);

/* The UUID of a physical device: 16 bytes, stable, different for every device. */
void simgpu_uuid_bytes(int physical, unsigned char out[16]);
/* The same spelled as nvidia-smi does: GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx (41 bytes with NUL). */
void simgpu_uuid_string(int physical, char out[48]);

#endif
