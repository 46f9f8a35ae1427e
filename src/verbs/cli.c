/* cli.c: verb dispatch, --help, --version and `ftllm help ...`.
 *
 * The verb table names each verb, its one-line purpose and its function; a verb that is not built
 * yet has no function and exits with FT_EXIT_NOTIMPL and a clear message. */
#include "ftllm/cli.h"

#include <stdio.h>
#include <string.h>

#include "ftllm/deck.h"
#include "ftllm/ftllm.h"
#include "ftllm/log.h"

struct verb {
    const char *name;
    FtVerbFn fn;
    const char *args, *help;
};

static const struct verb g_verbs[] = {
    {"train", verb_train, "DECK [section.key=value ...]",
     "train a model as the deck says (overrides after the deck)"},
    {"sample", verb_sample, "DECK [section.key=value ...]",
     "print text sampled from the model in model.init (an llm.c model file)"},
    {"plan", verb_plan, "[--predict] DECK [section.key=value ...]",
     "profile dmr.profile_steps steps, plan DMR (dmr.mode = planned), write dmr.plan, print the "
     "plan and its predicted overhead; --predict: the plan and overhead predicted for the deck's "
     "[cluster] hardware, without running"},
    {"optimize", verb_optimize, "DECK [--verify] [section.key=value ...]",
     "recommend redundancy r, checkpoint interval and spares (--verify: simulate it and its neighbours)"},
    {"simulate", verb_simulate, "DECK [section.key=value ...]",
     "simulate a whole training run on a large cluster"},
    {"inspect", verb_inspect, "FILE | DIR [--run NAME]",
     "verify a checkpoint (a folder: its newest that verifies) and summarize it"},
    {"tokenize", verb_tokenize, "IN.txt OUT.bin [--val ...]",
     "byte-level tokenizer (vocab 256): text -> llm.c token shard; --val V.bin --val-fraction F "
     "also writes the text's tail as a validation shard"},
    {"help", NULL, "[deck [--markdown] | VERB]", "this text, the deck keys, or one verb"},
};
#define NVERBS ((int)(sizeof g_verbs / sizeof g_verbs[0]))

void cli_error(MPI_Comm comm, const char *msg)
{
    int rank = 0;
    MPI_Comm_rank(comm, &rank);
    if (rank == 0) {
        fprintf(stderr, "%s\n", msg);
        fflush(stderr);
    }
}

static void usage(FILE *out)
{
    fprintf(out, "ftllm %s: fault-tolerant LLM pretraining (MPI)\n\n"
                 "usage: mpiexec -n N ftllm VERB [ARGS]\n\n",
            FTLLM_VERSION);
    for (int i = 0; i < NVERBS; i++) {
        char lhs[64];
        snprintf(lhs, sizeof lhs, "%s %s", g_verbs[i].name, g_verbs[i].args);
        fprintf(out, "  %-40s %s%s\n", lhs, g_verbs[i].help,
                g_verbs[i].fn || !strcmp(g_verbs[i].name, "help") ? "" : " (not implemented yet)");
    }
    fprintf(out, "\n  --help, -h       this text\n  --version        the version\n\n"
                 "Decks are INI files; `ftllm help deck` lists every key. Exit codes: 0 ok, "
                 "1 run failed its verdict,\n2 bad input, 3 not implemented yet, 4 fatal error, "
                 "5 SPARe wipe-out with no in-process\nrestart (requeue: resume from the newest checkpoint).\n");
}

static int is_rank0(MPI_Comm comm)
{
    int rank = 0;
    MPI_Comm_rank(comm, &rank);
    return rank == 0;
}

static int verb_help(int argc, char **argv, MPI_Comm comm)
{
    if (argc >= 2 && !strcmp(argv[1], "deck")) {
        int md = argc >= 3 && !strcmp(argv[2], "--markdown");
        if (argc > 3 || (argc == 3 && !md)) {
            cli_error(comm, "ftllm help deck: unexpected argument (only --markdown is accepted)");
            return FT_EXIT_USAGE;
        }
        if (is_rank0(comm)) deck_help(stdout, md);
        return FT_EXIT_OK;
    }
    if (argc >= 2) {
        for (int i = 0; i < NVERBS; i++) {
            if (strcmp(argv[1], g_verbs[i].name)) continue;
            if (is_rank0(comm))
                printf("usage: ftllm %s %s\n  %s\n", g_verbs[i].name, g_verbs[i].args,
                       g_verbs[i].help);
            return FT_EXIT_OK;
        }
        char msg[256];
        snprintf(msg, sizeof msg, "ftllm help: no such topic '%.64s' (try 'deck' or a verb)",
                 argv[1]);
        cli_error(comm, msg);
        return FT_EXIT_USAGE;
    }
    if (is_rank0(comm)) usage(stdout);
    return FT_EXIT_OK;
}

/* The closest verb name, for "did you mean". */
static const char *closest_verb(const char *w)
{
    for (int i = 0; i < NVERBS; i++) {
        const char *v = g_verbs[i].name;
        size_t lw = strlen(w), lv = strlen(v), common = 0;
        while (common < lw && common < lv && w[common] == v[common]) common++;
        if (common >= 3 || (lw == lv && lw > 2 && strspn(w, v) == lw)) return v;
    }
    return NULL;
}

int cli_main(int argc, char **argv, MPI_Comm comm)
{
    if (argc < 2) {
        if (is_rank0(comm)) usage(stderr);
        return FT_EXIT_USAGE;
    }
    const char *verb = argv[1];
    if (!strcmp(verb, "--help") || !strcmp(verb, "-h")) return verb_help(1, argv + 1, comm);
    if (!strcmp(verb, "--version")) {
        if (is_rank0(comm)) printf("ftllm %s\n", FTLLM_VERSION);
        return FT_EXIT_OK;
    }
    if (!strcmp(verb, "help")) return verb_help(argc - 1, argv + 1, comm);
    if (!strcmp(verb, "plan") && argc > 2 && !strcmp(argv[2], "--predict"))
        return verb_plan_predict(argc - 2, argv + 2, comm);
    for (int i = 0; i < NVERBS; i++) {
        if (strcmp(verb, g_verbs[i].name)) continue;
        if (!g_verbs[i].fn) {
            char msg[256];
            snprintf(msg, sizeof msg, "ftllm %s: not implemented yet in ftllm %s", verb,
                     FTLLM_VERSION);
            cli_error(comm, msg);
            return FT_EXIT_NOTIMPL;
        }
        return g_verbs[i].fn(argc - 1, argv + 1, comm);
    }
    char msg[256];
    const char *best = closest_verb(verb);
    if (best)
        snprintf(msg, sizeof msg, "ftllm: unknown verb '%.64s' (did you mean '%s'?); see ftllm --help",
                 verb, best);
    else
        snprintf(msg, sizeof msg, "ftllm: unknown verb '%.64s'; see ftllm --help", verb);
    cli_error(comm, msg);
    return FT_EXIT_USAGE;
}
