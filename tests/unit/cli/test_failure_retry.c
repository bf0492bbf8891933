/* test_failure_retry.c: which failure is the retry of another (model_failure_is_retry), so that
 * the views draw a failure and its retry that failed again as the one failure the application
 * saw, and the origin every view counts from (model_time_origin). */
#include <stdio.h>

#include "check.h"

#include "model.h"

static int failures;

static struct model_failure failure(int64_t t, int64_t thread, int64_t size,
                                    enum model_retried retried)
{
    return (struct model_failure){ .time_unix_ns = t,
                                   .api = "cudaMalloc",
                                   .device = { 0, true },
                                   .size = size,
                                   .oom = true,
                                   .retried = retried,
                                   .thread = { thread, true } };
}

int main(void)
{
    struct model_failure f[] = {
        failure(100, 1, 1024, RETRIED_FAILED),  /* the failure the application saw */
        failure(200, 2, 1024, RETRIED_UNKNOWN), /* another thread: not its retry */
        failure(300, 1, 1024, RETRIED_UNKNOWN), /* the retry, which failed again */
        failure(400, 1, 1024, RETRIED_UNKNOWN), /* after a failure nobody retried */
        failure(500, 3, 2048, RETRIED_FAILED),
        failure(600, 3, 4096, RETRIED_UNKNOWN), /* another size: a new failure */
    };
    struct model_report r = { .failures = f, .n_failures = sizeof f / sizeof f[0] };
    EXPECT(!model_failure_is_retry(&r, &f[0]));
    EXPECT(!model_failure_is_retry(&r, &f[1]));
    EXPECT(model_failure_is_retry(&r, &f[2]));
    EXPECT(!model_failure_is_retry(&r, &f[3]));
    EXPECT(!model_failure_is_retry(&r, &f[4]));
    EXPECT(!model_failure_is_retry(&r, &f[5]));
    /* on another device the same size is another failure */
    f[2].device.v = 1;
    EXPECT(!model_failure_is_retry(&r, &f[2]));

    /* every view counts from the process start, unknown when the report does not say */
    EXPECT(!model_time_origin(&r).known);
    r.process.start_unix_ns = (model_int){ 42, true };
    EXPECT(model_time_origin(&r).known && model_time_origin(&r).v == 42);
    if (failures)
        fprintf(stderr, "%d checks failed\n", failures);
    return failures ? 1 : 0;
}
