// tma_box.h: chapter 12's description of one head's tiles to the TMA, the
// numbers cuTensorMapEncodeTiled takes (kernels/attention_flash_ws.cu:
// tile_map). Host C; no CUDA needed to compute or test it.
//
// The tensor: B sequences of T rows of `width` bf16 values, rows `ld`
// elements apart (qkv: width = ld = 3C; dout: width = ld = C). The box: a
// head's `rows` x `head_size` tile, the TMA writing each of its rows as one
// 128-byte line of the tensor cores' swizzle.
#ifndef TMA_BOX_H
#define TMA_BOX_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// The TMA's limits that a description must meet (CUDA driver API,
// cuTensorMapEncodeTiled): strides a multiple of 16 bytes and below 2^40;
// every box dimension 1 to 256; the box's first dimension a multiple of 16
// bytes and, with the 128-byte swizzle, at most 128 bytes.
#define TMA_STRIDE_ALIGN 16
#define TMA_STRIDE_LIMIT ((uint64_t)1 << 40)
#define TMA_BOX_LIMIT 256
#define TMA_SWIZZLE_BYTES 128

typedef struct {
    uint64_t dims[3];     // elements, innermost first: width, T, B
    uint64_t strides[2];  // bytes: from one row to the next, one sequence to the next
    uint32_t box[3];      // elements: head_size, rows, 1
} TmaBox;

// Fills box for bf16 values and returns 0, or returns -1 with the reason in
// err (ERR_LEN bytes) when the TMA cannot copy such tiles: a dimension
// below 1, width past ld or not a whole number of heads, a stride or box
// past the limits above.
int tma_box_for_heads(TmaBox *box, int B, int T, int width, int ld, int head_size, int rows,
                      char *err);

#ifdef __cplusplus
}
#endif

#endif
