// Throws what PyTorch throws when its allocator runs out of memory, and checks the throw arrives
// unchanged; run under the preload by cxx_oom_check.py, which reads the verdict kept.
//
//   cxx_oom                      the current type and message, twice, and once in a forked child
//   cxx_oom throw TYPE FILE      one TYPE (c10::OutOfMemoryError, c10::CUDAOutOfMemoryError or
//                                c10::Error) whose message is FILE's bytes, as one release wrote it
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <sys/wait.h>
#include <typeinfo>
#include <unistd.h>
#include <utility>

// The same hierarchy as PyTorch's c10/util/Exception.h and, for 1.5 to 1.12,
// c10/cuda/CUDACachingAllocator.h (members differ; the hook relies only on the type's name and
// on what() being the first virtual function after the destructors).
namespace c10
{
class Error : public std::exception
{
  public:
    explicit Error(std::string msg) : msg_(std::move(msg))
    {
        last_constructed = this;
    }
    const char *what() const noexcept override
    {
        return msg_.c_str();
    }
    // Where the last exception object was built: the one caught must be that very object.
    static const void *last_constructed;

  private:
    std::string msg_;
};
const void *Error::last_constructed = nullptr;

class OutOfMemoryError : public Error
{
  public:
    using Error::Error;
};

class CUDAOutOfMemoryError : public Error
{
  public:
    using Error::Error;
};
} // namespace c10

// Written in one piece as PyTorch 2.1+ does; cxx_oom_check.py expects its figures.
static const char kMessage[] =
        "CUDA out of memory. Tried to allocate 256.00 MiB. GPU 0 has a total capacity of 15.78 GiB of "
        "which 186.12 MiB is free. Process 4021 has 1.25 GiB memory in use. Including non-PyTorch memory, "
        "this process has 14.31 GiB memory in use. 15.00 GiB allowed; Of the allocated memory 12.21 GiB "
        "is allocated by PyTorch, with 1.50 GiB allocated in private pools (e.g., CUDA Graphs), and "
        "1.02 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large "
        "try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.";

static int failures;

static void expect(bool ok, const char *what)
{
    if (!ok) {
        std::fprintf(stderr, "cxx_oom: %s\n", what);
        failures++;
    }
}

// Not inlined, so the throw really leaves a function, as it leaves libc10_cuda.so.
[[gnu::noinline]] static void allocate_batch(int batch)
{
    if (batch > 0)
        throw c10::OutOfMemoryError(kMessage);
}

[[gnu::noinline]] static void parse_config(const char *text)
{
    if (text)
        throw std::runtime_error(std::string("bad config: ") + text);
}

// The simulated runtime's allocator: a process writes reports only once it has made device
// allocation calls, as PyTorch has by the time its allocator runs out of memory.
extern "C" int cudaMalloc(void **ptr, size_t size);

// Under the preload, the report on disk at the moment the exception is caught must already
// hold PyTorch's verdict (written before the throw reached any handler).
static void report_holds_verdict()
{
    const char *dir = std::getenv("VRAMWATCH_DIR");
    if (!dir || !std::getenv("LD_PRELOAD") || std::getenv("VRAMWATCH_DISABLE"))
        return;
    char host[256] = "";
    gethostname(host, sizeof(host) - 1);
    for (char *c = host; *c; c++)
        if (!std::isalnum(static_cast<unsigned char>(*c)) && *c != '.' && *c != '-' && *c != '_')
            *c = '_';
    std::string path =
            std::string(dir) + "/vramwatch-" + host + "-" + std::to_string(getpid()) + ".json";
    std::FILE *f = std::fopen(path.c_str(), "r");
    expect(f != nullptr, "no report on disk when the exception was caught");
    if (!f)
        return;
    std::string text;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0)
        text.append(buf, n);
    std::fclose(f);
    expect(text.find("\"reason\":\"oom\"") != std::string::npos,
           "the report at the throw is not an oom report");
    expect(text.find("\"requested_bytes\":268435456") != std::string::npos,
           "the report at the throw lacks the verdict");
}

static void allocate_some()
{
    void *p = nullptr;
    expect(cudaMalloc(&p, 1 << 20) == 0, "cudaMalloc on the simulated GPU failed");
}

