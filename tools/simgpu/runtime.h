/* runtime.h: what the two halves of the simulated libcudart share (runtime.c, runtime_kernels.c). */
#ifndef SIMGPU_RUNTIME_H
#define SIMGPU_RUNTIME_H

/* A kernel was launched: the driver's read-back window ends (readback.c). */
void rt_kernel_launched(void);

#endif
