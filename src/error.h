/* Thread-local error message and the helpers every layer uses to fail with a status. */
#ifndef FLASHCL_ERROR_H
#define FLASHCL_ERROR_H

#include "flashcl.h"

#if defined(__GNUC__)
#define FC_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define FC_PRINTF(a, b)
#endif

/* Records a message for flashcl_last_error() on this thread and returns `status`. */
flashcl_status fc_fail(flashcl_status status, const char *fmt, ...) FC_PRINTF(2, 3);
/* Appends text to the current message (e.g. a build log), truncating when it is too long. */
void fc_error_append(const char *text);
/* Clears the message at the start of a public call. */
void fc_clear_error(void);

#endif
