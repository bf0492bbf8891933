/* CUDA error names by code, for reports: static strings, no call into CUDA. */
#ifndef VW_ERRNAMES_H
#define VW_ERRNAMES_H

/* NULL for a code the table does not know. */
const char *errnames_runtime(int code);
const char *errnames_driver(int code);

#endif
