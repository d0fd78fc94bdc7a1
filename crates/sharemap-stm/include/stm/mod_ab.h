/* sharemap's STM: time per atomic block (TinySTM's mod_ab.h), from a transaction's first
 * start to its commit, in nanoseconds, per attribute id. */
#ifndef SHAREMAP_STM_MOD_AB_H
#define SHAREMAP_STM_MOD_AB_H

#include "stm.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct stm_ab_stats {
  unsigned long samples;
  double mean;
  double variance;
  double min;
  double max;
  double percentile_50;
  double percentile_90;
  double percentile_95;
  double *reservoir;           /* sorted; valid until the next call for the same block */
  unsigned int reservoir_size;
} stm_ab_stats_t;

/* 1 when block id has samples. */
int stm_get_ab_stats(int id, stm_ab_stats_t *stats);
/* Keeps one transaction in freq; check, if given, may reject a sample by returning 0. */
void mod_ab_init(int freq, int (*check)(void));

#ifdef __cplusplus
}
#endif

#endif
