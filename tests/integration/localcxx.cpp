// A library with its own copy of the C++ runtime (linked with -static-libstdc++), as some binary
// wheels ship, loaded in a local scope by a C program: its throws reach the library's
// __cxa_throw, and the real one is only in the library that threw.
#include <stdexcept>

extern "C" int vw_test_throw_catch(void)
{
    try {
        throw std::runtime_error("caught where it was thrown");
    } catch (const std::runtime_error &) {
        return 42;
    }
    return 0;
}
