/* sharemap's STM: transactional allocation (TinySTM's mod_mem.h). Memory allocated in a
 * transaction that aborts is freed; memory freed in a transaction is released only if it
 * commits, and only once no running transaction can still reach it. */
#ifndef SHAREMAP_STM_MOD_MEM_H
#define SHAREMAP_STM_MOD_MEM_H

#include <stddef.h>
#include "stm.h"

#ifdef __cplusplus
extern "C" {
#endif

void *stm_malloc(size_t size);
void *stm_calloc(size_t nm, size_t size);
/* With size > 0 the block's words are also locked, so that concurrent readers conflict. */
void stm_free(void *addr, size_t size);
/* Frees addr at commit; locks bytes idx .. idx + size of it now. */
void stm_free2(void *addr, size_t idx, size_t size);
/* The same on an explicit descriptor (NULL: the calling thread's). */
void *stm_malloc_tx(struct stm_tx *tx, size_t size);
void *stm_calloc_tx(struct stm_tx *tx, size_t nm, size_t size);
void stm_free_tx(struct stm_tx *tx, void *addr, size_t size);
void stm_free2_tx(struct stm_tx *tx, void *addr, size_t idx, size_t size);
/* Call once after stm_init. gc is accepted for compatibility: memory is always reclaimed by
 * epochs (TinySTM's gc = 0 frees at commit, which lets a concurrent reader touch a page
 * the allocator gave back; see docs/stm.md). */
void mod_mem_init(int gc);

#ifdef __cplusplus
}
#endif

#endif
