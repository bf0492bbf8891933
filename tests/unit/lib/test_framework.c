/* Unit tests of PyTorch's out-of-memory message parser, the kept verdict and its JSON field. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "framework.h"
#include "jsonw.h"

#define MiB (1ll << 20)
#define GiB (1ll << 30)

/* Expected figures; -1 unknown. Sizes were computed as round(figure × unit) from the text. */
struct want {
    const char *format;
    int device;
    int64_t requested, capacity, free, process_in_use, allowed, allocated, reserved_unallocated,
            private_pools;
};

static struct framework_verdict v; /* 4 KiB: kept off the test's stack */

static void check(const char *msg, bool recognised, struct want w)
{
    cr_assert_eq(framework_parse_pytorch(msg, &v), recognised, "recognised: %s", msg);
    if (w.format)
        cr_assert_str_eq(v.format, w.format);
    else
        cr_assert_null(v.format);
    cr_assert_eq(v.device, w.device);
    cr_assert_eq(v.requested, w.requested, "requested %lld", (long long)v.requested);
    cr_assert_eq(v.capacity, w.capacity, "capacity %lld", (long long)v.capacity);
    cr_assert_eq(v.free, w.free, "free %lld", (long long)v.free);
    cr_assert_eq(v.process_in_use, w.process_in_use, "in use %lld", (long long)v.process_in_use);
    cr_assert_eq(v.allowed, w.allowed, "allowed %lld", (long long)v.allowed);
    cr_assert_eq(v.allocated, w.allocated, "allocated %lld", (long long)v.allocated);
    cr_assert_eq(v.reserved_unallocated, w.reserved_unallocated, "reserved-unallocated %lld",
                 (long long)v.reserved_unallocated);
    cr_assert_eq(v.private_pools, w.private_pools, "private pools %lld",
                 (long long)v.private_pools);
    if (strlen(msg) < VW_FRAMEWORK_MESSAGE_MAX)
        cr_assert_str_eq(v.message, msg);
}

Test(framework, current_format_plain)
{
    check("CUDA out of memory. Tried to allocate 256.00 MiB. GPU 0 has a total capacity of 15.78 GiB "
          "of which 186.12 MiB is free. Including non-PyTorch memory, this process has 15.59 GiB memory "
          "in use. Of the allocated memory 14.21 GiB is allocated by PyTorch, and 1.02 GiB is reserved "
          "by PyTorch but unallocated. If reserved but unallocated memory is large try setting "
          "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation "
          "for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)",
          true,
          (struct want){ "current", 0, 256 * MiB, 16943645983, 195160965, 16739635036, -1,
                         15257871319, 1095216660, -1 });
}

Test(framework, current_format_every_clause)
{
    /* Other processes on the card, a per-process fraction, CUDA graph pools, bytes and KiB,
     * and the Python exception name in front. */
    check("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 512 bytes. GPU 3 has a total "
          "capacity of 79.15 GiB of which 1.50 KiB is free. Process 4021 has 30.00 GiB memory in use. "
          "Including non-PyTorch memory, this process has 49.14 GiB memory in use. Process 4100 has "
          "12.50 MiB memory in use. 40.00 GiB allowed; Of the allocated memory 38.50 GiB is allocated by "
          "PyTorch, with 2.25 GiB allocated in private pools (e.g., CUDA Graphs), and 600.00 KiB is "
          "reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting "
          "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.",
          true,
          (struct want){ "current", 3, 512, 84986665370, 1536, 52763673231, 40 * GiB, 41339060224,
                         614400, 2415919104 });
}

