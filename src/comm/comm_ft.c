/* comm_ft.c: process failures under ULFM (comm.h, "process failures"), and the one place that
 * reads the return code of an FtComm operation (comm_impl.h).
 *
 * Key decisions:
 *  - Compiled in only where the MPI has Open MPI's ULFM extension (OMPI_HAVE_MPI_EXT_FTMPI from
 *    mpi-ext.h); MPICH 4 declares MPIX_Comm_agree and friends too, but its ch4 device does not
 *    survive a process death (DESIGN.md), so its build keeps failures fatal.
 *  - A failure seen anywhere revokes every FtComm of this process (the list below), not only
 *    the one that saw it: a survivor may be waiting on a communicator without the dead rank
 *    (a tp or pp peer that is itself stuck behind the failure), and only a revoke reaches it.
 *  - The verdict is MPIX_Comm_agree's (through MPIX_Comm_iagree and this layer's test + yield
 *    loop, never a busy-polling blocking call): its flag and its MPIX_ERR_PROC_FAILED are
 *    uniform over the survivors, so every survivor branches the same way.
 *  - Open MPI's non-blocking collectives on 2 ranks report a peer's death as MPI_ERR_OTHER, not
 *    MPIX_ERR_PROC_FAILED (measured: a 2-rank job, a tp = 2 group, a pp = 2 pipeline's
 *    tied-embedding pair), so an error on a communicator that has lost a member
 *    (MPIX_Comm_get_failed) counts as a process failure too.
 *  - The dead ranks are read from the shrunk communicator (whose membership the shrink agreed),
 *    not from MPIX_Comm_get_failed, whose answer is local and may differ between survivors. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "comm_impl.h"
#include "ftllm/log.h"
#include "ftllm/timers.h"

#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h>
#endif
#if defined(OMPI_HAVE_MPI_EXT_FTMPI) && OMPI_HAVE_MPI_EXT_FTMPI
#define COMM_ULFM 1
#else
#define COMM_ULFM 0
#endif

static FtComm *g_live;     /* this process's FtComms, newest first (created and destroyed on
                              the main thread; the checkpoint writer thread only uses them) */
static bool g_failed;      /* a failure seen since comm_ft_clear */
static bool g_ever;        /* a failure seen in this run (comm_ft_survived) */
static double g_failed_at; /* when (timers_wall) */
#if COMM_ULFM
static int g_enabled = -1; /* comm_ft_enabled, once asked */
#endif

void comm_ft_track(FtComm *c)
{
    c->next_live = g_live;
    g_live = c;
}

void comm_ft_untrack(FtComm *c)
{
    for (FtComm **p = &g_live; *p; p = &(*p)->next_live)
        if (*p == c) {
            *p = c->next_live;
            return;
        }
}

bool comm_ft_enabled(void)
{
#if COMM_ULFM
    if (g_enabled < 0) {
        int *v = NULL, flag = 0;
        FT_CHECK_MPI(MPI_Comm_get_attr(MPI_COMM_WORLD, MPIX_FT, &v, &flag));
        g_enabled = flag && v && *v;
    }
    return g_enabled;
#else
    return false;
#endif
}

bool comm_ft_failed(void) { return g_failed; }
bool comm_ft_survived(void) { return g_ever; }
double comm_ft_failed_at(void) { return g_failed_at; }

void comm_ft_clear(void)
{
    g_failed = false;
    g_failed_at = 0;
}

#if COMM_ULFM
static bool is_failure(int rc)
{
    int cls = rc;
    MPI_Error_class(rc, &cls);
    return cls == MPIX_ERR_PROC_FAILED || cls == MPIX_ERR_PROC_FAILED_PENDING ||
           cls == MPIX_ERR_REVOKED;
}

/* Whether a process of c has failed (as this process knows it so far), or c is revoked: a
 * collective started on a revoked communicator fails in Open MPI's libnbc as MPI_ERR_OTHER
 * ("Error in NBC_Start_round"), not MPIX_ERR_REVOKED (measured: a tp = 2 group whose peer
 * revoked it after the checkpoint writer saw a death elsewhere). */
