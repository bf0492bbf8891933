/* secure_probe.c: loads libvramwatch.so itself (dlopen, which a setuid program may still do, unlike
 * LD_PRELOAD) and asks it for a report, so that the library's own refusal in setuid programs is
 * what the test sees, not the loader's. Usage: secure_probe LIB [ARGS...]; the extra arguments
 * only end up in the report's argv. Exit 0: the library wrote a report; 3: it refused; 2: no
 * library. */
#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs("usage: secure_probe LIB [ARGS...]\n", stderr);
        return 2;
    }
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "secure_probe: %s\n", dlerror());
        return 2;
    }
    int (*dump)(const char *);
    void *sym = dlsym(lib, "vramwatch_dump");
    if (!sym)
        return 2;
    *(void **)&dump = sym;
    /* _exit: the status is all this program says, and a sanitizer's exit-time leak check cannot
     * run in a setuid process (it is not dumpable), which would replace the status. */
    /* "exit": the process's one report file, which the cases count (a dump on request would be
     * kept in a second file too) */
    _exit(dump("exit") == 0 ? 0 : 3);
}
