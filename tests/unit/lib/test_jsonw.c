/* Unit tests of the JSON writer: escaping, invalid UTF-8, numbers, structure. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "jsonw.h"

static char out[1 << 16];

static const char *render(void (*fill)(struct jsonw *))
{
    FILE *f = tmpfile();
    static struct jsonw w;
    jsonw_init(&w, fileno(f));
    fill(&w);
    cr_assert(jsonw_finish(&w));
    rewind(f);
    size_t n = fread(out, 1, sizeof(out) - 1, f);
    out[n] = 0;
    fclose(f);
    return out;
}

static void fill_escapes(struct jsonw *w)
{
    jsonw_obj_begin(w, NULL);
    jsonw_str(w, "q", "a\"b\\c\n\x01");
    jsonw_str(w, "utf8", "caf\xc3\xa9 \xe6\x98\xbe\xe5\xad\x98");
    jsonw_str(w, "bad", "x\xff\xc3(y\xed\xa0\x80z");
    jsonw_str(w, "none", NULL);
    jsonw_obj_end(w);
}

Test(jsonw, strings_are_always_valid_json)
{
    cr_assert_str_eq(
            render(fill_escapes),
            "{\"q\":\"a\\\"b\\\\c\\n\\u0001\",\"utf8\":\"caf\xc3\xa9 \xe6\x98\xbe\xe5\xad\x98\","
            "\"bad\":\"x\xef\xbf\xbd\xef\xbf\xbd(y\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbdz\","
            "\"none\":null}\n");
}

static void fill_numbers(struct jsonw *w)
{
    jsonw_obj_begin(w, NULL);
    jsonw_u64(w, "max", UINT64_MAX);
    jsonw_i64(w, "min", INT64_MIN);
    jsonw_i64(w, "zero", 0);
    jsonw_hex(w, "addr", 0x7f00deadbeefull);
    jsonw_hex(w, "zero_addr", 0);
    jsonw_arr_begin(w, "a");
    jsonw_bool(w, NULL, true);
    jsonw_obj_begin(w, NULL);
    jsonw_obj_end(w);
    jsonw_arr_end(w);
    jsonw_obj_end(w);
}

Test(jsonw, numbers_and_nesting)
{
    cr_assert_str_eq(render(fill_numbers),
                     "{\"max\":18446744073709551615,\"min\":-9223372036854775808,\"zero\":0,"
                     "\"addr\":\"0x7f00deadbeef\",\"zero_addr\":\"0x0\",\"a\":[true,{}]}\n");
}

static void fill_big(struct jsonw *w)
{
    jsonw_arr_begin(w, NULL);
    for (int i = 0; i < 5000; i++)
        jsonw_u64(w, NULL, 1234567);
    jsonw_arr_end(w);
}

Test(jsonw, output_larger_than_the_buffer)
{
    const char *s = render(fill_big);
    cr_assert_eq(strlen(s), 1 + 5000 * 7 + 4999 + 1);
}
