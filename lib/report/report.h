/* The report file (schema vramwatch.report/1): gathered from the core, written atomically. */
#ifndef VW_REPORT_H
#define VW_REPORT_H

#include <stdbool.h>
#include <stdint.h>

#include "core.h"

#define REPORT_PROCS_MAX 16

/* Another process holding memory on the device (NVML). */
struct report_proc {
    unsigned int pid;
    int64_t used;  /* -1: unknown */
    char name[32]; /* empty: unknown */
};

/* What the CUDA side measured for one device just before the report; -1 where unknown. */
struct report_devinfo {
    char name[256];             /* empty: unknown */
    char pci_bus_id[32];        /* empty: unknown */
    char uuid[48];              /* "GPU-…" as nvidia-smi prints it; empty: unknown */
    int64_t total;              /* the device's capacity: the emulated one under a limit */
    int64_t limit;              /* VRAMWATCH_LIMIT for this device, -1: none */
    int64_t free;               /* the driver's free memory */
    int64_t pool_extra;         /* pools' reserved beyond what they handed out, 0 without pools */
    int64_t pool_reserved_high; /* the pools' high-water mark of reserved memory */
    int nprocs; /* other processes listed below; -1: not asked, or NVML unavailable */
    struct report_proc procs[REPORT_PROCS_MAX];
};

/* Write the report. `info` has VW_MAX_DEVICES + 1 entries, indexed like the core's devices.
 * Returns 0 when the file was written, -1 otherwise (one warning says why). Thread-safe:
 * concurrent calls are serialised. */
int report_write(const char *reason, const struct report_devinfo *info);

/* The child side of fork: a fresh lock, and the parent's per-process report state forgotten. */
void report_after_fork_child(void);

/* The path the next report goes to (for messages and tests). */
const char *report_path(void);
/* Temporary report files and live-state files of killed writers in the folder dirfd: removed
 * when certainly dead (the rule is report.c's). */
void report_sweep_stale(int dirfd);

#endif