Test(framework, current_format_without_process_figure)
{
    /* Without NVML PyTorch leaves out the sentence about this process. A C++ backtrace follows. */
    check("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 has a total capacity of 23.64 GiB of "
          "which 1.00 KiB is free. Of the allocated memory 20.00 MiB is allocated by PyTorch, and "
          "1024 bytes is reserved by PyTorch but unallocated. If reserved but unallocated memory is "
          "large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.\n"
          "Exception raised from malloc at ../c10/cuda/CUDACachingAllocator.cpp:1133 (most recent call "
          "first):\nframe #0: c10::Error::Error(...) + 0x57 (0x7f1c in libc10.so)\n",
          true,
          (struct want){ "current", 1, 2 * GiB, 25383256719, 1024, -1, -1, 20 * MiB, 1024, -1 });
}

Test(framework, current_format_of_pytorch_2_1)
{
    /* 2.1 misspelled "capacity", and a full card says "0 bytes". */
    check("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 27.12 GiB. GPU 0 has a total "
          "capacty of 11.99 GiB of which 0 bytes is free. Of the allocated memory 16.16 GiB is allocated by "
          "PyTorch, and 144.59 MiB is reserved by PyTorch but unallocated. If reserved but unallocated "
          "memory is large try setting max_split_size_mb to avoid fragmentation.  See documentation for "
          "Memory Management and PYTORCH_CUDA_ALLOC_CONF",
          true,
          (struct want){ "current", 0, 29119878267, 12874164470, 0, -1, -1, 17351667876, 151613604,
                         -1 });
}

Test(framework, current_format_truncated)
{
    check("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.64 GiB of "
          "which 1.2",
          true, (struct want){ "current", 0, 2 * GiB, 25383256719, -1, -1, -1, -1, -1, -1 });
    check("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.64 GiB of "
          "which 1.00 KiB is free. Including non-PyTorch memory, this process has 22.00 GiB memory in "
          "use. Of the allocated memory 20.00 MiB is allocated by PyTorch, and 1",
          true,
          (struct want){ "current", 0, 2 * GiB, 25383256719, 1024, 22 * GiB, -1, 20 * MiB, -1,
                         -1 });
}

Test(framework, format_1x)
{
    check("RuntimeError: CUDA out of memory. Tried to allocate 256.00 MiB (GPU 0; 16.00 GiB total "
          "capacity; 14.23 GiB already allocated; 124.56 MiB free; 14.50 GiB reserved in total by "
          "PyTorch) If reserved memory is >> allocated memory try setting max_split_size_mb to avoid "
          "fragmentation.  See documentation for Memory Management and PYTORCH_CUDA_ALLOC_CONF",
          true,
          (struct want){ "1.x", 0, 256 * MiB, 16 * GiB, 130610627, -1, -1, 15279346156,
                         15569256448 - 15279346156, -1 });
}

Test(framework, format_1x_allowed)
{
    check("File \"/root/train.py\", line 12, in <module>: CUDA out of memory. Tried to allocate 20.00 MiB "
          "(GPU 1; 7.79 GiB total capacity; 3.12 GiB already allocated; 3.50 GiB free; 3.90 GiB allowed; "
          "3.25 GiB reserved in total by PyTorch)",
          true,
          (struct want){ "1.x", 1, 20 * MiB, 8364448809, 3758096384, -1, 4187593114, 3350074491,
                         3489660928 - 3350074491, -1 });
    /* Before 1.4 the last clause was what was cached beyond the allocated memory. */
    check("RuntimeError: CUDA out of memory. Tried to allocate 1024.00 KiB (GPU 0; 11.17 GiB total "
          "capacity; 10.90 GiB already allocated; 576.00 KiB free; 30.96 MiB cached)",
          true,
          (struct want){ "1.x", 0, 1048576, 11993696174, 589824, -1, -1, 11703785882, 32463913,
                         -1 });
    /* Reserved below allocated cannot be: no figure rather than a negative one. */
    check("CUDA out of memory. Tried to allocate 1.25 TiB (GPU 2; 16.00 GiB total capacity; 3.00 GiB "
          "already allocated; 0.10 GiB free; 2.00 GiB reserved in total by PyTorch)",
          true,
          (struct want){ "1.x", 2, 1374389534720, 16 * GiB, 107374182, -1, -1, 3 * GiB, -1, -1 });
}

