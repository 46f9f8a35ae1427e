/* ops_table.cu: the CUDA op table (ops.h's FtOpDesc per kind). Names, FLOP and byte counts are
 * the CPU table's (they describe the op, not the backend); fwd/bwd are the CUDA functions of
 * ops_cuda.h. There are no naive twins on the GPU: the CPU backend is the reference. */
#include "ops_cuda.h"

static void mark_fn(const FtOpCall *c) { (void)c; }

static FtOpDesc g_ops[FT_OP_NKINDS];

extern "C" const FtOpDesc *ops_cuda_table(void)
{
    if (g_ops[FT_OP_MARK].fwd) return g_ops;
    static const struct { FtOpKind kind; FtOpFn fwd, bwd; } fns[] = {
        {FT_OP_ENCODER, cuda_encoder_fwd, cuda_encoder_bwd},
        {FT_OP_LAYERNORM, cuda_layernorm_fwd, cuda_layernorm_bwd},
        {FT_OP_MATMUL, cuda_matmul_fwd, cuda_matmul_bwd},
        {FT_OP_ATTENTION, cuda_attention_fwd, cuda_attention_bwd},
        {FT_OP_GELU, cuda_gelu_fwd, cuda_gelu_bwd},
        {FT_OP_RESIDUAL, cuda_residual_fwd, cuda_residual_bwd},
        {FT_OP_CROSSENT, cuda_crossent_fwd, cuda_crossent_bwd},
        {FT_OP_LOSSMEAN, cuda_lossmean_fwd, NULL},
        {FT_OP_GRADNORM, cuda_gradnorm_fwd, NULL},
        {FT_OP_ADAMW, cuda_adamw_fwd, NULL},
        {FT_OP_MOE_ROUTE, cuda_moe_route_fwd, cuda_moe_route_bwd},
        {FT_OP_MOE_DISPATCH, cuda_moe_dispatch_fwd, cuda_moe_dispatch_bwd},
        {FT_OP_MOE_EXPERT, cuda_moe_expert_fwd, cuda_moe_expert_bwd},
        {FT_OP_MOE_COMBINE, cuda_moe_combine_fwd, cuda_moe_combine_bwd},
        {FT_OP_MARK, mark_fn, mark_fn},
    };
    const FtOpDesc *cpu = ops_cpu_table();
    FT_ASSERT(sizeof fns / sizeof fns[0] == FT_OP_NKINDS);
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
        FtOpKind k = fns[i].kind;
        FT_ASSERT(!cpu[k].bwd == !fns[i].bwd); /* the same kinds have a backward */
        g_ops[k] = cpu[k];
        g_ops[k].fwd = fns[i].fwd;
        g_ops[k].bwd = fns[i].bwd;
        g_ops[k].fwd_ref = g_ops[k].bwd_ref = NULL;
    }
    return g_ops;
}
