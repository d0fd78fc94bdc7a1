/* sharemap's STM: transactional loads and stores of every C type (TinySTM's wrappers.h).
 * Values narrower than a word, or straddling two, go through the enclosing words with a
 * mask. */
#ifndef SHAREMAP_STM_WRAPPERS_H
#define SHAREMAP_STM_WRAPPERS_H

#include <stddef.h>
#include <stdint.h>
#include "stm.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SHAREMAP_STM_TYPED(name, type) \
  type stm_load_##name(volatile type *addr); \
  void stm_store_##name(volatile type *addr, type value);

SHAREMAP_STM_TYPED(u8, uint8_t)
SHAREMAP_STM_TYPED(u16, uint16_t)
SHAREMAP_STM_TYPED(u32, uint32_t)
SHAREMAP_STM_TYPED(u64, uint64_t)
SHAREMAP_STM_TYPED(char, char)
SHAREMAP_STM_TYPED(uchar, unsigned char)
SHAREMAP_STM_TYPED(short, short)
SHAREMAP_STM_TYPED(ushort, unsigned short)
SHAREMAP_STM_TYPED(int, int)
SHAREMAP_STM_TYPED(uint, unsigned int)
SHAREMAP_STM_TYPED(long, long)
SHAREMAP_STM_TYPED(ulong, unsigned long)
SHAREMAP_STM_TYPED(float, float)
SHAREMAP_STM_TYPED(double, double)

#undef SHAREMAP_STM_TYPED

void *stm_load_ptr(volatile void **addr);
void stm_store_ptr(volatile void **addr, void *value);

void stm_load_bytes(volatile uint8_t *addr, uint8_t *buf, size_t size);
void stm_store_bytes(volatile uint8_t *addr, uint8_t *buf, size_t size);
void stm_set_bytes(volatile uint8_t *addr, uint8_t byte, size_t count);

#ifdef __cplusplus
}
#endif

#endif
