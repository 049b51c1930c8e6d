/* Status strings (generated from the table in flashcl.h) and the thread-local last error. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "error.h"

/* Big enough for a compiler log excerpt; longer logs are truncated with a marker. */
#define FC_ERROR_CAPACITY 16384

static _Thread_local char fc_last_error[FC_ERROR_CAPACITY];

const char *flashcl_status_string(flashcl_status status) {
    switch (status) {
#define FC_STATUS_CASE_(name, message) \
    case name:                         \
        return message;
        FLASHCL_STATUS_TABLE(FC_STATUS_CASE_)
#undef FC_STATUS_CASE_
    }
    return "unknown status";
}

const char *flashcl_last_error(void) { return fc_last_error; }

void fc_clear_error(void) { fc_last_error[0] = '\0'; }

flashcl_status fc_fail(flashcl_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(fc_last_error, sizeof fc_last_error, fmt, ap);
    va_end(ap);
    return status;
}

void fc_error_append(const char *text) {
    static const char marker[] = "\n[... truncated]";
    size_t used = strlen(fc_last_error);
    size_t room = sizeof fc_last_error - used - 1;
    size_t len = strlen(text);
    if (len <= room) {
        memcpy(fc_last_error + used, text, len + 1);
        return;
    }
    if (room > sizeof marker) {
        size_t keep = room - (sizeof marker - 1);
        memcpy(fc_last_error + used, text, keep);
        memcpy(fc_last_error + used + keep, marker, sizeof marker);
    }
}
