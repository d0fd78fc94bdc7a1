/* sharemap's STM behind TL2's STM_* macro layer, for programs written against it (STAMP
 * and others that `#include "stm.h"` and use STM_BEGIN_WR, STM_READ, ...). Put this
 * directory first on the include path (sharemap cc --stm-tl2 does). */
#ifndef SHAREMAP_STM_TL2_H
#define SHAREMAP_STM_TL2_H

#include "../stm/stm.h"
#include "../stm/wrappers.h"
#include "../stm/mod_mem.h"

#define STM_THREAD_T                 struct stm_tx
#define STM_SELF                     sharemap_stm_self
#define STM_RO_FLAG                  sharemap_stm_ro

#define STM_STARTUP()                do { stm_init(); mod_mem_init(0); } while (0)
#define STM_SHUTDOWN()               stm_exit()
#define STM_NEW_THREAD()             stm_init_thread()
#define STM_INIT_THREAD(t, id)       ((void)(t), (void)(id))
#define STM_FREE_THREAD(t)           ((void)(t), stm_exit_thread())

#define STM_BEGIN(ro)                do { \
                                       stm_tx_attr_t sharemap_stm_attr = {{ .id = 0, .read_only = (ro) }}; \
                                       sigjmp_buf *sharemap_stm_env = stm_start(sharemap_stm_attr); \
                                       if (sharemap_stm_env != NULL) sigsetjmp(*sharemap_stm_env, 0); \
                                     } while (0)
#define STM_BEGIN_RD()               STM_BEGIN(1)
#define STM_BEGIN_WR()               STM_BEGIN(0)
#define STM_END()                    stm_commit()
#define STM_RESTART()                stm_abort(0)

#define STM_READ(var)                stm_load((volatile stm_word_t *)(void *)&(var))
#define STM_READ_F(var)              stm_load_float((volatile float *)(void *)&(var))
#define STM_READ_P(var)              stm_load_ptr((volatile void **)(void *)&(var))
#define STM_WRITE(var, val)          stm_store((volatile stm_word_t *)(void *)&(var), (stm_word_t)(val))
#define STM_WRITE_F(var, val)        stm_store_float((volatile float *)(void *)&(var), (val))
#define STM_WRITE_P(var, val)        stm_store_ptr((volatile void **)(void *)&(var), (void *)(val))

#define STM_LOCAL_WRITE(var, val)    ({ var = val; var; })
#define STM_LOCAL_WRITE_F(var, val)  ({ var = val; var; })
#define STM_LOCAL_WRITE_P(var, val)  ({ var = val; var; })

#define STM_MALLOC(size)             stm_malloc(size)
#define STM_FREE(ptr)                stm_free((ptr), 0)

#endif
