/* json.h: JSON text in and out for the vramwatch tool, keeping every number's exact digits. */
#ifndef VRAMWATCH_TOOL_JSON_H
#define VRAMWATCH_TOOL_JSON_H

#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>

#include "util.h"

/* Deepest nesting accepted. A report is about six levels deep; the bound keeps every recursive
 * walk (cJSON's, ours) shallow whatever the input. */
#define JSON_MAX_DEPTH 64

/* Reads and parses a whole file. On failure returns NULL and puts a short reason in err
 * ("not valid JSON at line 3, column 14"). Number nodes carry their literal text in valuestring
 * (cJSON itself only keeps a double, which cannot hold a nanosecond timestamp exactly). */
cJSON *json_load_file(const char *path, struct strbuf *err);

enum json_int_status {
	JSON_INT_OK,
	JSON_INT_NOT_NUMBER,
	JSON_INT_FRACTION,  /* a number, but not a whole one */
	JSON_INT_RANGE,     /* a whole number outside int64 */
};
/* The exact integer value of a number node. */
enum json_int_status json_int(const cJSON *item, int64_t *out);

/* Pretty-prints with two-space indentation and a final newline; numbers keep their digits. */
void json_print(FILE *f, const cJSON *item);

/* A number node with exact digits, for building output from integers we hold. */
cJSON *json_new_int(int64_t v);

#endif
