/* timeline_torch.h: a report as PyTorch's memory snapshot (timeline_torch.c), for
 * `vramwatch timeline --format=torch-snapshot` (cmd_timeline.c). */
#ifndef VRAMWATCH_TOOL_TIMELINE_TORCH_H
#define VRAMWATCH_TOOL_TIMELINE_TORCH_H

#include <stdbool.h>

#include "model.h"
#include "sb.h"

/* The pickle of what torch.cuda.memory._snapshot() returns, rebuilt from the report, into o.
 * Returns false when the report has no trace (written before it existed): the snapshot then has
 * its segments and out-of-memory entries only. */
bool timeline_torch_write(struct strbuf *o, const struct model_report *r);

#endif
