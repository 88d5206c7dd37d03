/* pgcon_loss.h — PGCon / WINCon: InfoNCE against a memory bank of prior-view embeddings
 * (Vats et al., Sci Rep 2023; ../shared/spec/pgcon_dual_vss.md 1.6, 1.7, 1.12).
 *
 * For anchor a_i (the prior-view embedding z_p,i), positive p_i and negatives n_i1..n_ik (memory
 * rows), plus E extra negatives w_1..w_E shared by every row (WINCon: the batch's WIN views, with
 * gradient), all compared by cosine:
 *   logits_i = [cos(a_i, p_i), cos(a_i, n_i1) .. cos(a_i, n_ik), cos(a_i, w_1) .. cos(a_i, w_E)] / tau
 *   l(a, p) = mean_i -log softmax(logits_i)[0]
 * PGCon:  L = w_jig l(z_p, Q(jigsaw tiles), N1) + w_mem l(z_p, m_i, N2), N1 and N2 independent draws
 *         of k memory rows other than i; WINCon adds the batch's WIN embeddings to both.
 * The batch mean of every row's loss (not the released code's `return` inside the loop, which kept
 * sample 0 only: spec 1.11 #1).
 *
 * The memory bank M [N, D] holds unit vectors; after each step, for every i of the batch:
 *   M_i <- normalize(mu * M_i + (1 - mu) * normalize(z_p,i))        (mu = 0.5; PyContrast / VISSL's form)
 * Negatives: k distinct rows drawn uniformly from {0..N-1} \ {i} (Floyd's algorithm), a pure function
 * of (seed, step, micro, row, term), so a resumed run draws the same ones. */
#ifndef ENDORET_PGCON_LOSS_H
#define ENDORET_PGCON_LOSS_H

#include <stdint.h>

#include "nn/base/rng.h"
#include "nn/tensor.h"

/* The differentiable InfoNCE above: a, p [B, D] unit rows (any device), negs [B, k, D] unit rows
 * (no gradient needed), extra [E, D] unit rows or NULL. Scalar mean loss. pos_sim (may be NULL)
 * receives the mean cos(a_i, p_i) as a one-element tensor on the loss's device, off the tape
 * (logging: read with the step's record, train/step_record.h, not here). */
tensor *pgcon_infonce(tensor *a, tensor *p, tensor *negs, tensor *extra, float tau, tensor **pos_sim);

/* Double-precision reference of pgcon_infonce on raw (not normalised) host vectors: a, p [B, D],
 * negs [B, k, D], extra [E, D] (NULL when E = 0). Returns the loss; grad_a / grad_p / grad_extra (each
 * may be NULL) receive its gradient w.r.t. the raw inputs. */
double pgcon_infonce_host(const float *a, const float *p, const float *negs, int k, const float *extra, int E, int B,
                          int D, double tau, double *grad_a, double *grad_p, double *grad_extra);

/* k distinct indices from {0..N-1} \ {i}, uniformly (Floyd's algorithm), into out[k], drawn from r.
 * seen: N bytes of zeros (left zeroed on return). Needs 0 <= k <= N - 1. */
void pgcon_sample_negatives(rng_t *r, int N, int i, int k, uint8_t *seen, int32_t *out);

/* M_i <- normalize(mu M_i + (1 - mu) normalize(z_b)) for b = 0..B-1, i = idx[b] (in order, so a row
 * met twice takes both updates). M [N, D] host, z [B, D] host. */
void pgcon_memory_update(float *M, int D, const int *idx, const float *z, int B, float mu);

/* Rows idx[0..n) of M [N, D] into out [n, D] (host). */
void pgcon_memory_rows(const float *M, int D, const int32_t *idx, int n, float *out);

#endif
