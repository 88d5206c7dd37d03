/* paths.h — file paths as people read and move them: lexically normalised, relative between two
 * folders, and joined so that `a/b/../../x` never reaches a manifest, a case database or a message.
 *
 * Lexical normalisation ("a/b/../c" -> "a/c") is what a user expects and what survives moving a
 * tree, but it differs from the kernel's answer when a folder before a ".." is a symbolic link to
 * somewhere else; path_relative and path_join_clean therefore keep a normalised form only when it
 * names the same file (same device and inode) as the plain one. */
#ifndef ENDORET_PATHS_H
#define ENDORET_PATHS_H

/* "." and empty segments dropped, "name/.." pairs removed; leading ".." of a relative path kept,
 * "/.." of an absolute one is "/"; "" and "a/.." give ".". Caller frees. */
char *path_normalize(const char *p);

/* The path of `target` as seen from folder `from_dir` (both relative to the working directory or
 * absolute), normalised: "../../data/images/x.jpg", never "kv/../../x". Computed on the paths as
 * given (symbolic links kept, so a clone's ../shared link stays in the path); when that does not
 * name the same file as `target`, the relative path between their real paths. `target` must exist.
 * Caller frees. */
char *path_relative(const char *from_dir, const char *target);

/* path_join(dir, rel), normalised when the normalised path names the same file (or dir/rel does
 * not exist and no ".." follows a symbolic link); else the plain join. Caller frees. */
char *path_join_clean(const char *dir, const char *rel);

#endif
