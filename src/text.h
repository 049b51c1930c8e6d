/* Small string helpers shared by the API layer and the backends. */
#ifndef FLASHCL_TEXT_H
#define FLASHCL_TEXT_H

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* Whether the switch in environment variable `name` is on: set, non-empty and not "0". Every
 * FLASHCL_* on/off switch (measurement and diagnostic ones) reads this way. */
static inline int fc_env_flag(const char *name) {
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") != 0;
}

/* The integer in environment variable `name`, or `fallback` when it is unset or empty (for the
 * FLASHCL_* measurement switches that take a count). */
static inline long fc_env_long(const char *name, long fallback) {
    const char *v = getenv(name);
    return v && *v ? strtol(v, NULL, 10) : fallback;
}

/* Whether `needle` occurs in `haystack`, ignoring ASCII case. */
static inline int fc_contains_nocase(const char *haystack, const char *needle) {
    size_t n = strlen(needle);
    for (; *haystack; haystack++) {
        size_t i = 0;
        while (i < n && haystack[i] &&
               tolower((unsigned char)haystack[i]) == tolower((unsigned char)needle[i]))
            i++;
        if (i == n) return 1;
    }
    return 0;
}

#endif