Test(framework, not_an_out_of_memory_message)
{
    struct want none = { NULL, -1, -1, -1, -1, -1, -1, -1, -1, -1 };
    check("CUDA error: an illegal memory access was encountered", false, none);
    check("XPU out of memory. Tried to allocate 2.00 GiB (GPU 0; 16.00 GiB total capacity)", false,
          none);
    check("CUDA out of memory. Tried to allocate 2.00 GiB", false, none);
    check("CUDA out of memory. Tried to allocate 2.00 GiB, then gave up", false, none);
    check("CUDA out of memory. Tried to allocate lots. GPU 0 has", false, none);
    check("CUDA out of memory. Tried to allocate 17179869184.00 GiB, then gave up", false, none);
    check("Allocation on device 0 would exceed", false, none);
    check("Allocation on device 0 went well. (out of memory)", false, none);
    check("Allocation on device xy would exceed allowed memory. (out of memory)", false, none);
    check("", false, none);
    cr_assert_not(framework_parse_pytorch(NULL, &v));
    cr_assert_str_eq(v.message, "");
}

/* 2^64 - 1 bytes (NVML's "not available") prints as 17179869184.00 GiB; a size that wrapped
 * around prints near it. Such a figure is unknown, and the sentence around it still reads. */
Test(framework, sizes_too_large_are_unknown)
{
    check("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of "
          "which 1.06 GiB is free. Process 51234 has 17179869184.00 GiB memory in use. Including "
          "non-PyTorch memory, this process has 17179869184.00 GiB memory in use. Of the allocated "
          "memory 75.20 GiB is allocated by PyTorch, and 1.39 GiB is reserved by PyTorch but "
          "unallocated. If reserved but unallocated memory is large try setting "
          "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.",
          true,
          (struct want){ "current", 0, 2 * GiB, 84986665370, 1138166333, -1, -1, 80745385165,
                         1492501135, -1 });
    /* A size_t that wrapped around in the request (PyTorch 1.4): the rest still reads. */
    check("CUDA out of memory. Tried to allocate 17179869183.95 GiB (GPU 0; 23.65 GiB total capacity; "
          "3.15 GiB already allocated; 18.80 GiB free; 3.15 GiB reserved in total by PyTorch)",
          true, (struct want){ "1.x", 0, -1, 25393994138, 20186346291, -1, -1, 3382286746, 0, -1 });
    check("CUDA out of memory. Tried to allocate 99999999999999999999.00 GiB. GPU 0 has", true,
          (struct want){ "current", 0, -1, -1, -1, -1, -1, -1, -1, -1 });
    check("CUDA out of memory. Tried to allocate 9000000000.00 GiB. GPU 0 has", true,
          (struct want){ "current", 0, -1, -1, -1, -1, -1, -1, -1, -1 });
    /* The largest that fits is a figure. */
    check("CUDA out of memory. Tried to allocate 9223372036854775807 bytes. GPU 0 has", true,
          (struct want){ "current", 0, INT64_MAX, -1, -1, -1, -1, -1, -1, -1 });
    check("CUDA out of memory. Tried to allocate 9223372036854775808 bytes. GPU 0 has", true,
          (struct want){ "current", 0, -1, -1, -1, -1, -1, -1, -1, -1 });
}

