/* Loads localcxx (its own C++ runtime inside) with RTLD_LOCAL and calls the function that throws
 * and catches; prints what it returned. The process has no other C++ runtime. */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "%s\n", dlerror());
        return 3;
    }
    int (*f)(void) = (int (*)(void))dlsym(h, "vw_test_throw_catch");
    if (!f)
        return 4;
    printf("%d\n", f());
    return 0;
}