static bool lost_member(MPI_Comm c)
{
    int revoked = 0;
    if (MPIX_Comm_is_revoked(c, &revoked) == MPI_SUCCESS && revoked) return true;
    MPI_Group g;
    int n = 0;
    if (MPIX_Comm_get_failed(c, &g) != MPI_SUCCESS) return false;
    MPI_Group_size(g, &n);
    if (g != MPI_GROUP_EMPTY) MPI_Group_free(&g);
    return n > 0;
}
#endif

#if COMM_ULFM
static int agree_rc(MPI_Comm comm, int *flag);
static void note_failure(const char *op, const char *name)
{
    if (g_failed) return;
    g_failed = g_ever = true;
    g_failed_at = timers_wall();
    ft_log_rank(FT_LOG_DEBUG, "comm: %s on %s: a process failed: revoking this process's "
                "communicators", op, name);
    for (FtComm *x = g_live; x; x = x->next_live) MPIX_Comm_revoke(x->mpi);
}
#endif

void comm_ft_note_failure(const char *what)
{
#if COMM_ULFM
    if (comm_ft_enabled()) note_failure(what, "its own communicator");
#else
    (void)what;
#endif
}

int comm_ft_mpi_failed(MPI_Comm comm, int rc)
{
#if COMM_ULFM
    return rc != MPI_SUCCESS && comm_ft_enabled() && (is_failure(rc) || lost_member(comm));
#else
    (void)comm, (void)rc;
    return 0;
#endif
}

int comm_ft_mpi_lost(MPI_Comm comm)
{
#if COMM_ULFM
    return comm_ft_enabled() && lost_member(comm);
#else
    (void)comm;
    return 0;
#endif
}

int comm_ft_mpi_agree(MPI_Comm comm, int ok)
{
#if COMM_ULFM
    if (comm_ft_enabled()) {
        int flag = ok != 0;
        int rc = agree_rc(comm, &flag);
        if (rc != MPI_SUCCESS && !is_failure(rc)) comm_check_mpi(NULL, "agree", rc, __FILE__, __LINE__);
        return rc == MPI_SUCCESS && flag;
    }
#endif
    (void)comm;
    return ok;
}

void comm_ft_mpi_revoke(MPI_Comm comm)
{
#if COMM_ULFM
    if (comm_ft_enabled()) MPIX_Comm_revoke(comm);
#else
    (void)comm;
#endif
}

int comm_ft_rc(FtComm *c, const char *op, int rc, const char *file, int line)
{
    if (rc == MPI_SUCCESS) return 0;
#if COMM_ULFM
    if (comm_ft_enabled() && (is_failure(rc) || (c && lost_member(c->mpi)))) {
        note_failure(op, c ? c->name : "?");
        return 1;
    }
#endif
    comm_check_mpi(c, op, rc, file, line);
    return 0;
}

void comm_ft_revoke(FtComm *c)
{
#if COMM_ULFM
    if (comm_ft_enabled()) MPIX_Comm_revoke(c->mpi);
#else
    (void)c;
#endif
}

int comm_ft_split(FtComm *c, int color, int key, MPI_Comm *out)
{
    int rc = MPI_Comm_split(c->mpi, color, key, out);
    if (rc == MPI_SUCCESS) return 0;
    *out = MPI_COMM_NULL;
    return comm_ft_rc(c, "split", rc, __FILE__, __LINE__);
}

#if COMM_ULFM
/* MPIX_Comm_iagree plus the test + yield loop: the return code (uniform over survivors). */
static int agree_rc(MPI_Comm comm, int *flag)
{
    MPI_Request r;
    int rc = MPIX_Comm_iagree(comm, flag, &r);
    for (int done = 0; rc == MPI_SUCCESS && !done;) {
        rc = MPI_Test(&r, &done, MPI_STATUS_IGNORE);
        if (rc == MPI_SUCCESS && !done) sched_yield();
    }
    return rc;
}
#endif

int comm_ft_agree(FtComm *c, int ok)
{
#if COMM_ULFM
    if (comm_ft_enabled()) {
        int flag = ok && !g_failed;
        int rc = agree_rc(c->mpi, &flag);
        if (rc != MPI_SUCCESS && !is_failure(rc)) comm_check_mpi(c, "agree", rc, __FILE__, __LINE__);
        return rc == MPI_SUCCESS && flag;
    }
#endif
    return comm_all_true(c, ok);
}

