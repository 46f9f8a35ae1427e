/* deck.h: input decks (INI files) parsed into one struct ft_config.
 *
 * The keys are listed once, in deck_keys.h. Rank 0 reads the deck and broadcasts its bytes;
 * every rank parses the same bytes with the same code, so every rank reaches the same verdict
 * and no rank branches alone on a bad deck. Errors are one line, "FILE:LINE: message", or
 * "command line 'sec.key=value': message" for an override, with the closest valid key
 * suggested for a misspelling. Parsing itself uses no MPI (the fuzz target calls it directly).
 */
#ifndef FTLLM_DECK_H
#define FTLLM_DECK_H

#include <mpi.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "ftllm/deck_keys.h"

#define FT_DECK_STR_MAX 256   /* longest string value + 1 */
#define FT_DECK_ERR_MAX 1024  /* size of an error message buffer */
#define FT_DECK_TEXT_MAX (1 << 20) /* largest deck file accepted, bytes */
#define FT_AUTO (-1)          /* stored value of `auto` for keys that accept it */

enum ft_key_flags {
    FT_KEY_AUTO = 1u << 0,
    FT_KEY_RESERVED = 1u << 1,
    FT_KEY_GT_MIN = 1u << 2,
    FT_KEY_LT_MAX = 1u << 3,
};

enum ft_key_type { FT_T_INT, FT_T_REAL, FT_T_BOOL, FT_T_STR, FT_T_ENUM };

/* C type of each TYPE in the table. */
#define FT_CTYPE_INT long long
#define FT_CTYPE_REAL double
#define FT_CTYPE_BOOL bool
#define FT_CTYPE_STR char
#define FT_CTYPE_ENUM int
#define FT_CDIM_INT
#define FT_CDIM_REAL
#define FT_CDIM_BOOL
#define FT_CDIM_STR [FT_DECK_STR_MAX]
#define FT_CDIM_ENUM

#define FT_DECK_FIELD_(sec, name, type, def, lo, hi, choices, flags, help)                       \
    FT_CTYPE_##type name FT_CDIM_##type;
#define FT_DECK_SECTION_STRUCT_(sec, help) struct ft_cfg_##sec { FT_KEYS_##sec(FT_DECK_FIELD_) };
FT_DECK_SECTIONS(FT_DECK_SECTION_STRUCT_)
#undef FT_DECK_SECTION_STRUCT_

/* One id per key: FT_KEY_model_layers, ... and FT_NKEYS. */
#define FT_DECK_KEY_ID_(sec, name, ...) FT_KEY_##sec##_##name,
#define FT_DECK_SECTION_IDS_(sec, help) FT_KEYS_##sec(FT_DECK_KEY_ID_)
enum ft_key_id { FT_DECK_SECTIONS(FT_DECK_SECTION_IDS_) FT_NKEYS };
#undef FT_DECK_SECTION_IDS_

/* Where a key's value came from. */
enum ft_src_kind { FT_SRC_DEFAULT = 0, FT_SRC_DECK = 1, FT_SRC_CMDLINE = 2 };
struct ft_key_src {
    int kind; /* enum ft_src_kind */
    int line; /* deck line, or the override's position on the command line (1-based) */
};

typedef struct ft_config {
#define FT_DECK_MEMBER_(sec, help) struct ft_cfg_##sec sec;
    FT_DECK_SECTIONS(FT_DECK_MEMBER_)
#undef FT_DECK_MEMBER_
    char path[FT_DECK_STR_MAX];      /* the deck's file name as given */
    struct ft_key_src src[FT_NKEYS]; /* where each value came from */
    char *text;                      /* the deck's bytes (owned; NUL-terminated), or NULL */
    size_t text_len;
} FtConfig;

/* A key's description, from the table. */
typedef struct ft_deck_key {
    const char *section, *name;
    enum ft_key_type type;
    const char *def;
    double min, max;
    const char *choices;
    unsigned flags;
    const char *help;
    size_t offset; /* of the value inside FtConfig */
} FtDeckKey;

