/* http_reply.h — the one way endoret's local web pages (vss serve, endoret serve) answer a request
 * with libmicrohttpd: body copied, no caching, no MIME sniffing. */
#ifndef ENDORET_HTTP_REPLY_H
#define ENDORET_HTTP_REPLY_H

#include <stddef.h>
#include <microhttpd.h>

enum MHD_Result http_reply(struct MHD_Connection *c, unsigned status, const char *type, const void *body, size_t len);
enum MHD_Result http_reply_text(struct MHD_Connection *c, unsigned status, const char *msg);

#endif
