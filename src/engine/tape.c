/* tape.c: the tape's tensor table, entry list and arena (tape.h).
 *
 * Key decisions: tensors and entries live in growing arrays, built once per run; the arena is
 * one zeroed allocation, each tensor 64-byte aligned; aliased tensors (activations of
 * checkpointed segments) take their owner's pointer. The tape holds no op logic: it is data
 * that the executor walks and that the DMR planner and profiler read. */
#include "ftllm/tape.h"

#include <stdlib.h>
#include <string.h>

#include "ftllm/log.h"


void tape_init(FtTape *tp)
{
    memset(tp, 0, sizeof *tp);
    tp->be = backend_cpu();
    tp->tokens = tp->targets = tp->logits = tp->probs = tp->loss = -1;
}

void tape_free(FtTape *tp)
{
    free(tp->t);
    free(tp->e);
    if (tp->arena) tp->be->release(tp->be->ctx, tp->arena);
    tape_init(tp);
}

int tape_tensor(FtTape *tp, const char *name, FtDtype dt, FtTensorRole role, size_t n,
                void *data, int layer)
{
    if (tp->nt == tp->cap_t) {
        tp->cap_t = tp->cap_t ? 2 * tp->cap_t : 256;
        tp->t = realloc(tp->t, sizeof *tp->t * (size_t)tp->cap_t);
        FT_ASSERT(tp->t);
    }
    FtTensor *t = &tp->t[tp->nt];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->dtype = dt;
    t->role = role;
    t->n = n;
    t->data = data;
    t->alias = -1;
    t->layer = layer;
    t->param = -1;
    return tp->nt++;
}

int tape_state(FtTape *tp, const char *name, FtTensorRole role, int param, int layer, size_t n)
{
    FT_ASSERT(tape_role_is_state(role) && param >= 0);
    int id = tape_tensor(tp, name, FT_F32, role, n, NULL, layer);
    tp->t[id].param = param;
    return id;
}

const char *tape_mark_name(FtMark mk)
{
    static const char *const names[] = {
#define FT_MARK_NAME(name, text) text,
        FT_MARK_LIST(FT_MARK_NAME)
#undef FT_MARK_NAME
    };
    return mk >= 0 && mk < FT_MARK_N ? names[mk] : "?";
}

int tape_alias(FtTape *tp, const char *name, int of, int layer)
{
    FT_ASSERT(of >= 0 && of < tp->nt && tp->t[of].alias < 0);
    FtTensor o = tp->t[of];
    int id = tape_tensor(tp, name, o.dtype, o.role, o.n, NULL, layer);
    tp->t[id].alias = of;
    return id;
}

void tape_push(FtTape *tp, const FtTapeEntry *e)
{
    if (tp->ne == tp->cap_e) {
        tp->cap_e = tp->cap_e ? 2 * tp->cap_e : 256;
        tp->e = realloc(tp->e, sizeof *tp->e * (size_t)tp->cap_e);
        FT_ASSERT(tp->e);
    }
    for (int i = 0; i < FT_OP_MAX_IN; i++) FT_ASSERT(e->in[i] >= -1 && e->in[i] < tp->nt);
    for (int i = 0; i < FT_OP_MAX_OUT; i++) FT_ASSERT(e->out[i] >= -1 && e->out[i] < tp->nt);
    FT_ASSERT(e->twin >= -1 && e->twin <= tp->ne);
    tp->e[tp->ne++] = *e;
}

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

void tape_alloc(FtTape *tp)
{
    size_t total = 0;
    for (int i = 0; i < tp->nt; i++)
        if (!tp->t[i].data && tp->t[i].alias < 0 && !tape_role_is_state(tp->t[i].role))
            total += align64(tp->t[i].n * ft_dtype_size(tp->t[i].dtype));
    if (tp->arena) tp->be->release(tp->be->ctx, tp->arena);
    tp->arena = total ? backend_alloc(tp->be, total, "the tape's arena") : NULL; /* zeroed */
    tp->arena_bytes = total;
    size_t off = 0;
    for (int i = 0; i < tp->nt; i++) {
        FtTensor *t = &tp->t[i];
        if (t->data || t->alias >= 0 || tape_role_is_state(t->role)) continue;
        t->data = (char *)tp->arena + off;
        off += align64(t->n * ft_dtype_size(t->dtype));
    }
    for (int i = 0; i < tp->nt; i++)
        if (tp->t[i].alias >= 0) tp->t[i].data = tp->t[tp->t[i].alias].data;
}

void tape_call(const FtTape *tp, int i, FtOpCall *c)
{
    const FtTapeEntry *e = &tp->e[i];
    memset(c, 0, sizeof *c);
    for (int k = 0; k < FT_OP_MAX_IN; k++) c->in[k] = e->in[k] >= 0 ? tp->t[e->in[k]].data : NULL;
    for (int k = 0; k < FT_OP_MAX_OUT; k++)
        c->out[k] = e->out[k] >= 0 ? tp->t[e->out[k]].data : NULL;
    memcpy(c->d, e->d, sizeof c->d);
    memcpy(c->x, e->x, sizeof c->x);
}

double tape_flops(const FtTape *tp, int begin, int end, bool with_recompute)
{
    double f = 0;
    for (int i = begin; i < end; i++) {
        const FtTapeEntry *e = &tp->e[i];
        if (e->phase == FT_PH_RECOMPUTE && !with_recompute) continue;
        FtOpCall c;
        tape_call(tp, i, &c);
        f += ops_desc(e->kind)->flops(&c, e->dir);
    }
    return f;
}

size_t tape_tensor_bytes(const FtTape *tp, int id)
{
    return id < 0 ? 0 : tp->t[id].n * ft_dtype_size(tp->t[id].dtype);
}

void tape_print(FILE *out, const FtTape *tp)
{
    static const char *ph[] = {"fwd", "bwd", "rec"};
    for (int i = 0; i < tp->ne; i++) {
        const FtTapeEntry *e = &tp->e[i];
        fprintf(out, "%4d %s L%-3d S%-3d ", i, ph[e->phase], e->layer, e->seg);
        if (e->kind == FT_OP_MARK) {
            fprintf(out, "-- %s", tape_mark_name(e->mark));
            if (e->in[0] >= 0) fprintf(out, " %s", tp->t[e->in[0]].name);
            else if (e->out[0] >= 0) fprintf(out, " %s", tp->t[e->out[0]].name);
            fprintf(out, "\n");
            continue;
        }
        fprintf(out, "%s.%s %-10s ", ops_desc(e->kind)->name, e->dir == FT_FWD ? "fwd" : "bwd",
                e->label ? e->label : "");
        for (int k = 0; k < FT_OP_MAX_IN; k++)
            if (e->in[k] >= 0) fprintf(out, "%s ", tp->t[e->in[k]].name);
        fprintf(out, "->");
        for (int k = 0; k < FT_OP_MAX_OUT; k++)
            if (e->out[k] >= 0)
                fprintf(out, " %s", tp->t[e->out[k]].name);
        if (e->twin >= 0) fprintf(out, "  [%s %d]", e->phase == FT_PH_RECOMPUTE ? "of" : "again at", e->twin);
        fprintf(out, "\n");
    }
}