const FtDeckKey *deck_keys(int *nkeys);
const FtDeckKey *deck_find_key(const char *section, const char *name);

/* Fills every key with its default. Returns 0, or -1 with err set if the table's own default
 * does not validate (a programming error that the tests catch). */
int deck_defaults(FtConfig *cfg, char *err, size_t errlen);

/* Parses deck text (len bytes, need not be NUL-terminated) on top of the defaults. path is
 * used in messages and copied into cfg. Returns 0, or -1 with a one-line message in err. */
int deck_parse(FtConfig *cfg, const char *path, const char *text, size_t len, char *err,
               size_t errlen);

/* Applies one "section.key=value" override; index is its 1-based position among the
 * overrides. A later override of the same key wins. Returns 0 or -1 with err set. */
int deck_override(FtConfig *cfg, const char *arg, int index, char *err, size_t errlen);

/* Cross-key consistency. nranks > 0 also checks the layout against the number of ranks.
 * Returns 0 or -1 with err naming where the offending value was set. */
int deck_check(const FtConfig *cfg, int nranks, char *err, size_t errlen);

/* Whether SPARe is on: spare.r >= 1 or auto (FT_AUTO, resolved later by train_spare_auto, never
 * to 0), or hot spares asked for (which deck_check refuses without spare.r). */
bool deck_spare_on(const FtConfig *cfg);

/* The keys only `ftllm plan --predict` understands (model.ffn, model.kv_heads, model.mlp)
 * describe the block the trainer builds (GPT-2: 4 x channels, GELU, kv_heads = heads). Returns
 * 0, or -1 with a one-line message naming the key's line. */
int deck_check_trainable(const FtConfig *cfg, char *err, size_t errlen);

/* "deck.ini:12: " / "command line override 2: " / "deck.ini: " (a default): where key id
 * (enum ft_key_id) was set, as the prefix of an error about it. */
void deck_error_prefix(const FtConfig *cfg, int id, char *buf, size_t len);

/* The whole load, collective over comm (path, overrides and nranks must be equal on every
 * rank; only rank 0 opens the file). Reads, broadcasts, parses, applies overrides, checks.
 * Returns the same status on every rank: 0, or -1 with err set. */
int deck_load(FtConfig *cfg, const char *path, int noverrides, char **overrides, MPI_Comm comm,
              char *err, size_t errlen);

/* deck_load for a layout this job does not run (`ftllm plan --predict`): the same, except that
 * dp x pp x ep x tp is not checked against the job's ranks. */
int deck_load_any_layout(FtConfig *cfg, const char *path, int noverrides, char **overrides,
                         MPI_Comm comm, char *err, size_t errlen);

/* Writes the resolved configuration as a deck (it parses back to the same values), each value
 * commented with where it came from. */
void deck_print(FILE *out, const FtConfig *cfg);

/* Writes the keys whose value differs from the default, by section, each commented with where
 * it came from, between a first and a last comment line: a deck that, keys left out taking
 * their defaults, gives cfg's values back. Sections without such a key are left out. */
void deck_print_changed(FILE *out, const FtConfig *cfg);

/* Writes deck_print's text to the file path (through a temporary file renamed into place).
 * Returns 0, or -1 with err naming the file and the system's reason. */
int deck_save(const FtConfig *cfg, const char *path, char *err, size_t errlen);

/* Writes the value of key k of cfg as deck text into buf. */
void deck_format_value(const FtConfig *cfg, const FtDeckKey *k, char *buf, size_t len);

/* Documentation of every key: plain text (`ftllm help deck`) or Markdown (inputs/README.md). */
void deck_help(FILE *out, bool markdown);

/* Frees what deck_parse/deck_load allocated (the deck text). */
void deck_free(FtConfig *cfg);

#endif
