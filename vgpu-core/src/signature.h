/* The busy time to charge for a launch, de-noised by the fastest recent run of the same launch. */
#ifndef VGPU_SIGNATURE_H
#define VGPU_SIGNATURE_H

#include <stdint.h>

/* A launch's identity: what it runs and its shape (never its parameters' contents). */
uint64_t vgpu_signature(const void *what, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                        unsigned by, unsigned bz, unsigned shared);

/* Records a measured duration and returns what to charge: the smallest of this and the last few
 * durations of the same signature. Call under the launch lock. */
int64_t vgpu_signature_charge(uint64_t signature, int64_t measured_ns);

/* What the signature was last charged (the smallest of its recent measurements), 0 if none: the
 * estimate for a launch that could not be measured. Call under the launch lock. */
int64_t vgpu_signature_known(uint64_t signature);
/* 1 once the signature has a full window of measurements (its charge no longer rests on a few). */
int vgpu_signature_settled(uint64_t signature);

void vgpu_signature_forget(void);

#endif
