/* INCRBYFLOAT's arithmetic in the C `long double` Redis uses: the same
 * parsing (strtold, whole argument, no leading space, no NaN, no overflow
 * or underflow to zero), the same addition, and the same printing (%.17Lf
 * with the trailing zeros and a lone "-0" trimmed), so that every reply is
 * Redis's to the byte on the same platform. */

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The longest text parsed or printed, as Redis's MAX_LONG_DOUBLE_CHARS. */
#define SPLITKV_LONG_DOUBLE_CHARS (5 * 1024)

/* 1 and the number in *out if `text` (not NUL-terminated) is one. */
static int parse_long_double(const char *text, size_t len, long double *out) {
    char buf[SPLITKV_LONG_DOUBLE_CHARS];
    char *end;
    long double value;

    if (len == 0 || len >= sizeof(buf)) return 0;
    memcpy(buf, text, len);
    buf[len] = '\0';
    errno = 0;
    value = strtold(buf, &end);
    if (isspace((unsigned char)buf[0]) || *end != '\0' || (size_t)(end - buf) != len)
        return 0;
    if (errno == ERANGE &&
        (value == HUGE_VALL || value == -HUGE_VALL || fpclassify(value) == FP_ZERO))
        return 0;
    if (errno == EINVAL || isnan(value)) return 0;
    *out = value;
    return 1;
}

/* Adds `incr` to `current` (0 when `has_current` is 0) and prints the sum
 * into `out` (at least SPLITKV_LONG_DOUBLE_CHARS bytes), its length in
 * *out_len. Returns 0 on success, 1 if either is not a number, 2 if the
 * sum is NaN or infinite, 3 if it does not fit. */
int splitkv_incr_by_float(const char *current, size_t current_len, int has_current,
                          const char *incr, size_t incr_len, char *out,
                          size_t out_cap, size_t *out_len) {
    long double value = 0, by;
    int printed;
    size_t len;

    if (has_current && !parse_long_double(current, current_len, &value)) return 1;
    if (!parse_long_double(incr, incr_len, &by)) return 1;
    value += by;
    if (isnan(value) || isinf(value)) return 2;
    printed = snprintf(out, out_cap, "%.17Lf", value);
    if (printed < 0 || (size_t)printed + 1 > out_cap) return 3;
    len = (size_t)printed;
    if (memchr(out, '.', len) != NULL) {
        while (out[len - 1] == '0') len--;
        if (out[len - 1] == '.') len--;
    }
    if (len == 2 && out[0] == '-' && out[1] == '0') {
        out[0] = '0';
        len = 1;
    }
    *out_len = len;
    return 0;
}
