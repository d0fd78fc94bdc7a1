/* sharemap's STM: totals over every thread (TinySTM's mod_stats.h): "global_nb_commits",
 * "global_nb_aborts", "global_max_retries", each an unsigned long. */
#ifndef SHAREMAP_STM_MOD_STATS_H
#define SHAREMAP_STM_MOD_STATS_H

#include "stm.h"

#ifdef __cplusplus
extern "C" {
#endif

int stm_get_global_stats(const char *name, void *val);
/* The calling thread's: nb_commits, nb_aborts, nb_retries_min, nb_retries_max (unsigned
 * long), nb_retries_avg (double). */
int stm_get_local_stats(const char *name, void *val);
void mod_stats_init(void);

#ifdef __cplusplus
}
#endif

#endif