#if COMM_ULFM
/* dead[0 .. *ndead-1]: the ranks of c that are not in live (a communicator of some of c's
 * processes), ascending */
static void missing_ranks(const FtComm *c, MPI_Comm live, int *dead, int *ndead)
{
    MPI_Group all, g;
    FT_CHECK_MPI(MPI_Comm_group(c->mpi, &all));
    FT_CHECK_MPI(MPI_Comm_group(live, &g));
    int n = c->size, *ranks = malloc(sizeof(int) * 2 * (size_t)n);
    FT_ASSERT(ranks);
    for (int i = 0; i < n; i++) ranks[i] = i;
    FT_CHECK_MPI(MPI_Group_translate_ranks(all, n, ranks, g, ranks + n));
    *ndead = 0;
    for (int i = 0; i < n; i++)
        if (ranks[n + i] == MPI_UNDEFINED) dead[(*ndead)++] = i;
    free(ranks);
    MPI_Group_free(&all);
    MPI_Group_free(&g);
}
#endif

void comm_ft_shrink(FtComm *c, MPI_Comm *survivors, int *dead, int *ndead)
{
#if COMM_ULFM
    FT_ASSERT(comm_ft_enabled());
    MPIX_Comm_revoke(c->mpi); /* already, on most survivors; harmless again */
    COMM_CHECK(c, "shrink", MPIX_Comm_shrink(c->mpi, survivors));
    FT_CHECK_MPI(MPI_Comm_set_errhandler(*survivors, MPI_ERRORS_RETURN));
    missing_ranks(c, *survivors, dead, ndead);
#else
    (void)survivors, (void)dead, (void)ndead;
    FT_DIE("comm: shrinking %s needs ULFM (build with make MPI=openmpi)", c->name);
#endif
}

void comm_ft_shrink_again(FtComm *c, MPI_Comm *live, int *dead, int *ndead)
{
#if COMM_ULFM
    FT_ASSERT(comm_ft_enabled());
    MPI_Comm l2;
    MPIX_Comm_revoke(*live);
    FT_CHECK_MPI(MPIX_Comm_shrink(*live, &l2));
    FT_CHECK_MPI(MPI_Comm_set_errhandler(l2, MPI_ERRORS_RETURN));
    MPI_Comm_free(live);
    *live = l2;
    missing_ranks(c, l2, dead, ndead);
#else
    (void)live, (void)dead, (void)ndead;
    FT_DIE("comm: shrinking %s needs ULFM (build with make MPI=openmpi)", c->name);
#endif
}

int comm_ft_repair(FtComm *c)
{
#if COMM_ULFM
    if (!comm_ft_enabled()) return 0;
    int flag = 1;
    int rc = agree_rc(c->mpi, &flag);
    if (rc == MPI_SUCCESS) return 0;
    if (!is_failure(rc)) comm_check_mpi(c, "agree", rc, __FILE__, __LINE__);
    MPI_Comm live;
    int *dead = malloc(sizeof(int) * (size_t)c->size), ndead = 0;
    FT_ASSERT(dead);
    comm_ft_shrink(c, &live, dead, &ndead);
    free(dead);
    g_ever |= ndead > 0;
    if (c->owns_mpi) MPI_Comm_free(&c->mpi);
    c->mpi = live;
    c->owns_mpi = true;
    FT_CHECK_MPI(MPI_Comm_rank(live, &c->rank));
    FT_CHECK_MPI(MPI_Comm_size(live, &c->size));
    return ndead;
#else
    (void)c;
    return 0;
#endif
}

void comm_ft_exit(int rc)
{
    /* before the barrier, every survivor's output is out and its streams closed (the
     * launcher has it all once it sees them end), so no survivor's exit ends the job early */
    fflush(NULL);
    close(STDOUT_FILENO);
    close(STDERR_FILENO);
#if COMM_ULFM
    MPI_Comm live = MPI_COMM_NULL;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (MPIX_Comm_shrink(MPI_COMM_WORLD, &live) == MPI_SUCCESS) {
        MPI_Request r;
        int done = 0;
        if (MPI_Ibarrier(live, &r) == MPI_SUCCESS)
            while (!done && MPI_Test(&r, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS)
                if (!done) sched_yield();
    }
#endif
    _exit(rc);
}
