/* sharemap's STM: totals over every thread (TinySTM's mod_stats.h): "global_nb_commits",
 * "global_nb_aborts", "global_max_retries", each an unsigned long. */
#ifndef SHAREMAP_STM_MOD_STATS_H
#define SHAREMAP_STM_MOD_STATS_H

#include "stm.h"

#ifdef __cplusplus
extern "C" {
#endif

int stm_get_global_stats(const char *name, void *val);
void mod_stats_init(void);

#ifdef __cplusplus
}
#endif

#endif
