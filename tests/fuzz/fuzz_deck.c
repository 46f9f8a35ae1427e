/* fuzz_deck.c: libFuzzer target for the deck parser (make fuzz). Any input must give either a
 * valid config or a one-line error that starts with the file name; never a crash, a leak or
 * undefined behaviour. Overrides and the cross-key checks are fuzzed too. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ftllm/deck.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static FtConfig cfg;
    char err[FT_DECK_ERR_MAX];
    err[0] = '\0';
    int rc = deck_parse(&cfg, "f.ini", (const char *)data, size, err, sizeof err);
    if (rc != 0 && (strncmp(err, "f.ini", 5) || strchr(err, '\n'))) abort();
    if (rc == 0) {
        deck_check(&cfg, 1, err, sizeof err);
        /* the last line of the input as an override */
        char line[300];
        size_t n = size < sizeof line - 1 ? size : sizeof line - 1;
        memcpy(line, data + size - n, n);
        line[n] = '\0';
        if (deck_override(&cfg, line, 1, err, sizeof err) != 0 && strchr(err, '\n')) abort();
        FILE *f = fopen("/dev/null", "w");
        deck_print(f, &cfg);
        deck_print_changed(f, &cfg);
        fclose(f);
    }
    return 0;
}
