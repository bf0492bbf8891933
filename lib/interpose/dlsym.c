/* The exported dlsym, and the way to the real one.
 *
 * dlsym(RTLD_NEXT, ...) searches relative to its caller's module, so a wrapper that calls the
 * real dlsym from its own frame would answer every RTLD_NEXT lookup in the process as if
 * libvramwatch had asked. The entry is therefore a few instructions of assembly: RTLD_NEXT
 * lookups jump straight to glibc's dlsym with the caller's return address untouched; every
 * other handle goes to resolve_dlsym, which may hand out a shim (dlsym on a libcuda or
 * libcudart handle, which is how cudart, JAX and ctypes reach CUDA). */
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>

#include "platform.h"

void *dlsym_real(void *handle, const char *name);
void *dlsym_resolve(void);
void *resolve_dlsym(void *handle, const char *name);

typedef void *(*dlsym_fn)(void *, const char *);
/* Read by the assembly stub below; written once. */
__attribute__((used, visibility("hidden"))) dlsym_fn dlsym_real_ptr;

VW_NO_SANITIZE void *dlsym_resolve(void)
{
    dlsym_fn f = __atomic_load_n(&dlsym_real_ptr, __ATOMIC_ACQUIRE);
    if (f)
        return (void *)f;
    /* glibc 2.34 moved dlsym into libc under a new version; older ones only have 2.2.5. The
     * application's dlsym comes next: errno stays as it left it. */
    int e = errno;
    void *p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (!p)
        p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    __atomic_store_n(&dlsym_real_ptr, (dlsym_fn)p, __ATOMIC_RELEASE);
    errno = e;
    return p;
}

VW_NO_SANITIZE void *dlsym_real(void *handle, const char *name)
{
    dlsym_fn f = (dlsym_fn)dlsym_resolve();
    return f ? f(handle, name) : NULL;
}

#if defined(__x86_64__)
/* dlsym(handle, name): rdi = handle, rsi = name. RTLD_NEXT is ((void *) -1). */
__asm__(".text\n"
        ".globl dlsym\n"
        ".type dlsym, @function\n"
        "dlsym:\n"
        "    cmpq $-1, %rdi\n"
        "    jne resolve_dlsym\n"
        "    movq dlsym_real_ptr(%rip), %rax\n"
        "    testq %rax, %rax\n"
        "    jz 1f\n"
        "    jmp *%rax\n"
        "1:  pushq %rdi\n"
        "    pushq %rsi\n"
        "    subq $8, %rsp\n" /* keep the stack 16-byte aligned for the call */
        "    call dlsym_resolve\n"
        "    addq $8, %rsp\n"
        "    popq %rsi\n"
        "    popq %rdi\n"
        "    testq %rax, %rax\n"
        "    jz 2f\n"
        "    jmp *%rax\n"
        "2:  ret\n" /* no dlsym found anywhere: NULL */
        ".size dlsym, .-dlsym\n");
#else
/* Other architectures: without a tail-calling stub RTLD_NEXT would resolve relative to this
 * library, so dlsym is not wrapped there (lookups through dlsym handles are then unseen). */
#endif
