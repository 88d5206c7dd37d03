/* vss_server.h — the "Visual Similarity Scoring" page (paper §3): a local web page showing the two
 * images of the next unscored couple of a sheet side by side with the 4-point Likert buttons.
 * Each answer is appended to the scores CSV (a,b,score,observer — the ground-truth format of
 * perceived_likert.h), the whole file being rewritten atomically (temp + fsync + rename), so a
 * crash never leaves a half-written line. Restarting with the same files resumes at the first
 * couple this observer has not scored. Several servers (one per observer) may share one scores
 * file: each answer re-reads and rewrites it under an flock on "<scores>.lock". HTTP is
 * libmicrohttpd (internal polling thread), bound to 127.0.0.1 by default.
 *   GET  /                 the next couple (or "all scored")
 *   GET  /image/<pair>/a|b the image files named in the sheet, when they are PNG or JPEG images
 *                          under the sheet's folder or the manifest's (http_reply_image_file)
 *   POST /score            form fields pair=<index>&score=<-2|-1|1|2>  -> 303 to /
 *                          malformed -> 400, already scored by this observer -> 409 */
#ifndef ENDORET_VSS_SERVER_H
#define ENDORET_VSS_SERVER_H

typedef struct {
    const char *sheet;    /* sheet CSV (perceived_draw.h) */
    const char *scores;   /* scores CSV, created when absent */
    const char *observer; /* name written in the observer column (no commas) */
    const char *bind;     /* IPv4 address, default "127.0.0.1" */
    int port;             /* 0 = an ephemeral port */
    const char *manifest; /* NULL, or the manifest the sheet was drawn from: its folder's images may be served */
} vss_server_cfg;

enum { VSS_MAX_OBSERVER = 64 }; /* characters of an observer name */

typedef struct vss_server vss_server;

/* Loads and validates both files, then listens. *port_out = the bound port. ER_OK / ER_INPUT /
 * ER_RUNTIME (e.g. port in use). */
int vss_server_start(const vss_server_cfg *cfg, vss_server **out, int *port_out);
/* Couples of the sheet, and how many this observer has scored. */
void vss_server_progress(vss_server *s, int *n, int *done);
void vss_server_stop(vss_server *s);

#endif
