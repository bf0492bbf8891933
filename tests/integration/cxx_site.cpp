/* A C++ library that allocates device memory from a function with a mangled name, loaded by a C
 * program with RTLD_LOCAL as Python loads PyTorch's extension modules: its libstdc++ is then not
 * in the global scope, where the library used to look for the demangler alone, so PyTorch's
 * frames were reported mangled (_ZN2at6native...). The report must name the frame
 * vwtest::Grabber<int>::grab(unsigned long). */
#include <cuda_runtime_api.h>
#include <cstddef>
#include <string>

namespace vwtest {
template <typename T> struct Grabber {
    __attribute__((noinline)) static int grab(std::size_t bytes)
    {
        void *p = nullptr;
        std::string why("uses libstdc++"); /* so the library needs libstdc++.so.6 */
        return cudaMalloc(&p, bytes) == cudaSuccess && !why.empty() ? 0 : 1;
    }
};
} // namespace vwtest

extern "C" int alloc_from_cxx(std::size_t bytes)
{
    return vwtest::Grabber<int>::grab(bytes);
}
