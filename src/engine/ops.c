/* ops.c: dispatch by op kind (ops.h): a kind's name, FLOP and byte counts are the same on every
 * backend, so they are read from the CPU table; running an op goes through a backend's table
 * (backend.h, exec.c). */
#include "ftllm/ops.h"

#include "ftllm/log.h"

const FtOpDesc *ops_desc(FtOpKind kind)
{
    FT_ASSERT(kind >= 0 && kind < FT_OP_NKINDS);
    return &ops_cpu_table()[kind];
}
