/* resume_check.h — what `--resume CKPT` checks before it restores anything (train/loop.c calls it).
 *
 *   - Every key whose value differs between the checkpoint's config (its endoret.config metadata)
 *     and this run's is named on `warn`, with both values: the run goes on with the new values (a
 *     new lr, seed, batch...) and is then no longer bit-identical to the uninterrupted run.
 *   - Keys the checkpoint cannot honour are refused, ER_INPUT naming each and why: model.* and
 *     decoder.* (the checkpoint's weights belong to the network it trained: another width, depth,
 *     head count or input side is another network, even where the shapes happen to fit) and
 *     train.optimizer (the checkpoint holds the other optimizer's state).
 *   - `total` (the run's last step, from train.steps or train.epochs) at the checkpoint's step:
 *     nothing is left to train; *done = 1 and ER_OK (the run is complete: a script that resumes
 *     until done may run again, and nothing is written). Below it: ER_INPUT (a run cannot be made
 *     shorter by resuming; nothing is trained either).
 * *changed (may be NULL) receives the changed keys, ", "-separated ("" when none; caller frees):
 * the loop adds them to a checkpoint that then fails to load (a shape set by an objective's own key,
 * e.g. dual.lora_r). A checkpoint without a stored config is only warned about. */
#ifndef ENDORET_TRAIN_RESUME_CHECK_H
#define ENDORET_TRAIN_RESUME_CHECK_H

#include <stdint.h>
#include <stdio.h>

int resume_check(const char *ckpt, const char *config_text, int64_t total, FILE *warn, int *done, char **changed);

#endif
