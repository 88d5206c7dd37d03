/* embed_hybrid.h — `endoret embed --hybrid A.safetensors --hist H.safetensors --hist-weight W --out F`:
 * a learned descriptor file fused with a colour-histogram file of the same rows (infer/retrieval/hybrid.h).
 * Across leave-sequences-out folds, `--hybrid A0,..,A{K-1} --folds FOLDS.csv --out F0,..,F{K-1}` fuses
 * file k (the encoder that held out fold k) with the histograms at a fixed --hist-weight, or at the
 * weight chosen on fold k's training folds only (`--select-weight W1,W2,..`, infer/eval/seq_select.h). */
#ifndef ENDORET_CLI_EMBED_HYBRID_H
#define ENDORET_CLI_EMBED_HYBRID_H

/* 1 when argv asks for the hybrid (then cmd_embed hands it to embed_hybrid) */
int embed_wants_hybrid(int argc, char **argv);
int embed_hybrid(int argc, char **argv);

#endif
