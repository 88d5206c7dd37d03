/* params_st.h — a model's param_list read from / added to a safetensors file, by tensor name. */
#ifndef ENDORET_PARAMS_ST_H
#define ENDORET_PARAMS_ST_H

#include "checkpoints/safetensors.h"
#include "nn/tensor.h"

/* Load every tensor of pl from f under "<prefix><name>" (prefix may be ""); shapes must match
 * (up to leading 1s; a tensor of another shape is ER_INPUT naming the file and the tensor). strict: a tensor
 * of pl missing in f is an error; otherwise it keeps its value. A NaN or Inf value is ER_INPUT naming the
 * file and the tensor (every loader of weights comes through here). */
int params_load_st(const param_list *pl, const st_file *f, const char *prefix, int strict);
/* Add every tensor of pl to a writer in its own dtype (fp32 as F32, bf16 as BF16: the stored bits).
 * Tensors on a device (or strided) are downloaded into one malloc'd block that is returned: free()
 * it after st_write. NULL when every tensor is a packed CPU tensor (their own data is referenced).
 * params_load_st converts a file's float dtype to each tensor's; BF16 into a bf16 tensor is a copy
 * of the bits. */
void *params_add_st(const param_list *pl, st_writer *w, const char *prefix);

#endif
