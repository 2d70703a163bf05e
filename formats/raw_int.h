/* raw_int.h - what the raw format (raw.c) shares with its backend adapter (rawbackend.c) beyond
 * raw.h. Internal to formats/. */
#ifndef FMT_RAW_INT_H
#define FMT_RAW_INT_H

#include <stddef.h>
#include <stdint.h>

/* A JPEG of the h x w x c pixels at quality (1..100, 0 = 90; 4:2:0), and the hash of what a
 * decoder gives back: 0, or the encoder's / decoder's error. *jpeg is malloc'd.
 * The writer's mixed mode stores it; the backend's w_sample_bytes sizes it the same way. */
int fmt_raw_jpeg_encode(const void *pixels, uint32_t h, uint32_t w, uint32_t c, int quality,
                        uint8_t **jpeg, size_t *len, uint64_t *hash);

#endif
