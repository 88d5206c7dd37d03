/* view_list.h — the image paths of one case's views as one text (a case database's image_paths
 * column, a report's image field): the paths joined by ';', where a ';' or '\' inside a path is
 * written "\;" or "\\", so no character of a path can split it or change its meaning. A list
 * written before the escape existed (no '\' in any path) reads the same. */
#ifndef ENDORET_VIEW_LIST_H
#define ENDORET_VIEW_LIST_H

/* The n paths as one list (malloc'd; "" when n == 0). */
char *view_list_join(char *const *paths, int n);
/* The views of a list (NULL or "" has none): *n paths, malloc'd; free with view_list_free. */
char **view_list_split(const char *list, int *n);
void view_list_free(char **views, int n);

#endif
