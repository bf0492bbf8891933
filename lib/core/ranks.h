/* The launchers' rank variables: one list, read by the report and the live-state file. */
#ifndef VW_RANKS_H
#define VW_RANKS_H

#include <stdint.h>

enum vw_rank_kind { VW_RANK, VW_LOCAL_RANK, VW_WORLD_SIZE };

/* The first of the variables naming `kind` that is set to a non-negative decimal, else -1.
 * Calls getenv: never from a hook. */
int64_t ranks_from_env(enum vw_rank_kind kind);

#endif
