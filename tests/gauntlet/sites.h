/* Many distinct call sites from one program: an allocation made at the end of a chain of calls
 * whose shape is the bits of a number, so n numbers give n different stacks (up to 2^SITE_BITS).
 * Shared by the fault and cost programs, which need large reports. */
#ifndef GAUNTLET_SITES_H
#define GAUNTLET_SITES_H

#include <stdint.h>

#define SITE_BITS 14

typedef void (*site_leaf_fn)(void *arg);

static volatile int sites_sink;
static void site_a(unsigned bits, int level, site_leaf_fn leaf, void *arg);
static void site_b(unsigned bits, int level, site_leaf_fn leaf, void *arg);

/* Two different functions, each calling both from two different instructions: every path is a
 * different list of return addresses. The empty asm after each call keeps it from being a tail
 * call (which would leave no frame); the different stores keep the two from being folded. */
static __attribute__((noinline)) void site_a(unsigned bits, int level, site_leaf_fn leaf, void *arg)
{
    sites_sink += 1;
    if (level == 0)
        leaf(arg);
    else if (bits & 1)
        site_a(bits >> 1, level - 1, leaf, arg);
    else
        site_b(bits >> 1, level - 1, leaf, arg);
    __asm__ volatile("" ::: "memory");
}

static __attribute__((noinline)) void site_b(unsigned bits, int level, site_leaf_fn leaf, void *arg)
{
    sites_sink += 2;
    if (level == 0)
        leaf(arg);
    else if (bits & 1)
        site_a(bits >> 1, level - 1, leaf, arg);
    else
        site_b(bits >> 1, level - 1, leaf, arg);
    __asm__ volatile("" ::: "memory");
}

/* Call leaf(arg) from call site number `site` (0 <= site < 2^SITE_BITS). */
static inline void site_call(unsigned site, site_leaf_fn leaf, void *arg)
{
    site_a(site, SITE_BITS, leaf, arg);
}

#endif
