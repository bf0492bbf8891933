/* Device facts for reports: what the driver and NVML say of each device in use (name, PCI
 * location, UUID, free memory, pools, other processes), gathered for the report that
 * reporting.c has the report writer (report.c) write. */
#include "interpose.h"
#include "devinfo.h"

#include <string.h>

#include "driver.h"
#include "nvml_procs.h"
#include "report.h"

void devinfo_gather(const char *reason, struct core_snapshot *snap, struct report_devinfo *info)
{
    int cur = driver_current_device();
    static int64_t used[VW_MAX_DEVICES + 1]; /* under reporting.c's lock, as `info` is */
    for (int i = 0; i <= VW_MAX_DEVICES; i++) {
        used[i] = -1;
        struct report_devinfo *in = &info[i];
        memset(in, 0, sizeof(*in));
        in->total = in->free = in->pool_reserved_high = -1;
        in->nprocs = -1;
        in->limit = limit_of(i) ? (int64_t)limit_of(i) : -1;
        if (!snap->devices[i].active || i == VW_MAX_DEVICES)
            continue;
        size_t t, f;
        if (driver_ready()) {
            if (driver_total_mem(i, &t))
                in->total = (int64_t)t;
            if (!driver_device_name(i, in->name, sizeof(in->name)))
                in->name[0] = 0;
            if (!driver_pci_bus_id(i, in->pci_bus_id, sizeof(in->pci_bus_id)))
                in->pci_bus_id[0] = 0;
            driver_device_uuid(i, in->uuid);
            /* The driver answers free memory for the current context's device only. */
            bool got = i == cur ? driver_mem_info(&f, &t) : driver_mem_info_other(i, &f, &t);
            if (got) {
                used[i] = t > f ? (int64_t)(t - f) : 0;
                limit_meminfo(i, &f, &t);
                in->free = (int64_t)f;
                in->total = (int64_t)t;
            }
        }
        if (in->limit > 0)
            in->total = in->limit; /* the emulated card, even when the driver could not answer */
        /* Whose memory the rest of the card is: worth asking only when the card ran out. */
        if (strcmp(reason, "oom") == 0 && in->pci_bus_id[0])
            in->nprocs = nvml_procs_others(in->pci_bus_id, in->procs, REPORT_PROCS_MAX);
        if (!driver_pools(i, &snap->devices[i], &in->pool_extra, &in->pool_reserved_high)) {
            in->pool_extra = -1;
            in->pool_reserved_high = -1;
        }
        /* The timeline's last point is this measurement: reserved and untracked as reported. */
        core_measure(i, used[i], in->pool_extra, platform_now_ns());
    }
}
