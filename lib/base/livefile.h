/* The live-state file, VRAMWATCH_DIR/vramwatch-live.<host>.<pid>: its layout, shared by the
 * writer (lib/interpose/live.c) and the reader (`vramwatch top`, tools/vramwatch/commands/cmd_top.c).
 *
 * One fixed-size file per process under the library, written with pwrite by its writer (never
 * through a shared mapping: on a full file system its stores would raise SIGBUS) and read with
 * read + the sequence check below; docs/top.md describes it for other readers.
 *
 *   offset  size   field
 *   0       8      magic "vwlive1\n"
 *   8       4      version (2; 1 before `where`), 4 size of the whole file in bytes
 *   16      8      seq: odd while the writer is changing the file, even when it is whole
 *   24      ...    struct vw_live_file below (native byte order and alignment, x86-64 / aarch64)
 *
 * The writer writes seq odd, then the whole file (seq odd in it), then seq even. A reader reads
 * the whole file, then seq again: the copy is consistent when its seq is even and the same as
 * the one read after it (a sequence lock); otherwise it reads again. Sizes are bytes; times nanoseconds since the epoch;
 * -1 where a figure is unknown.
 *
 * Version 2 only appended `where` (the physical GPU of each device): a version 1 file is the
 * first VW_LIVE_V1_SIZE bytes of this layout, and a reader takes both (its `where` unknown). */
#ifndef VW_LIVEFILE_H
#define VW_LIVEFILE_H

#include <stddef.h>
#include <stdint.h>

#define VW_LIVE_MAGIC "vwlive1\n"
#define VW_LIVE_VERSION 2
#define VW_LIVE_VERSION_1 1
#define VW_LIVE_PREFIX "vramwatch-live."
#define VW_LIVE_DEVICES 8 /* the devices in use, lowest ordinals first */
#define VW_LIVE_SITES 5   /* the call sites holding the most live memory, largest first */
#define VW_LIVE_FRAMES 16 /* per call site: its Python frames, then its innermost native ones */

struct vw_live_frame {
    uint8_t python; /* 1: file, function, line; 0: module, symbol, offset */
    uint8_t pad[7];
    int64_t line_or_offset;      /* Python: the line; native: the offset in the module */
    int64_t symbol_offset;       /* native: from the symbol's start, -1 unknown */
    char file_or_module[152];    /* a path, cut on the left to fit ("..." first) */
    char function_or_symbol[80]; /* cut on the right; empty: unknown */
};

struct vw_live_site {
    uint64_t id; /* the call site's id, as the report will list it */
    uint64_t live_bytes, live_count, alloc_calls;
    uint32_t nframes, frames_total; /* kept here / in the whole chain */
    struct vw_live_frame frames[VW_LIVE_FRAMES];
};

struct vw_live_device {
    int32_t ordinal;
    uint32_t pad;
    int64_t live_bytes, peak_live_bytes;
    int64_t reserved_bytes; /* live plus what stream-ordered pools hold beyond it */
    int64_t limit_bytes;    /* VRAMWATCH_LIMIT, -1: none */
    int64_t total_bytes;    /* the card's memory as the driver says, -1 unknown */
    uint64_t alloc_calls, free_calls, failed_calls;
};

/* Which physical GPU a device of `devices` is (same index): the ordinal is the process's own
 * (CUDA_VISIBLE_DEVICES renumbers), these are what nvidia-smi shows. */
struct vw_live_where {
    char pci_bus_id[32]; /* as nvidia-smi prints it, "00000000:3B:00.0"; "" unknown */
    char uuid[48];       /* "GPU-…"; "" unknown */
    int32_t nvml_index;  /* nvidia-smi's index (NVML's enumeration, in PCI bus order); -1 unknown */
    uint32_t pad;
};

struct vw_live_file {
    char magic[8];
    uint32_t version, size;
    uint64_t seq;
    int64_t pid, ppid;
    int64_t rank, local_rank, world_size; /* as in reports; -1 when no launcher says */
    uint64_t start_unix_ns;               /* when this file was created */
    uint64_t update_unix_ns;              /* the last update: the writer refreshes it each tick */
    uint32_t interval_ms;                 /* how often the writer updates */
    uint32_t ndevices, nsites;
    uint32_t oom; /* out-of-memory failures that were final, so far */
    char host[64];
    char cwd[256];  /* cut on the left to fit */
    char argv[512]; /* the command line, arguments joined by spaces, cut on the right */
    struct vw_live_device devices[VW_LIVE_DEVICES];
    struct vw_live_site sites[VW_LIVE_SITES];
    struct vw_live_where where[VW_LIVE_DEVICES]; /* version 2 */
};

/* A version 1 file: everything before `where`. */
#define VW_LIVE_V1_SIZE offsetof(struct vw_live_file, where)

#endif
