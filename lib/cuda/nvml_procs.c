/* nvml_procs.c: what the library asks NVML: the other processes holding memory on a device,
 * when an out-of-memory report is written, and each device's index, once per device, for the
 * live-state file (nvml_device_index).
 *
 * The driver's free memory already counts what other processes hold (it shows up as untracked
 * memory), but not whose it is. NVML lists the processes on a device with their memory; it is
 * the only public interface that does. We use the NVML the application loaded when there is one,
 * else load libnvidia-ml.so.1 ourselves, once, and keep it: this happens only on the way to an
 * out-of-memory report, never on the allocation path, and nvmlInit/nvmlShutdown are reference
 * counted, so the application's own use of NVML is not disturbed. */
#include "nvml_procs.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "loaded.h"

#define NVML_OK 0
#define NVML_INSUFFICIENT_SIZE 7
#define NVML_NOT_AVAILABLE (~0ULL)
#define MAX_LISTED 64

/* nvmlProcessInfo_t of NVML 11.x/12.x (the _v2 and _v3 calls): pid, memory, MIG instance ids. */
struct nvml_proc {
    unsigned int pid;
    unsigned long long used;
    unsigned int gpu_instance, compute_instance;
};

typedef int (*init_fn)(void);
typedef int (*by_bus_fn)(const char *, void **);
typedef int (*procs_fn)(void *, unsigned int *, struct nvml_proc *);

typedef int (*index_fn)(void *, unsigned int *);

static void *nvml_symbol_of(const char *name, bool may_load)
{
    /* Our own handle, when the application had not loaded NVML. The report's writer and the
     * library's thread may both get here: no lock (a child forked while one was held would keep
     * it held), and two threads that both dlopen get the same handle, only counted twice. */
    static void *own;
    void *f = loaded_find("libnvidia-ml.", name);
    if (f)
        return f;
    void *h = __atomic_load_n(&own, __ATOMIC_ACQUIRE);
    if (!h && may_load) {
        h = dlopen("libnvidia-ml.so.1", RTLD_LAZY | RTLD_LOCAL);
        __atomic_store_n(&own, h, __ATOMIC_RELEASE);
    }
    return h ? dlsym(h, name) : NULL;
}

static void *nvml_symbol(const char *name)
{
    return nvml_symbol_of(name, true);
}

int nvml_device_index(const char *pci_bus_id, bool may_load)
{
    if (!pci_bus_id || !pci_bus_id[0])
        return -1;
    init_fn init = (init_fn)nvml_symbol_of("nvmlInit_v2", may_load);
    init_fn shutdown = (init_fn)nvml_symbol_of("nvmlShutdown", may_load);
    by_bus_fn by_bus = (by_bus_fn)nvml_symbol_of("nvmlDeviceGetHandleByPciBusId_v2", may_load);
    index_fn index = (index_fn)nvml_symbol_of("nvmlDeviceGetIndex", may_load);
    if (!init || !shutdown || !by_bus || !index || init() != NVML_OK)
        return -1;
    void *dev = NULL;
    unsigned int i = 0;
    int n = by_bus(pci_bus_id, &dev) == NVML_OK && index(dev, &i) == NVML_OK && i <= 0x7fffffffu
                    ? (int)i
                    : -1;
    shutdown(); /* reference counted: the application's own nvmlInit stays in force */
    return n;
}

/* /proc/PID/comm, or "" when it cannot be read (another PID namespace: NVML gives host pids). */
static void process_name(unsigned int pid, char *out, size_t n)
{
    char path[64];
    out[0] = 0;
    snprintf(path, sizeof path, "/proc/%u/comm", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t got = read(fd, out, n - 1);
    close(fd);
    if (got <= 0) {
        out[0] = 0;
        return;
    }
    out[got] = 0;
    char *nl = strchr(out, '\n');
    if (nl)
        *nl = 0;
}

int nvml_procs_others(const char *pci_bus_id, struct report_proc *out, int max)
{
    if (!pci_bus_id || !pci_bus_id[0] || max <= 0)
        return -1;
    init_fn init = (init_fn)nvml_symbol("nvmlInit_v2");
    init_fn shutdown = (init_fn)nvml_symbol("nvmlShutdown");
    by_bus_fn by_bus = (by_bus_fn)nvml_symbol("nvmlDeviceGetHandleByPciBusId_v2");
    procs_fn procs = (procs_fn)nvml_symbol("nvmlDeviceGetComputeRunningProcesses_v3");
    if (!procs)
        procs = (procs_fn)nvml_symbol("nvmlDeviceGetComputeRunningProcesses_v2");
    if (!init || !shutdown || !by_bus || !procs)
        return -1;
    if (init() != NVML_OK)
        return -1;
    int n = -1;
    void *dev = NULL;
    struct nvml_proc list[MAX_LISTED];
    unsigned int count = MAX_LISTED;
    int rc = by_bus(pci_bus_id, &dev) == NVML_OK ? procs(dev, &count, list) : -1;
    /* More than MAX_LISTED processes: the list is cut, the first ones are kept. */
    if (rc == NVML_INSUFFICIENT_SIZE && count > MAX_LISTED)
        count = MAX_LISTED;
    if (rc == NVML_OK || rc == NVML_INSUFFICIENT_SIZE) {
        n = 0;
        unsigned int self = (unsigned int)getpid();
        for (unsigned int i = 0; i < count && i < MAX_LISTED && n < max; i++) {
            if (list[i].pid == self)
                continue;
            out[n].pid = list[i].pid;
            out[n].used = list[i].used == NVML_NOT_AVAILABLE ? -1 : (int64_t)list[i].used;
            process_name(list[i].pid, out[n].name, sizeof out[n].name);
            n++;
        }
    }
    shutdown();
    return n;
}
