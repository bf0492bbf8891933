/* A library named like PyTorch's libc10_cuda.so and nothing else: loaded into a test program, it
 * makes the process look like a PyTorch process to the library, which then takes its allocator
 * to be PyTorch's caching allocator (flushes and retries) unless PYTORCH_CUDA_ALLOC_CONF picks
 * the cudaMallocAsync backend. */
int vw_test_c10_cuda_stub(void);
int vw_test_c10_cuda_stub(void)
{
    return 1;
}