// Thrown from a function of its own, as the allocator throws from inside malloc. The message is
// kept as std::string, embedded NULs included: what() returns its c_str(), so a reader stops at
// the first NUL exactly as with PyTorch 2.3's device byte.
template <class E> [[gnu::noinline]] static void throw_as(const std::string &msg)
{
    throw E(msg);
}

template <class E> static int throw_one(const std::string &msg)
{
    bool caught = false;
    try {
        throw_as<E>(msg);
    } catch (c10::Error &e) {
        caught = true;
        expect(static_cast<const void *>(&e) == c10::Error::last_constructed,
               "not the object that was thrown");
        expect(std::strcmp(e.what(), msg.c_str()) == 0, "the message changed");
        expect(typeid(e) == typeid(E), "the type changed");
    }
    expect(caught, "not caught as c10::Error&");
    if (failures)
        return 1;
    std::puts("cxx_oom: the exception arrived unchanged");
    return 0;
}

static int throw_from_file(const char *type, const char *path)
{
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        std::fprintf(stderr, "cxx_oom: cannot read %s\n", path);
        return 2;
    }
    std::string msg((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    allocate_some();
    if (std::strcmp(type, "c10::OutOfMemoryError") == 0)
        return throw_one<c10::OutOfMemoryError>(msg);
    if (std::strcmp(type, "c10::CUDAOutOfMemoryError") == 0)
        return throw_one<c10::CUDAOutOfMemoryError>(msg);
    if (std::strcmp(type, "c10::Error") == 0)
        return throw_one<c10::Error>(msg);
    std::fprintf(stderr, "cxx_oom: unknown type %s\n", type);
    return 2;
}

int main(int argc, char **argv)
{
    if (argc == 4 && std::strcmp(argv[1], "throw") == 0)
        return throw_from_file(argv[2], argv[3]);
    if (argc != 1) {
        std::fprintf(stderr, "usage: cxx_oom [throw TYPE FILE]\n");
        return 2;
    }
    allocate_some();
    bool caught = false;
    try {
        allocate_batch(64);
    } catch (c10::Error &e) {
        caught = true;
        expect(static_cast<const void *>(&e) == c10::Error::last_constructed,
               "c10::Error&: not the object that was thrown");
        expect(std::strcmp(e.what(), kMessage) == 0, "c10::Error&: the message changed");
        expect(dynamic_cast<c10::OutOfMemoryError *>(&e) != nullptr,
               "c10::Error&: the type changed");
    }
    expect(caught, "c10::OutOfMemoryError was not caught as c10::Error&");
    report_holds_verdict();

    caught = false;
    try {
        allocate_batch(32);
    } catch (std::exception &e) {
        caught = true;
        expect(static_cast<const void *>(&e) == c10::Error::last_constructed,
               "std::exception&: not the object that was thrown");
        expect(std::strcmp(e.what(), kMessage) == 0, "std::exception&: the message changed");
        expect(dynamic_cast<c10::OutOfMemoryError *>(&e) != nullptr,
               "std::exception&: the type changed");
    }
    expect(caught, "c10::OutOfMemoryError was not caught as std::exception&");

    caught = false;
    try {
        parse_config("batch=x");
    } catch (c10::Error &) {
        expect(false, "std::runtime_error caught as c10::Error");
    } catch (std::runtime_error &e) {
        caught = true;
        expect(std::strcmp(e.what(), "bad config: batch=x") == 0,
               "std::runtime_error: the message changed");
    }
    expect(caught, "std::runtime_error was not caught");

    // A forked child throws once: its report must count its own verdict only, not the parent's.
    std::fflush(nullptr);
    pid_t child = fork();
    if (child == 0) {
        allocate_some();
        try {
            allocate_batch(16);
        } catch (c10::OutOfMemoryError &e) {
            _exit(std::strcmp(e.what(), kMessage) == 0 ? 0 : 1);
        }
        _exit(1);
    }
    int status = 0;
    expect(child > 0 && waitpid(child, &status, 0) == child && WIFEXITED(status) &&
                   WEXITSTATUS(status) == 0,
           "the forked child did not catch its exception");

    if (failures)
        return 1;
    std::puts("cxx_oom: every exception arrived unchanged");
    return 0;
}
