/* stub.h: the two shapes of a generated stand-in symbol (tools/simgpu/stubgen.py writes this
 * file and every stubs/<soname>.c that includes it). Weak, so that a hand-written definition of
 * the same name in the stand-in replaces it at link time; exported whatever the build's default
 * visibility. A function takes nothing and returns 0 in a full register: success for every
 * NVIDIA status enum, NULL for a pointer. */
#ifndef SIMGPU_STUB_H
#define SIMGPU_STUB_H

#define STUB(name) \
    long name(void); \
    __attribute__((weak, visibility("default"))) long name(void) { return 0; }
#define DATA(name, size) \
    extern unsigned char name[size]; \
    __attribute__((weak, visibility("default"))) unsigned char name[size];

#endif
