/* nvml_procs.h: other processes on a device, through NVML (for out-of-memory reports). */
#ifndef VW_NVML_PROCS_H
#define VW_NVML_PROCS_H

#include "report.h"

/* The processes other than this one that hold memory on the device with this PCI bus id, at
 * most `max`. Returns how many, or -1 when NVML is not available or does not know the device. */
int nvml_procs_others(const char *pci_bus_id, struct report_proc *out, int max);

#endif
