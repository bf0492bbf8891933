/* The launchers' rank variables: which names each launcher sets, in the order they are tried. */
#include "ranks.h"

#include <stdlib.h>

/* MPI before Slurm: mpirun inside an allocation inherits SLURM_PROCID. MVAPICH's MV2_COMM_WORLD_*
 * (DeepSpeed's mvapich launcher) sit with the other MPI names; DeepSpeed's own launcher and
 * torchrun set RANK/LOCAL_RANK/WORLD_SIZE. Each field takes the first name set, so a launcher
 * that sets only some of them still fills what it can. */
static const char *const names[][6] = {
    [VW_RANK] = { "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "MV2_COMM_WORLD_RANK", "SLURM_PROCID",
                  NULL },
    [VW_LOCAL_RANK] = { "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                        "MV2_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", NULL },
    [VW_WORLD_SIZE] = { "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE",
                        "SLURM_NTASKS", NULL },
};

int64_t ranks_from_env(enum vw_rank_kind kind)
{
    for (const char *const *n = names[kind]; *n; n++) {
        const char *v = getenv(*n);
        char *end;
        if (!v || !*v)
            continue;
        long long x = strtoll(v, &end, 10);
        if (*end == 0 && x >= 0)
            return x;
    }
    return -1;
}
