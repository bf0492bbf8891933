/* The checks of the plain-C test programs (those not written for Criterion).
 *
 * Two kinds, because the programs are of two kinds:
 *
 *   CHECK(cond, code)  a step of a program that a runner drives (tests/gauntlet, tests/integration):
 *                      the first step that fails ends the program with exit status `code`, so the
 *                      runner knows which step it was without parsing the message.
 *   EXPECT(cond)       a table of cases in one program (tests/unit/cli): a failure is counted in the
 *                      file's own `static int failures;` and the program goes on, so one run lists
 *                      every case that is wrong; main() ends with a non-zero status when failures > 0.
 *
 * Both print the condition as written and where it is. The program's name comes first in
 * CHECK's message (program_invocation_short_name, a GNU extension: the project builds with
 * _GNU_SOURCE), so a runner that starts several programs can tell whose step failed.
 */
#ifndef VRAMWATCH_TESTS_CHECK_H
#define VRAMWATCH_TESTS_CHECK_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond, code)                                                                 \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            fprintf(stderr, "%s: step %d failed: %s (line %d)\n",                         \
                    program_invocation_short_name, (code), #cond, __LINE__);              \
            exit(code);                                                                   \
        }                                                                                 \
    } while (0)

#define EXPECT(cond)                                                                      \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);      \
            failures++;                                                                   \
        }                                                                                 \
    } while (0)

#endif
