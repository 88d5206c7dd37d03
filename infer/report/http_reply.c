/* http_reply.c — see http_reply.h. */
#include "infer/report/http_reply.h"

#include <string.h>

enum MHD_Result http_reply(struct MHD_Connection *c, unsigned status, const char *type, const void *body, size_t len) {
    struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", type);
    MHD_add_response_header(r, "Cache-Control", "no-store");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

enum MHD_Result http_reply_text(struct MHD_Connection *c, unsigned status, const char *msg) {
    return http_reply(c, status, "text/plain; charset=utf-8", msg, strlen(msg));
}