/* PyTorch 2.3 streamed the device index as an int8_t: a raw byte, never a wrong device. */
Test(framework, device_written_as_a_raw_byte)
{
    check("CUDA out of memory. Tried to allocate 20.00 MiB. GPU \x01 has a total capacity of 23.65 GiB of "
          "which 6.06 MiB is free. Including non-PyTorch memory, this process has 23.63 GiB memory in "
          "use. Of the allocated memory 22.88 GiB is allocated by PyTorch, and 318.95 MiB is reserved "
          "by PyTorch but unallocated.",
          true,
          (struct want){ "current", -1, 20 * MiB, 25393994138, 6354371, 25372519301, -1,
                         24567212933, 334443315, -1 });
    /* GPU 9 is a tab, GPU 10 a line break, GPU 32 a space. */
    check("CUDA out of memory. Tried to allocate 1.00 KiB. GPU \t has a total capacity of 2.00 GiB of which "
          "0 bytes is free.",
          true, (struct want){ "current", -1, 1024, 2 * GiB, 0, -1, -1, -1, -1, -1 });
    check("CUDA out of memory. Tried to allocate 1.00 KiB. GPU \n has a total capacity of 2.00 GiB",
          true, (struct want){ "current", -1, 1024, 2 * GiB, -1, -1, -1, -1, -1, -1 });
    check("CUDA out of memory. Tried to allocate 1.00 KiB. GPU   has a total capacity of 2.00 GiB",
          true, (struct want){ "current", -1, 1024, 2 * GiB, -1, -1, -1, -1, -1, -1 });
    /* GPU 0 is a NUL: the C string ends there. What was before it is still read. */
    check("CUDA out of memory. Tried to allocate 3725.29 GiB. GPU ", true,
          (struct want){ "current", -1, 3999999679529, -1, -1, -1, -1, -1, -1, -1 });
    /* A byte not followed by the sentence is not taken for a device, nor is anything after it. */
    check("CUDA out of memory. Tried to allocate 1.00 KiB. GPU ab has a total capacity of 2.00 GiB",
          true, (struct want){ "current", -1, 1024, -1, -1, -1, -1, -1, -1, -1 });
    check("CUDA out of memory. Tried to allocate 1.00 KiB. GPU x", true,
          (struct want){ "current", -1, 1024, -1, -1, -1, -1, -1, -1, -1 });
    /* Digits cut short still name the device. */
    check("CUDA out of memory. Tried to allocate 1.00 KiB. GPU 12", true,
          (struct want){ "current", 12, 1024, -1, -1, -1, -1, -1, -1, -1 });
}

/* The cudaMallocAsync backend (c10/cuda/CUDAMallocAsyncAllocator.cpp). */
Test(framework, cuda_malloc_async_format)
{
    /* No limit set: the limit prints as 2^64 - 1 bytes, unknown. */
    check("Allocation on device 5 would exceed allowed memory. (out of memory)\n"
          "Currently allocated     : 54.14 GiB\n"
          "Requested               : 686.41 MiB\n"
          "Device limit            : 79.35 GiB\n"
          "Free (according to CUDA): 27.19 MiB\n"
          "PyTorch limit (set by user-supplied memory fraction)\n"
          "                        : 17179869184.00 GiB\n"
          "Exception raised from mallocAsync at ../c10/cuda/CUDAMallocAsyncAllocator.cpp:533 (most recent "
          "call first):\n",
          true,
          (struct want){ "cudaMallocAsync", 5, 719753052, 85201413734, 28510781, -1, -1,
                         58132382351, -1, -1 });
    /* A limit set, the Python exception name in front, the device as a raw byte (2.3 to 2.9). */
    check("torch.OutOfMemoryError: Allocation on device \x01 would exceed allowed memory. (out of memory)\n"
          "Currently allocated     : 7.25 GiB\n"
          "Requested               : 1.00 GiB\n"
          "Device limit            : 15.77 GiB\n"
          "Free (according to CUDA): 8.31 GiB\n"
          "PyTorch limit (set by user-supplied memory fraction)\n"
          "                        : 7.88 GiB",
          true,
          (struct want){ "cudaMallocAsync", -1, GiB, 16932908564, 8922794557, -1, 8461085573,
                         7784628224, -1, -1 });
    /* Device 0 as a raw byte: the C string ends before the figures. */
    check("Allocation on device ", true,
          (struct want){ "cudaMallocAsync", -1, -1, -1, -1, -1, -1, -1, -1, -1 });
    /* Cut short: what was read is kept. */
    check("Allocation on device 2 would exceed allowed memory. (out of memory)\n"
          "Currently allocated     : 512 bytes\n"
          "Requested               : 2.0",
          true, (struct want){ "cudaMallocAsync", 2, -1, -1, -1, -1, -1, 512, -1, -1 });
    check("Allocation on device 2 would exceed allowed memory. (out of memory)\nCurrently", true,
          (struct want){ "cudaMallocAsync", 2, -1, -1, -1, -1, -1, -1, -1, -1 });
}

