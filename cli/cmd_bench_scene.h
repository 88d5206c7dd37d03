/* cmd_bench_scene.h — `endoret bench train --objective scene` (cmd_bench_scene.c). */
#ifndef ENDORET_CMD_BENCH_SCENE_H
#define ENDORET_CMD_BENCH_SCENE_H

/* Times `steps` scene-objective steps of `batch` scenes on a random ViT `arch` at side img (patch 0 =
 * the model's) and the encoder's forwards alone, on `device` ("cpu", "cuda", "cuda:N") with the
 * matmul `precision`; prints a line (or JSON). */
int bench_train_scene(const char *arch, int img, int patch, int batch, int steps, int share, int json,
                      const char *device, const char *precision);

#endif
