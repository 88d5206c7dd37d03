/* embed_hybrid.h — `endoret embed --hybrid A.safetensors --hist H.safetensors --hist-weight W --out F`:
 * a learned descriptor file fused with a colour-histogram file of the same rows (infer/retrieval/hybrid.h). */
#ifndef ENDORET_CLI_EMBED_HYBRID_H
#define ENDORET_CLI_EMBED_HYBRID_H

/* 1 when argv asks for the hybrid (then cmd_embed hands it to embed_hybrid) */
int embed_wants_hybrid(int argc, char **argv);
int embed_hybrid(int argc, char **argv);

#endif
