/* The report written on demand (reporting.c); reporting_write is declared in interpose.h,
 * where the shims, the API and the signal thread find it. */
#ifndef VW_REPORTING_H
#define VW_REPORTING_H

/* In a forked child: the report-gathering lock is made anew (its holder is not in the child). */
void reporting_after_fork_child(void);

#endif
