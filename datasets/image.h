/* image.h — float CHW images in [0,1] (RGB: c=3, masks/gray: c=1) and the operations on them.
 *
 * An image owns its buffer; `cap` is the number of floats allocated, so a reused image (a loader
 * worker's scratch) only reallocates when it must grow: image_ensure() is the one way to size an
 * output, and every op below writes into a caller-provided `dst` through it.
 * Decoders never exit: a corrupt, truncated or unknown file gives ER_INPUT naming the file. */
#ifndef ENDORET_IMAGE_H
#define ENDORET_IMAGE_H

#include <stddef.h>
#include <stdint.h>
#include "nn/base/rng.h"

typedef struct {
    int c, h, w;
    float *data; /* c*h*w floats, plane after plane */
    size_t cap;  /* floats allocated */
} image;

/* The largest image a decoder accepts: an 8192 x 8192 frame (0.8 GB as float RGB). Endoscopy frames
 * are at most a few megapixels; a header that claims more is refused before anything is allocated
 * (the JPEG fuzz target found a 2.9 GB allocation under the old 2^28-pixel bound). */
#define IMAGE_MAX_SIDE 32768
#define IMAGE_MAX_PIXELS (1u << 26)

#define IMG_AT(im, ch, y, x) ((im)->data[((size_t)(ch) * (im)->h + (y)) * (im)->w + (x)])

/* Make `im` hold c*h*w floats (contents undefined), growing its buffer only when needed. */
void image_ensure(image *im, int c, int h, int w);
void image_free(image *im);
void image_copy(image *dst, const image *src);

/* ---- decoding / encoding (png_io.c, jpeg_io.c, image_load.c) ----
 * `channels`: 0 = native (gray 1, colour 3; alpha dropped), 3 = force RGB, 1 = force gray (luma
 * 0.299/0.587/0.114, as PIL convert('L')). 16-bit PNGs keep their precision (value/65535). */
int image_decode_png(const uint8_t *buf, size_t len, const char *name, int channels, image *out);
int image_decode_jpeg(const uint8_t *buf, size_t len, const char *name, int channels, image *out);
/* Same as image_decode_jpeg, but lets libjpeg's DCT scaling shrink the image by 1/2, 1/4 or 1/8
 * while both sides stay >= min_side (a fast first step when the consumer downsizes anyway). */
int image_decode_jpeg_scaled(const uint8_t *buf, size_t len, const char *name, int channels,
                             int min_side, image *out);
/* image_decode_jpeg at scale 1/denom (1, 2, 4, 8: libjpeg's scaled IDCT, the full image is never
 * made), refused (ER_INPUT) before any pixel is allocated when the scaled size is over max_pixels
 * (0: no limit but IMAGE_MAX_PIXELS of the full size). */
int image_decode_jpeg_at(const uint8_t *buf, size_t len, const char *name, int channels, int denom, int64_t max_pixels,
                         image *out);
/* What the magic bytes say a buffer holds (image_decode's dispatch) */
typedef enum { IMAGE_UNKNOWN, IMAGE_PNG, IMAGE_JPEG } image_format;
image_format image_sniff(const uint8_t *buf, size_t len);
/* Whether a file name is one the importers and tools take as an image: .png, .jpg, .jpeg (any case) */
int image_name_ok(const char *name);
/* Dispatch on magic bytes (PNG signature / JPEG SOI), never on the file extension. */
int image_decode(const uint8_t *buf, size_t len, const char *name, int channels, image *out);
int image_load(const char *path, int channels, image *out);
/* Width/height from the header only (no pixel decode). */
int image_probe(const char *path, int *w, int *h);
/* The same from bytes in memory (name for the message). A PNG's size is the IHDR libpng reads; a
 * JPEG's the first SOFn, so a decoder given the size must still check what it finds. */
int image_probe_mem(const uint8_t *buf, size_t len, const char *name, int *w, int *h);

