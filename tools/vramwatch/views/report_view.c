/* report_view.c: reports as `vramwatch report` and `vramwatch run` print them: one report's
 * post-mortem (postmortem.c), the job view for several (jobview.c), or the JSON back. */
#include "report_view.h"

#include "jobview.h"
#include "json.h"

void report_view_show(FILE *out, struct model_report *reports, size_t n,
                      const struct report_opts *o)
{
    if (n == 0)
        return;
    if (o->json && n == 1)
        json_print(out, reports[0].root);
    else if (o->json)
        jobview_print_json(out, reports, n);
    else if (n == 1)
        postmortem_print(out, &reports[0], o);
    else
        jobview_print(out, reports, n, o);
}
