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

/* Largest file read. The library lists at most 1000 live entries and 5000 call sites with live
 * memory, plus those a failure, live entry or other record names (lib/report/report.c); of 32
 * frames each, that is a few tens of MiB. A file over this is refused before it is read, so a
 * huge or endless input costs neither minutes nor gigabytes. A job file of very many ranks can
 * exceed it: merge fewer reports at a time. */
#define JSON_MAX_FILE_MIB 256
#define JSON_MAX_FILE ((size_t)JSON_MAX_FILE_MIB * 1024 * 1024)

/* Most values (numbers, strings, true/false/null, arrays, objects; an object member's name is
 * part of its value) in one file. The file limit alone does not bound memory: cJSON spends about
 * 80 bytes on each value's node, 32 or more on each name and string, and we 32 or more on each
 * number's literal, so 100 MB of "[0,0,...]" took 6.3 GB. Counted before cJSON builds anything:
 * with at most 8 million values, a file at the 256 MiB limit costs at most its text, a copy of
 * its strings and about 150 bytes a value (1.6 GB for the worst shape measured). The tests'
 * largest report, 10 000 call sites of 32 frames and 1000 live entries (more call sites than the
 * library lists, above), holds about 0.7 million values; a merged job of more than about ten
 * such ranks holds more: merge fewer at a time. */
#define JSON_MAX_VALUES 8000000

/* Reads and parses a whole file. On failure returns NULL and puts a short reason in err
 * ("not valid JSON at line 3, column 14"). Number nodes carry their literal text in valuestring
 * (cJSON itself only keeps a double, which cannot hold a nanosecond timestamp exactly). */
cJSON *json_load_file(const char *path, struct strbuf *err);

enum json_int_status {
    JSON_INT_OK,
    JSON_INT_NOT_NUMBER,
    JSON_INT_FRACTION, /* a number, but not a whole one */
    JSON_INT_RANGE,    /* a whole number outside int64 */
};
/* The exact integer value of a number node. */
enum json_int_status json_int(const cJSON *item, int64_t *out);

/* Pretty-prints with two-space indentation and a final newline; numbers keep their digits. */
void json_print(FILE *f, const cJSON *item);

/* A number node with exact digits, for building output from integers we hold. */
cJSON *json_new_int(int64_t v);

#endif