Test(framework, exception_types)
{
    cr_assert_eq(framework_exception_kind("N3c1016OutOfMemoryErrorE"), FRAMEWORK_EXC_OOM);
    cr_assert_eq(framework_exception_kind("N3c1020CUDAOutOfMemoryErrorE"), FRAMEWORK_EXC_CUDA_OOM);
    cr_assert_eq(framework_exception_kind("N3c105ErrorE"), FRAMEWORK_EXC_ERROR);
    const char *others[] = { "N3c1010IndexErrorE", "N3c1016OutOfMemoryErrorE2",  "N3c10", "N3c1",
                             "St13runtime_error",  "N5torch3jit13JITExceptionE", "",      NULL };
    for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++)
        cr_assert_eq(framework_exception_kind(others[i]), FRAMEWORK_EXC_NONE, "%s", others[i]);
    cr_assert_str_eq(framework_exception_name(FRAMEWORK_EXC_OOM), "c10::OutOfMemoryError");
    cr_assert_str_eq(framework_exception_name(FRAMEWORK_EXC_CUDA_OOM), "c10::CUDAOutOfMemoryError");
    cr_assert_str_eq(framework_exception_name(FRAMEWORK_EXC_ERROR), "c10::Error");
    cr_assert_null(framework_exception_name(FRAMEWORK_EXC_NONE));
    cr_assert_null(framework_exception_name((enum framework_exception)99));
}

Test(framework, plain_error_only_when_it_starts_as_the_allocator_message)
{
    cr_assert(framework_plain_error_is_oom(
            "CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 1.96 "
            "GiB total capacity; ...)"));
    cr_assert_not(
            framework_plain_error_is_oom("Expected one of cpu, cuda device type at start of device "
                                         "string: CUDA out of memory. Tried to allocate 1.00 KiB"));
    cr_assert_not(framework_plain_error_is_oom("CUDA error: out of memory"));
    cr_assert_not(framework_plain_error_is_oom("CUDA out of memory. Tried to allocat"));
    cr_assert_not(framework_plain_error_is_oom(""));
    cr_assert_not(framework_plain_error_is_oom(NULL));
}

Test(framework, string_table_names_a_type_of_its_own)
{
    static const char with_oom[] = "\0_ZN3c105ErrorD2Ev\0_ZTIN3c1016OutOfMemoryErrorE\0cudaMalloc";
    static const char with_cuda_oom[] = "\0_ZTVN3c1020CUDAOutOfMemoryErrorE\0";
    static const char plain[] = "\0_ZN3c105ErrorC1ENS_14SourceLocationERKSs\0_ZTIN3c105ErrorE\0";
    cr_assert(framework_names_oom_type(with_oom, sizeof(with_oom) - 1));
    cr_assert(framework_names_oom_type(with_cuda_oom, sizeof(with_cuda_oom) - 1));
    cr_assert_not(framework_names_oom_type(plain, sizeof(plain) - 1));
    /* Only the given bytes are searched. */
    cr_assert_not(framework_names_oom_type(with_cuda_oom, 12));
    cr_assert_not(framework_names_oom_type(NULL, 0));
}