/* 8-bit PNG (gray or RGB by im->c; values clamped to [0,1], rounded). Written to a temp file and
 * renamed (atomic, no fsync: generated datasets do not need durability per file). */
int image_save_png(const char *path, const image *im);
int png_save_u8(const char *path, const uint8_t *hwc, int c, int h, int w);
/* Encode to a JPEG in memory at `quality` (clamped to 1..100, 4:2:0) and decode it back into
 * `im` (the SSCD "encoding quality" augmentation). RGB or gray. */
int image_jpeg_roundtrip(image *im, int quality);
/* Encode a 1- or 3-channel image as a JPEG in memory (*out malloc'd, free() it). */
int image_encode_jpeg(const image *im, int quality, uint8_t **out, size_t *len);

/* ---- geometry (resize.c, transforms.c) ---- */
typedef enum { RESIZE_NEAREST, RESIZE_BILINEAR, RESIZE_BICUBIC } resize_mode;
/* Separable resampling with an antialiasing filter when downscaling (the support widens with the
 * scale factor), as torch.nn.functional.interpolate(antialias=True, align_corners=False) and PIL.
 * Bicubic uses a = -0.5. NEAREST picks floor((i + 0.5) * in/out) like PIL (used for masks). */
void image_resize(const image *src, image *dst, int h, int w, resize_mode mode);
/* Resize the in-bounds rectangle (top, left, ch, cw) of src: crop + resize without the copy. */
void image_resize_crop(const image *src, int top, int left, int ch, int cw, image *dst, int h, int w,
                       resize_mode mode);
/* Crop (top, left, h, w); pixels outside the source are 0 (torchvision's crop pads). */
void image_crop(const image *src, image *dst, int top, int left, int h, int w);
void image_center_crop(const image *src, image *dst, int h, int w);
void image_hflip(image *im);
void image_vflip(image *im);
/* Rotate by `deg` counter-clockwise about the centre, same size, bilinear (nearest if
 * `nearest`), outside = 0: PIL Image.rotate(deg) without expand. */
void image_rotate(const image *src, image *dst, float deg, int nearest);
/* torchvision RandomResizedCrop.get_params: area fraction in scale[], aspect ratio in ratio[]
 * (log-uniform), 10 tries, then the centre-crop fallback. */
void rrc_params(rng_t *r, int h, int w, const float scale[2], const float ratio[2], int *top,
                int *left, int *ch, int *cw);

/* ---- colour (transforms.c); all expect RGB (c == 3) unless said ---- */
void image_adjust_brightness(image *im, float f);
void image_adjust_contrast(image *im, float f);
void image_adjust_saturation(image *im, float f);
void image_adjust_hue(image *im, float f); /* f in [-0.5, 0.5], fraction of the hue circle */
/* torchvision ColorJitter: factors drawn uniform in [max(0,1-b),1+b] etc. (hue in [-h,h]) and the
 * four ops applied in a random order. A zero strength skips that op. */
void image_color_jitter(image *im, rng_t *r, float b, float c, float s, float h);
void image_grayscale(image *im);                /* luma into all 3 channels */
/* Gaussian blur with standard deviation sigma (kernel radius ceil(3 sigma)), reflect borders. */
void image_gaussian_blur(image *im, float sigma, image *scratch);
/* PIL ImageFilter.GaussianBlur(radius): 3 box-blur passes with PIL's fractional box radius. */
void image_pil_gaussian_blur(image *im, float radius, image *scratch);
/* Same with an explicit odd kernel size (torchvision GaussianBlur(kernel_size, sigma)). */
void image_gaussian_blur_kernel(image *im, float sigma, int ksize, image *scratch);
void image_normalize(image *im, const float mean[], const float std[]);
extern const float IMAGENET_MEAN[3], IMAGENET_STD[3];
/* sRGB (D65) -> CIELAB; dst gets 3 planes L*, a*, b*. */
void image_rgb_to_lab(const image *src, image *dst);
void rgb_to_lab(const float rgb[3], float lab[3]);

#endif
