/* The busy time to charge for a launch, de-noised by the fastest recent run of the same launch. */
#ifndef VGPU_SIGNATURE_H
#define VGPU_SIGNATURE_H

#include <stdint.h>

/* A launch's identity: what it runs and its shape (never its parameters' contents). */
uint64_t vgpu_signature(const void *what, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                        unsigned by, unsigned bz, unsigned shared);

/* An executable graph's identity: the handle (its work is measured as a whole). */
uint64_t vgpu_graph_signature(const void *exec);

/* Records a measured duration and returns what to charge: the smallest of this and the last few
 * durations of the same signature. `epoch` is vgpu_signature_epoch() when the launch began: a
 * launch begun before its signature restarted ran the old work, so it is charged `measured_ns`
 * and not recorded. Call under the launch lock. */
int64_t vgpu_signature_charge(uint64_t signature, uint64_t epoch, int64_t measured_ns);

/* The epoch launches begin in now (it moves at every restart). Call under the launch lock. */
uint64_t vgpu_signature_epoch(void);
/* The signature's work changed (an executable graph updated or destroyed): its history starts
 * afresh, and launches begun before now are not recorded in it. Call under the launch lock. */
void vgpu_signature_restart(uint64_t signature);

/* What the signature was last charged (the smallest of its recent measurements), 0 if none: the
 * estimate for a launch that could not be measured. Call under the launch lock. */
int64_t vgpu_signature_known(uint64_t signature);
/* 1 once the signature has a full window of measurements (its charge no longer rests on a few). */
int vgpu_signature_settled(uint64_t signature);

void vgpu_signature_forget(void);

#endif
