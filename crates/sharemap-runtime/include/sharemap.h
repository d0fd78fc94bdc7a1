/* sharemap annotations for traced programs.
 *
 * Mark where serial initialisation ends, where phases begin and the region of interest;
 * `sharemap record` stores them as trace events that the placement policies use
 * (first-touch re-homes pages touched after init-done; migrate-on-phase forgets placements
 * at each phase). Without sharemap's runtime (a plain build) or outside `sharemap record`,
 * every call does nothing.
 */
#ifndef SHAREMAP_H
#define SHAREMAP_H

#ifdef __cplusplus
extern "C" {
#endif

void __sharemap_init_done(void) __attribute__((weak));
void __sharemap_phase(const char *name) __attribute__((weak));
void __sharemap_roi_begin(void) __attribute__((weak));
void __sharemap_roi_end(void) __attribute__((weak));

static inline void sharemap_init_done(void) { if (__sharemap_init_done) __sharemap_init_done(); }
static inline void sharemap_phase(const char *name) { if (__sharemap_phase) __sharemap_phase(name); }
static inline void sharemap_roi_begin(void) { if (__sharemap_roi_begin) __sharemap_roi_begin(); }
static inline void sharemap_roi_end(void) { if (__sharemap_roi_end) __sharemap_roi_end(); }

#ifdef __cplusplus
}
#endif

#endif
