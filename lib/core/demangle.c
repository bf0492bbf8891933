/* C++ names for native frames, without ever running out of stack.
 *
 * libstdc++'s __cxa_demangle keeps its work on the stack: about 86 bytes per character of the
 * mangled name, measured on gcc 12's libstdc++ (a 742-character template name used 63 KiB, an
 * 804-character one 68 KiB; names from about 1 000 characters on are refused by it with status -2
 * after a few KiB). Template-heavy code (nested std:: types, Eigen, CUTLASS, PyTorch's kernels)
 * makes such names, and the thread that demangles may be ours (256 KiB) or any of the
 * application's, whose stack may be small: a name is demangled only when the thread has room
 * for 128 bytes per character plus 32 KiB to spare, and never past VW_DEMANGLE_MAX characters;
 * otherwise the mangled name stands. The room is measured from the thread's own stack bounds,
 * asked once per thread (the library's own thread says its own: asking mallocs).
 * The demangler is looked up at set-up and before each report (libstdc++ may come later, with
 * a framework), never on the library's thread: a failed dlsym mallocs its error. */
#include "demangle.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "platform.h"

#define VW_DEMANGLE_MAX 4096
#define BYTES_PER_CHAR 128
#define SPARE (32 * 1024)

typedef char *(*demangle_fn)(const char *, char *, size_t *, int *);

static VW_TLS uintptr_t stack_low; /* the lowest usable address of this thread's stack; 0: not asked */
static VW_TLS int stack_known;     /* 1 known, -1 could not be asked */

void demangle_thread_stack(void *low)
{
    stack_low = (uintptr_t)low;
    stack_known = 1;
}

static size_t stack_room(void)
{
    char here;
    if (!stack_known) {
        pthread_attr_t attr;
        void *addr;
        size_t size;
        stack_known = -1;
        if (pthread_getattr_np(pthread_self(), &attr) == 0) {
            if (pthread_attr_getstack(&attr, &addr, &size) == 0 && addr) {
                size_t guard = 0;
                pthread_attr_getguardsize(&attr, &guard);
                stack_low = (uintptr_t)addr + guard;
                stack_known = 1;
            }
            pthread_attr_destroy(&attr);
        }
    }
    if (stack_known < 0 || (uintptr_t)&here <= stack_low)
        return 0;
    return (size_t)((uintptr_t)&here - stack_low);
}

static demangle_fn demangler; /* looked up by demangle_lookup */

/* libstdc++ found loaded outside the global scope; kept open, so the demangler taken from it
 * cannot be unloaded under us. */
static void *local_stdcxx;

void demangle_lookup(void)
{
    void *p = dlsym(RTLD_DEFAULT, "__cxa_demangle");
    if (!p) {
        /* A framework's libraries loaded with RTLD_LOCAL, as Python loads PyTorch's extension
         * modules, bring libstdc++ into their own scope only: the global one has no demangler
         * and PyTorch's frames stayed mangled (_ZN2at6native...). RTLD_NOLOAD finds the copy
         * that is there without ever loading one. */
        void *h = __atomic_load_n(&local_stdcxx, __ATOMIC_ACQUIRE);
        if (!h) {
            h = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_NOLOAD);
            void *none = NULL;
            if (h && !__atomic_compare_exchange_n(&local_stdcxx, &none, h, false, __ATOMIC_ACQ_REL,
                                                  __ATOMIC_ACQUIRE)) {
                dlclose(h); /* another thread's handle is kept */
                h = none;
            }
        }
        if (h)
            p = dlsym(h, "__cxa_demangle");
    }
    demangle_fn f;
    memcpy(&f, &p, sizeof(f));
    __atomic_store_n(&demangler, f, __ATOMIC_RELEASE);
}

char *demangle_symbol(const char *symbol)
{
    demangle_fn demangle = __atomic_load_n(&demangler, __ATOMIC_ACQUIRE);
    if (!demangle || !symbol || symbol[0] != '_' || symbol[1] != 'Z')
        return NULL;
    size_t len = strnlen(symbol, VW_DEMANGLE_MAX + 1);
    if (len > VW_DEMANGLE_MAX || stack_room() < len * BYTES_PER_CHAR + SPARE)
        return NULL;
    int status = -1;
    char *d = demangle(symbol, NULL, NULL, &status);
    if (status != 0) {
        free(d);
        return NULL;
    }
    return d;
}