Test(framework, long_message_cut_at_a_character)
{
    static char msg[3 * VW_FRAMEWORK_MESSAGE_MAX];
    const char *head =
            "CUDA out of memory. Tried to allocate 1.00 KiB (GPU 0; 2.00 GiB total capacity) ";
    size_t n = strlen(head);
    memcpy(msg, head, n);
    /* Three-byte characters (U+00E9 is two, U+6587 three) so one straddles the limit. */
    while (n + 3 < sizeof(msg) - 1) {
        memcpy(msg + n, "\xe6\x96\x87", 3);
        n += 3;
    }
    msg[n] = 0;
    cr_assert(framework_parse_pytorch(msg, &v));
    cr_assert_eq(v.requested, 1024);
    cr_assert_eq(v.capacity, 2 * GiB);
    size_t len = strlen(v.message);
    cr_assert_lt(len, VW_FRAMEWORK_MESSAGE_MAX);
    cr_assert_geq(len, VW_FRAMEWORK_MESSAGE_MAX - 3);
    cr_assert_eq((len - strlen(head)) % 3, 0, "cut inside a character: %zu", len);
    cr_assert_eq(memcmp(v.message, msg, len), 0);
}

/* Random bytes, and real messages cut anywhere and damaged anywhere: never a crash, never a
 * read past the end (each input is its own exact-size allocation for the sanitizers), and any
 * figure found is not negative other than -1. */
Test(framework, fuzz)
{
    static const char *seeds[] = {
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 512 bytes. GPU 3 has a total "
        "capacity of 79.15 GiB of which 1.50 KiB is free. Process 4021 has 30.00 GiB memory in use. "
        "Including non-PyTorch memory, this process has 49.14 GiB memory in use. 40.00 GiB allowed; Of "
        "the allocated memory 38.50 GiB is allocated by PyTorch, with 2.25 GiB allocated in private "
        "pools (e.g., CUDA Graphs), and 600.00 KiB is reserved by PyTorch but unallocated.",
        "CUDA out of memory. Tried to allocate 256.00 MiB (GPU 0; 16.00 GiB total capacity; 14.23 GiB "
        "already allocated; 124.56 MiB free; 3.90 GiB allowed; 14.50 GiB reserved in total by PyTorch)",
        "Allocation on device 1 would exceed allowed memory. (out of memory)\nCurrently allocated     : "
        "7.25 GiB\nRequested               : 1.00 GiB\nDevice limit            : 15.77 GiB\nFree "
        "(according to CUDA): 8.31 GiB\nPyTorch limit (set by user-supplied memory fraction)\n"
        "                        : 17179869184.00 GiB",
    };
    static const char alphabet[] = "0123456789. ;()GiBMKTbytesCUDA:\n\x01";
    unsigned seed = 20241130;
    for (int i = 0; i < 200000; i++) {
        seed = seed * 1103515245u + 12345u;
        unsigned r = seed >> 8;
        const char *s = seeds[(r >> 1) % 3];
        size_t slen = strlen(s), len;
        char *buf;
        if (r % 5 == 0) {
            /* Random bytes, NUL-free so the whole length is read. */
            len = (r >> 3) % 300;
            buf = malloc(len + 1);
            for (size_t k = 0; k < len; k++) {
                seed = seed * 1103515245u + 12345u;
                buf[k] = (char)(1 + (seed >> 16) % 255);
            }
        } else {
            len = (r >> 3) % (slen + 1);
            buf = malloc(len + 1);
            memcpy(buf, s, len);
            for (int k = 0; len && k < (int)(r % 4); k++) {
                seed = seed * 1103515245u + 12345u;
                buf[(seed >> 8) % len] = alphabet[(seed >> 20) % (sizeof(alphabet) - 1)];
            }
        }
        buf[len] = 0;
        framework_parse_pytorch(buf, &v);
        const int64_t *figs[] = { &v.requested,
                                  &v.capacity,
                                  &v.free,
                                  &v.process_in_use,
                                  &v.allowed,
                                  &v.allocated,
                                  &v.reserved_unallocated,
                                  &v.private_pools };
        for (size_t k = 0; k < sizeof(figs) / sizeof(figs[0]); k++)
            cr_assert_geq(*figs[k], -1);
        cr_assert_geq(v.device, -1);
        cr_assert_eq(strcmp(v.message, buf), 0);
        free(buf);
    }
}

