/* dtype.h: the element types every module shares (tape tensors, comm buffers), one enum so a
 * tensor's type can be handed to a collective as it is. */
#ifndef FTLLM_DTYPE_H
#define FTLLM_DTYPE_H

#include <stddef.h>

typedef enum ft_dtype { FT_F32, FT_F64, FT_I32, FT_I64, FT_U8 } FtDtype;

/* Bytes per element. */
static inline size_t ft_dtype_size(FtDtype t)
{
    return t == FT_F64 || t == FT_I64 ? 8 : t == FT_U8 ? 1 : 4;
}

#endif
