/* importers.h — turn common public dataset layouts into manifests.
 *   class-folders : SRC/<class>/...image        label = class folder name (Kvasir, HyperKvasir,
 *                   CAD-CAP, KID style); images found recursively under each class folder.
 *   image-mask    : SRC/images/<stem>.*  +  SRC/masks/<stem>.*  matched by file stem
 *                   (Kvasir-SEG, CVC-ClinicDB style); an image without a mask is an error.
 *   scenes        : SRC/<scene>/<view images>   or   SRC/<class>/<scene>/<view images>
 *                   (one folder per lesion holding its views/frames; views numbered in name order).
 *   sequences     : video frames grouped per polyp; V views picked from each sequence (below).
 * Files are taken in byte order of their names, so the manifest is deterministic. Image files are
 * recognised by extension (.png .jpg .jpeg, any case); `data check` then verifies their content.
 * Paths are written relative to the folder of `out_path`. */
#ifndef ENDORET_IMPORTERS_H
#define ENDORET_IMPORTERS_H

#include "datasets/manifest.h"

int import_class_folders(const char *src, const char *out_path, manifest *m);
int import_image_mask(const char *src, const char *out_path, const char *label, manifest *m);
int import_scenes(const char *src, const char *out_path, manifest *m);

/* --layout sequences: video frames grouped per polyp (one sequence = one scene of the manifest).
 *   folder form: SRC/<sequence>/<frames>  or  SRC/<class>/<sequence>/<frames>
 *                (label = class, scene = "<class>/<sequence>"; every other scene = the folder name).
 *   map form   : SRC is a flat folder of frames and `map` a CSV with a header, one of
 *                  frame,sequence[,label][,patient][,split]       one line per frame; frame = a path
 *                                                                 relative to SRC
 *                  sequence,start,end[,label][,patient][,split]   one line per run of frames: the
 *                                                                 frames of SRC from start to end
 *                                                                 inclusive (a frame's file name, or
 *                                                                 its number = the last digits of
 *                                                                 the name); a sequence may have
 *                                                                 several lines (several passes)
 *                (`pathology` is accepted for `label`; label/patient/split must agree on every line
 *                of a sequence). Frames of SRC that no line names are left out. CVC-ColonDB's
 *                labels.csv is such a map as it ships: `file` = frame, `sequence_id` = sequence,
 *                its mask, frame_number, frame_index_in_sequence, sequence_length, width and height
 *                columns are read and ignored (SRC = the cvc_colondb folder, views 0).
 * Frames are ordered by natural sort of their names (frame_2 before frame_10), sequences too. From
 * a sequence of n frames the V views are the frames at the centres of V equal parts
 * (floor((2k+1)n/2V), k = 0..V-1); when those are closer than min_gap frames they move out to
 * span the sequence (floor(k(n-1)/(V-1)): first and last frame). A sequence of fewer than
 * (V-1)*min_gap+1 frames (fewer than V with min_gap 1) is skipped and listed in the stats.
 * views = 0: every frame of every sequence, view = its 0-based position (no sequence skipped):
 * the input of the sequence protocol (infer/eval/sequence_protocol.h).
 * Rows: path, label (map column, else the class folder, else opts->label), scene = the sequence
 * name exactly as given, view = 0..V-1, patient and split from the map. Bad input (missing
 * folder or map, unknown column, a listed frame that does not exist, a frame in two sequences,
 * an empty sequence, a folder of masks) is ER_INPUT naming the file and line. */
typedef struct {
    int views;          /* V >= 1 (default 4), 0 = every frame */
    int min_gap;        /* >= 1: chosen frames at least this many frame positions apart (default 1) */
    const char *map;    /* NULL: folder form */
    const char *label;  /* label of rows the layout gives none (NULL = none) */
} seq_import_opts;

typedef struct {
    int sequences;      /* sequences found */
    int frames;         /* frames in them */
    int unmapped;       /* map form with ranges: frames of SRC in no range */
    int nskipped;       /* too short for V views min_gap apart */
    char **skipped;     /* their names (owned) */
    int *skipped_frames;/* and frame counts */
} seq_import_stats;

seq_import_opts seq_import_defaults(void);
int import_sequences(const char *src, const char *out_path, const seq_import_opts *o, manifest *m,
                     seq_import_stats *st);
void seq_import_stats_free(seq_import_stats *st);
/* The view positions (0-based, increasing) of a sequence of n frames, as described above:
 * 1 and idx[0..V-1] filled, or 0 when n < (V-1)*gap+1. */
int seq_pick_views(int n, int V, int gap, int *idx);
/* Natural order of names: runs of digits compare as numbers ("f2" < "f10"), the rest bytewise;
 * a total order (ties broken by strcmp). */
int natural_cmp(const char *a, const char *b);

/* `endoret data check`: decode every image and mask of a manifest (threads: 0 = OpenMP default),
 * print counts and problems; ER_INPUT naming the first bad file when there is any. */
int data_check_manifest(const char *path, int threads, int verbose, int *nbad_out);

#endif
