/* CUDA error names by code, for reports: static strings, no call into CUDA. */
#ifndef VW_ERRNAMES_H
#define VW_ERRNAMES_H

/* NULL for a code the table does not know. */
const char *vw_runtime_error_name(int code);
const char *vw_driver_error_name(int code);

#endif
