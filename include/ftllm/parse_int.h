/* parse_int.h: the one strict reading of a decimal integer that every input of ftllm uses (deck
 * values, fault schedules, DMR plan files, command-line numbers), so that each accepts and
 * rejects the same strings.
 *
 * Accepted: an optional sign then one or more decimal digits, and nothing else: no leading or
 * trailing space, no hexadecimal, no exponent, no empty string. */
#ifndef FTLLM_PARSE_INT_H
#define FTLLM_PARSE_INT_H

typedef enum {
    FT_INT_OK = 0,
    FT_INT_NOT_INT = 1,  /* not an integer at all */
    FT_INT_RANGE = 2     /* an integer outside [lo, hi] (or outside long long) */
} FtIntParse;

/* s as an integer in [lo, hi] into *out (left alone unless FT_INT_OK). */
FtIntParse ft_parse_int(const char *s, long long lo, long long hi, long long *out);

#endif
