/* The public API of include/vramwatch/vramwatch.h. */
#include <string.h>

#include "config.h"
#include "interpose.h"
#include "vramwatch/vramwatch.h"

VW_EXPORT int vramwatch_mark(const char *label)
{
    if (!label || !interpose_active())
        return -1;
    core_mark(label, platform_now_ns());
    return 0;
}

VW_EXPORT int vramwatch_step(void)
{
    if (!interpose_active())
        return -1;
    core_step(platform_now_ns());
    return 0;
}

VW_EXPORT int vramwatch_step_reporting(int on)
{
    if (!interpose_active())
        return -1;
    core_step_reporting(on != 0);
    return 0;
}

VW_EXPORT int vramwatch_dump(const char *reason)
{
    static const char *allowed[] = { "oom", "exit", "request", "signal" };
    const char *r = "request";
    if (!interpose_active())
        return -1;
    for (size_t i = 0; reason && i < sizeof(allowed) / sizeof(allowed[0]); i++)
        if (!strcmp(reason, allowed[i]))
            r = allowed[i];
    return reporting_write(r);
}

VW_EXPORT int vramwatch_allocator_retries(int retries)
{
    if (!interpose_active())
        return -1;
    retrying_declare(retries);
    return 0;
}

VW_EXPORT const char *vramwatch_version(void)
{
    return VW_VERSION;
}
