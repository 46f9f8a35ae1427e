/* parse_int.c: ft_parse_int (parse_int.h). */
#include "ftllm/parse_int.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>

FtIntParse ft_parse_int(const char *s, long long lo, long long hi, long long *out)
{
    if (!s) return FT_INT_NOT_INT;
    const char *d = s + (*s == '-' || *s == '+');
    if (!*d) return FT_INT_NOT_INT;
    for (const char *c = d; *c; c++)
        if (!isdigit((unsigned char)*c)) return FT_INT_NOT_INT;
    errno = 0;
    long long v = strtoll(s, NULL, 10); /* digits only now: it reads all of s */
    if (errno == ERANGE || v < lo || v > hi) return FT_INT_RANGE;
    *out = v;
    return FT_INT_OK;
}
