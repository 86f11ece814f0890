/* The container's cores budget per GPU: busy time it may still start in this refill period. */
#ifndef VGPU_BUDGET_H
#define VGPU_BUDGET_H

#include <stdint.h>

#include "state.h"

/* Refills every GPU's budget when a period has passed, re-reading `limits` for the allowance. */
void vgpu_budget_refill_if_due(const vgpu_state *s, uint64_t now);
/* Charges measured busy time against device `index`'s budget. */
void vgpu_budget_charge(const vgpu_state *s, int index, int64_t ns);
/* The allowance in percent now in force for device `index`. */
int vgpu_budget_allowance(const vgpu_state *s, int index);
/* 1 while device `index` has budget left this period. */
int vgpu_budget_left(const vgpu_state *s, int index);
/* Sleeps until the next refill is due. */
void vgpu_budget_sleep(const vgpu_state *s);

#endif
