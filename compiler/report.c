/* report.c - a build's messages and progress, through the caller's callbacks (report.h). */
#include "report.h"

#include <stdarg.h>
#include <stdio.h>

#include "util.h"

/* One line for cb->message. */
void shc_say(const shc_build_cb *cb, const char *fmt, ...)
{
    if (!cb || !cb->message)
        return;
    char text[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    cb->message(cb->ctx, text);
}

void shc_report_progress(const shc_build_cb *cb, double t0, uint64_t done, uint64_t total,
                         uint64_t rejects, int final)
{
    if (!cb || !cb->progress)
        return;
    shc_progress p = {.done = done, .total = total, .rejects = rejects,
                      .seconds = shc_now() - t0, .final = final};
    cb->progress(cb->ctx, &p);
}
