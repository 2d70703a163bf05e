/* report.h - a build's messages and progress, through the caller's callbacks (build.h:
 * shc_build_cb); the library prints nothing. Internal to the build's files. */
#ifndef SHC_REPORT_H
#define SHC_REPORT_H

#include <stdint.h>

#include "build.h"

/* One line for cb->message (nothing when cb or cb->message is NULL). */
void shc_say(const shc_build_cb *cb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* One cb->progress report: done of total inputs, rejects so far, the seconds since t0 (shc_now),
 * final on the last one. */
void shc_report_progress(const shc_build_cb *cb, double t0, uint64_t done, uint64_t total,
                         uint64_t rejects, int final);

#endif
