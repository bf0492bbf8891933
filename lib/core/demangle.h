/* C++ names for native frames (demangle.c): one rule for the report and the live-state file. */
#ifndef VW_DEMANGLE_H
#define VW_DEMANGLE_H

/* The demangled form of `symbol` (malloc'd, the caller frees it), or NULL: not a C++ name, no
 * demangler in the process, or no room for it on this thread's stack (the caller then shows the
 * mangled name). */
char *demangle_symbol(const char *symbol);
/* Find the process's demangler (libstdc++'s __cxa_demangle), if it has one by now. */
void demangle_lookup(void);
/* The calling thread's stack starts (lowest usable address) at `low`: for a thread whose stack
 * the library made itself. */
void demangle_thread_stack(void *low);

#endif
