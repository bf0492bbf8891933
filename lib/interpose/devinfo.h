/* The device facts gathered for a report (devinfo.c). */
#ifndef VW_DEVINFO_H
#define VW_DEVINFO_H

struct core_snapshot;
struct report_devinfo;

/* Fill info[0..VW_MAX_DEVICES] for the devices `snap` has seen (the pools' figures go into
 * snap's device records too), asking the driver and, for an "oom" report, NVML. Our queries
 * must pass through unrecorded: the caller holds the depth, and the lock that guards `info`. */
void devinfo_gather(const char *reason, struct core_snapshot *snap, struct report_devinfo *info);

#endif
