/* A call site whose C++ symbol is long, as template-heavy code makes them (nested std:: types,
 * Eigen, CUTLASS, PyTorch's own kernels): a variadic template function instantiated with
 * fourteen types of fifty-character names allocates, so the library's thread and its report
 * must describe a frame whose mangled name is about 770 characters.
 *
 * usage: longsym SECONDS   allocate 1 MiB at the long-named site, sleep, exit 0
 * Built with -rdynamic, so dladdr finds the symbol. */
#include <cuda_runtime_api.h>
#include <cxxabi.h>
#include <cstdio>
#include <cstdlib>
#include <unistd.h>

struct first_type_with_a_long_descriptive_name_for_the_test_ {};
struct second_type_with_a_long_descriptive_name_for_the_test_ {};
struct third_type_with_a_long_descriptive_name_for_the_test_ {};
struct fourth_type_with_a_long_descriptive_name_for_the_test_ {};
struct fifth_type_with_a_long_descriptive_name_for_the_test_ {};
struct sixth_type_with_a_long_descriptive_name_for_the_test_ {};
struct seventh_type_with_a_long_descriptive_name_for_the_test_ {};
struct eighth_type_with_a_long_descriptive_name_for_the_test_ {};
struct ninth_type_with_a_long_descriptive_name_for_the_test_ {};
struct tenth_type_with_a_long_descriptive_name_for_the_test_ {};
struct eleventh_type_with_a_long_descriptive_name_for_the_test_ {};
struct twelfth_type_with_a_long_descriptive_name_for_the_test_ {};
struct thirteenth_type_with_a_long_descriptive_name_for_the_test_ {};
struct fourteenth_type_with_a_long_descriptive_name_for_the_test_ {};

template <typename... T> __attribute__((noinline)) void *site()
{
    void *p = nullptr;
    if (cudaMalloc(&p, 1 << 20) != cudaSuccess)
        std::exit(3);
    asm volatile("" ::: "memory"); /* not a tail call: the frame stays */
    return p;
}

int main(int argc, char **argv)
{
    void *p = site<first_type_with_a_long_descriptive_name_for_the_test_,
                   second_type_with_a_long_descriptive_name_for_the_test_,
                   third_type_with_a_long_descriptive_name_for_the_test_,
                   fourth_type_with_a_long_descriptive_name_for_the_test_,
                   fifth_type_with_a_long_descriptive_name_for_the_test_,
                   sixth_type_with_a_long_descriptive_name_for_the_test_,
                   seventh_type_with_a_long_descriptive_name_for_the_test_,
                   eighth_type_with_a_long_descriptive_name_for_the_test_,
                   ninth_type_with_a_long_descriptive_name_for_the_test_,
                   tenth_type_with_a_long_descriptive_name_for_the_test_,
                   eleventh_type_with_a_long_descriptive_name_for_the_test_,
                   twelfth_type_with_a_long_descriptive_name_for_the_test_,
                   thirteenth_type_with_a_long_descriptive_name_for_the_test_,
                   fourteenth_type_with_a_long_descriptive_name_for_the_test_>();
    /* libstdc++ linked and loaded, and with it the demangler, as in any program that uses the
     * C++ standard library (a reference the compiler cannot drop) */
    char *(*volatile demangler)(const char *, char *, size_t *, int *) = abi::__cxa_demangle;
    std::printf("allocated: %s\n", p && demangler ? "yes" : "no");
    std::fflush(stdout);
    usleep((useconds_t)(atof(argc > 1 ? argv[1] : "3") * 1e6));
    return 0;
}
