/* test_browser.h — headless Chromium for the page tests: find it (optional: the tests that need it
 * skip with the reason) and count the pixels of a colour in its screenshots. */
#ifndef ENDORET_TEST_BROWSER_H
#define ENDORET_TEST_BROWSER_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "datasets/image.h"

/* The browser, or NULL: chromium is optional, the test skips without it. */
static inline const char *find_chromium(void) {
    static const char *names[] = {"chromium", "chromium-browser", "google-chrome"};
    for (int i = 0; i < 3; i++) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", names[i]);
        if (system(cmd) == 0) return names[i];
    }
    return NULL;
}

/* Pixels of colour (r, g, b) (+-2 per channel, JPEG-free: chromium writes PNG). */
static inline int count_colour(const image *im, int r, int g, int b) {
    int n = 0, hw = im->h * im->w;
    for (int p = 0; p < hw; p++) {
        int c0 = (int)lrintf(255 * im->data[p]), c1 = (int)lrintf(255 * im->data[hw + p]), c2 = (int)lrintf(255 * im->data[2 * hw + p]);
        n += abs(c0 - r) <= 2 && abs(c1 - g) <= 2 && abs(c2 - b) <= 2;
    }
    return n;
}

#endif