/* ---------- the kept verdict and its field ---------- */

static char out[1 << 15];

static const char *render(void)
{
    FILE *f = tmpfile();
    static struct jsonw w;
    jsonw_init(&w, fileno(f));
    jsonw_obj_begin(&w, NULL);
    framework_write(&w);
    jsonw_obj_end(&w);
    cr_assert(jsonw_finish(&w));
    rewind(f);
    size_t n = fread(out, 1, sizeof(out) - 1, f);
    out[n] = 0;
    fclose(f);
    return out;
}

Test(framework, field_is_null_until_a_verdict)
{
    framework_reset();
    cr_assert_str_eq(render(), "{\"framework\":null}\n");
    cr_assert_eq(framework_count(), 0);
}

Test(framework, field_holds_the_latest_verdict)
{
    framework_reset();
    framework_parse_pytorch("CUDA out of memory. Tried to allocate 1.00 KiB (GPU 0; 2.00 GiB total "
                            "capacity)",
                            &v);
    framework_store(&v);
    framework_parse_pytorch(
            "CUDA out of memory. Tried to allocate 256.00 MiB. GPU 0 has a total capacity "
            "of 15.78 GiB of which 186.12 MiB is free. Of the allocated memory 14.21 GiB "
            "is allocated by PyTorch, and 1.02 GiB is reserved by PyTorch but "
            "unallocated. \"quoted\"",
            &v);
    framework_store(&v);
    cr_assert_eq(framework_count(), 2);
    const char *s = render();
    /* Time and thread vary; everything else is exact. */
    const char *t = strstr(s, ",\"time_unix_ns\":");
    const char *c = strstr(s, ",\"count\":");
    cr_assert(t && c && t < c);
    char fixed[sizeof(out)];
    snprintf(fixed, sizeof(fixed), "%.*s%s", (int)(t - s), s, c);
    cr_assert_str_eq(
            fixed,
            "{\"framework\":{\"name\":\"pytorch\",\"exception\":\"c10::OutOfMemoryError\","
            "\"message\":\"CUDA out of memory. Tried to allocate 256.00 MiB. GPU 0 has a total "
            "capacity of 15.78 GiB of which 186.12 MiB is free. Of the allocated memory 14.21 GiB "
            "is allocated by PyTorch, and 1.02 GiB is reserved by PyTorch but unallocated. "
            "\\\"quoted\\\"\",\"format\":\"current\",\"count\":2,\"device\":0,"
            "\"requested_bytes\":268435456,\"capacity_bytes\":16943645983,"
            "\"free_bytes\":195160965,\"process_in_use_bytes\":null,\"allowed_bytes\":null,"
            "\"allocated_bytes\":15257871319,\"reserved_unallocated_bytes\":1095216660,"
            "\"private_pools_bytes\":null}}\n");
    cr_assert(strstr(s, ",\"thread\":"));

    /* The type thrown is named as the hook saw it. */
    v.exception = framework_exception_name(FRAMEWORK_EXC_CUDA_OOM);
    framework_store(&v);
    cr_assert(strstr(
            render(),
            "{\"framework\":{\"name\":\"pytorch\",\"exception\":\"c10::CUDAOutOfMemoryError\","));

    /* A message in no known format is still PyTorch's verdict: kept, with no figures. */
    framework_parse_pytorch("CUDA out of memory (cudaMallocAsync)", &v);
    framework_store(&v);
    s = render();
    cr_assert(strstr(s, "\"format\":null"));
    cr_assert(strstr(s, "\"exception\":\"c10::OutOfMemoryError\","));
    cr_assert(strstr(s, "\"count\":4,\"device\":null,\"requested_bytes\":null"));

    framework_reset();
    cr_assert_str_eq(render(), "{\"framework\":null}\n");
}
