/* The one SVG plot writer: legend escaping, NaN points skipped, log2 axis, step series. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/base/base.h"
#include "nn/base/svg_plot.h"
#include "tests/test_util.h"

static int count(const char *d, const char *needle) {
    int n = 0;
    for (const char *c = d; (c = strstr(c, needle)); c++) n++;
    return n;
}

Test(svg_plot, writes_series_and_legend) {
    const char *dir = test_tmpdir();
    char *p = path_join(dir, "a.svg");
    double x[4] = {16, 32, 64, 128}, y1[4] = {0.1, 0.5, 0.8, 0.9}, y2[4] = {0.2, NAN, 0.7, 0.95};
    svg_series s[2] = {{.name = "first <a>", .n = 4, .x = x, .y = y1}, {.name = "second", .n = 4, .x = x, .y = y2}};
    svg_opts o = {.title = "title", .xlabel = "bits", .ylabel = "score", .logx = 1, .ymin = 0, .ymax = 1};
    cr_assert_eq(svg_line_plot(p, &o, s, 2), ER_OK, "%s", er_msg());
    char *d; size_t n;
    cr_assert_eq(read_file(p, &d, &n), ER_OK);
    cr_expect(strstr(d, "<svg") == d);
    cr_expect(strstr(d, "first &lt;a&gt;") != NULL, "legend text escaped");
    int lines = 0;
    for (char *c = d; (c = strstr(c, "<polyline")); c++) lines++;
    cr_expect_eq(lines, 2);
    int circles = 0;
    for (char *c = d; (c = strstr(c, "<circle")); c++) circles++;
    cr_expect_eq(circles, 7, "NaN point skipped");
    cr_expect(strstr(d, ">128<") != NULL, "log2 axis labelled in bits");
    free(d);
    double z[1] = {NAN};
    svg_series bad = {.name = "x", .n = 1, .x = z, .y = z};
    cr_expect_eq(svg_line_plot(p, &o, &bad, 1), ER_INPUT);
    free(p);
}

Test(svg_plot, step_series_draw_bin_edges_without_markers) {
    const char *dir = test_tmpdir();
    char *p = path_join(dir, "h.svg");
    double x[3] = {0, 1, 2}, y[3] = {0.5, 0.25, 0.25};
    svg_series s = {.name = "hist", .n = 3, .x = x, .y = y, .steps = 1};
    svg_opts o = {.title = "h", .xlabel = "d", .ylabel = "fraction", .width = 340, .height = 295, .include_zero = 1};
    cr_assert_eq(svg_line_plot(p, &o, &s, 1), ER_OK, "%s", er_msg());
    char *d; size_t n;
    cr_assert_eq(read_file(p, &d, &n), ER_OK);
    cr_expect_eq(count(d, "<circle"), 0);
    /* plot area x 70..150 for x in [0, 3] (last bin as wide as the one before): edges 70, 96.7, 123.3, 150 */
    cr_expect(strstr(d, "points=\"70.0,") != NULL, "%s", d);
    cr_expect(strstr(d, "150.0,") != NULL, "last bin's right edge: %s", d);
    free(d);
    free(p);
}
