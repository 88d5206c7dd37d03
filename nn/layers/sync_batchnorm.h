/* sync_batchnorm.h — batch norm over the global batch of a data-parallel run (torch.nn.SyncBatchNorm).
 *
 * Each rank normalises its shard [n, C, H, W] with the mean and (biased) variance of every rank's
 * rows: per-channel sums are all-gathered (op_allgather_rows, nn/ops.h) and added, in two passes
 * (mean, then the sum of squared deviations, so no E[x^2] - E[x]^2 cancellation). The backward is
 * that of the composition: op_allgather_rows sums every rank's gradient of the statistics, so with
 * the loop's gradient averaging the parameters get exactly the one-process gradient of the global
 * batch (see op_allgather_rows). Running statistics take the global mean and the unbiased global
 * variance, as torch. The shards must have equal sizes (the objectives split the batch evenly).
 * In one process, or in eval mode, this is op_batchnorm2d(_relu) itself; the composed path is
 * exported for the test that checks it against op_batchnorm2d. */
#ifndef ENDORET_SYNC_BATCHNORM_H
#define ENDORET_SYNC_BATCHNORM_H

#include "nn/tensor.h"

tensor *sync_batchnorm2d(tensor *x, tensor *w, tensor *b, tensor *running_mean, tensor *running_var, int training,
                         float momentum, float eps, int relu);
/* The composed path, whatever the process count. */
tensor *sync_batchnorm2d_composed(tensor *x, tensor *w, tensor *b, tensor *running_mean, tensor *running_var,
                                  float momentum, float eps, int relu);

#endif
