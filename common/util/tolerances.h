// tolerances.h: every numerical tolerance of the project, in one table, each
// with its reason. Tests and the check mode use these names; the book quotes
// this file.
//
// Unless a line says otherwise, a tolerance bounds the error of a whole
// tensor relative to its scale:
//     max_i |got_i - ref_i|  <=  tol * max_i |ref_i|
// which, unlike an element-wise relative error, does not blow up on the
// elements that happen to be near zero.
#ifndef TOLERANCES_H
#define TOLERANCES_H

// The float build of the CPU reference against its double build, on a tiny
// model at 3x GPT-2's init scale. float keeps 24 bits (relative rounding
// 6e-8); sums of C terms through a few layers grow that to about 1e-6.
#define TOL_CPU_F32_VS_F64 1e-5

// A chapter-00 GPU kernel against the CPU reference's same layer, both fp32:
// they differ only in the order of their sums (tree reductions, cuBLAS's
// tiling), which moves the last bits: measured <= 9e-7 on the H100.
#define TOL_GPU_KERNEL_FP32 1e-5

// The whole GPU model in fp32 against the CPU reference on a tiny model:
// logits, loss, every gradient, and the losses of 5 training steps.
// Summation-order differences of each layer compound through the network:
// measured at most 1.6e-6 (H100, 2026-11-20); 1e-4 leaves a wide margin and
// stays far below what a wrong index or a missing term gives (~1e-1).
#define TOL_GPU_MODEL_FP32 1e-4

// The parameters after 5 AdamW steps, GPU against CPU, relative to each
// tensor's largest parameter. Adam divides each gradient by its own running
// RMS, so a gradient that is nothing but rounding noise still moves its
// parameter by up to lr per step. One tensor's gradient is exactly that: the
// key bias's, zero in exact arithmetic (softmax ignores a constant added to
// a row of scores). The test therefore uses eps = 1e-6, which damps updates
// of noise-sized gradients, and compares the rest to 1e-3 (with eps = 1e-8
// the key bias differed by 0.04 lr, measured on the H100, 2026-11-20). The
// update arithmetic itself is checked element by element in the AdamW kernel
// test, to 1e-6.
#define TOL_GPU_ADAMW_STEPS_FP32 1e-3

// --check-state: our fp32 GPT-2 on the GPU against PyTorch's fp32 GPT-2
// (TF32 off) on the same weights and batch, at the full 124M shape. Two
// independent implementations with different kernels sum in different
// orders over up to 50257 (softmax) and B*T = 4096 (weight gradients) terms.
// Measured at B=4, T=1024 (H100, 2026-11-20): logits 2.2e-6, every gradient
// at most 2.1e-6, the loss identical to the printed digits. The tolerances
// leave a margin of about 50x.
#define TOL_CHECK_LOGITS_FP32 1e-4
#define TOL_CHECK_LOSS_FP32 1e-5
#define TOL_CHECK_GRADS_FP32 1e-4

// TF32 (chapter 01) rounds the GEMMs' inputs to a 10-bit mantissa (relative
// 2^-11 = 4.9e-4 per operand); a product of two such, summed over C terms,
// keeps an error of about 1e-3 of the output's scale: measured at most 1.9e-3
// on the tiny model (H100, 2026-11-20).
#define TOL_GPU_MODEL_TF32 5e-3

// Chapter 01's exercise, one TF32 GEMM of our own (tiled_gemm_tf32) against
// the CPU's fp32 matmul. Each operand is rounded to nearest at 11 significant
// bits, a relative error of at most 2^-11, so one product is off by at most
// 2^-10 = 9.8e-4 of itself (the whole error when K = 1); over a sum of
// products of random signs the errors partly cancel: at most 3.4e-4 of the
// output's scale over the test's shapes (H100, 2026-11-20). 2e-3 is twice
// the one-product bound and far below what a wrong index or a lost tile of K
// gives (~1e-1 and more).
#define TOL_TF32_GEMM 2e-3

// ---- bf16 (chapter 02) ------------------------------------------------------
// bf16 keeps 8 significant bits: rounding to nearest moves a value by at most
// half the step between neighbours, 2^-8 = 3.9e-3 of itself (just above a
// power of two; 2^-9 just below the next). The bf16 model rounds its weights
// once and then every activation and gradient it stores, so a logit of the
// tiny model carries about ten roundings (embedding, 2 x (layernorm, qkv,
// attention, projection, residual, MLP), final layernorm, logits) of random
// sign: about sqrt(10) x 3.9e-3 = 1.2e-2 of its scale. Measurements below:
// H100, 2026-11-21, against the fp32 CPU reference (tiny model) or PyTorch's
// fp32 GPT-2 (124M).

// The tiny model's logits in bf16 against the CPU reference, relative to
// their scale: measured at most 1.53e-2 over the four variants (tied or not,
// padded or not). 3e-2 is twice that; a wrong index or a lost term moves
// logits by 1e-1 and more of their scale.
#define TOL_GPU_MODEL_BF16 3e-2

// Its mean loss (fp32 in every build, from bf16 logits): the mean over the
// B*T tokens averages the per-token errors away. Measured at most 4.7e-4
// relative (one forward), 2.5e-4 over 5 AdamW steps; 2e-3 is 4x that.
#define TOL_GPU_LOSS_BF16 2e-3

// Its gradients, tensor by tensor, by direction (what AdamW uses of them):
// cosine similarity with the CPU's of at least 0.999 (DESIGN.md's number).
// Measured at least 0.99976 (wte; 1 - cosine = 2.4e-4, a quarter of what is
// allowed). The largest element-wise differences are 1e-2 to 3e-2 of each
// tensor's scale, which says little: a small gradient element is rounded as
// coarsely, relative to itself, as a large one.
#define TOL_GPU_GRAD_COSINE_BF16 0.999

// Every gradient's size against the reference's, |got| / |ref|, within 1% of
// 1 (DESIGN.md's number), next to the cosine: the cosine sees only the
// direction, and a gradient twice too large (a term counted twice) has a
// cosine of 1. Roundings of random sign change a norm far less than they
// change single elements: the norm is a sum over the whole tensor.
#define TOL_GRAD_NORM_RATIO 0.01

// The change of all weights over 5 AdamW steps (lr 1e-3, eps 1e-6), bf16
// model with fp32 master weights and moments against the CPU, by direction:
// measured cosine 0.99787. Adam moves each weight by about lr whatever its
// gradient's size, so the weights whose gradients are near zero move by +-lr
// on either side at random (the key bias, whose gradient is zero in exact
// arithmetic, has a change cosine of 0.92 alone); over the whole model 0.99
// leaves 5x the measured 1 - cosine.
#define TOL_GPU_ADAMW_STEPS_COSINE_BF16 0.99

// ---- FP8 (chapter 13) -------------------------------------------------------
// Chapter 13's GEMMs read e4m3 operands (3 mantissa bits: a value is moved by
// at most 2^-4 = 6.3% of itself) and e5m2 gradients (2 bits: at most 2^-3 =
// 12.5%), against bf16's 2^-9: some thirty times bf16's error per operand,
// and 1 - cosine grows with the square of it. The tiny model with heads of 64
// against chapter 12's, one forward and backward, then five AdamW steps;
// measured on the H100, 2026-11-26, with the forward's fast accumulation
// (GPU_TEST_VERBOSE=1, fp8_matches_chapter_12; the log is
// results/h100/logs/tests-issues-25-26/fp8_verbose.txt).
// Its 3x-scaled initialization (test_model_parity.c), which makes the
// softmaxes sharp so that the non-linear paths matter, also makes the model
// sensitive: a logit moved by FP8's few percent moves a sharp softmax's
// gradient by more. The limits are about twice the measured deviations: far
// from what a wrong index, a lost tile or a forgotten bias gradient gives
// (cosines near 0), which the kernel tests also catch exactly. The evidence
// that FP8 trains as bf16 does is make demo-13's 300 steps (chapter 13's text).

// Its mean loss, relative: measured at most 7.6e-3 (one forward and five steps).
#define TOL_GPU_LOSS_FP8 1.5e-2
// Every gradient tensor's direction: cosine measured at least 0.896 (qkv's bias).
#define TOL_GPU_GRAD_COSINE_FP8 0.8
// and size: |fp8| / |bf16| measured within 6.0% of 1 (wte).
#define TOL_GRAD_NORM_RATIO_FP8 0.1
// The change of all weights over five steps: cosine measured 0.890.
#define TOL_GPU_ADAMW_STEPS_COSINE_FP8 0.75

// The losses of 10 steps of the bf16 trainer against the fp32 CPU trainer's
// (tiny model, synthetic data), relative: measured at most 4.0e-4; 2e-3 as
// TOL_GPU_LOSS_BF16.
#define TOL_GPU_TRAINING_BF16 2e-3

// ANCHOR: no_master_tolerance
// Chapter 14's --no-master-weights against the master weights, the tiny
// model's losses over 3 steps, relative. The bf16 weights the two runs read
// differ by about one bf16 step each (stochastic rounding against rounding
// the master copy to nearest): a perturbation of the size of bf16's own
// rounding of the weights, which TOL_GPU_LOSS_BF16 allows against fp32; the
// same limit. Measured 8.3e-4 on the H100, 2026-11-26 (GPU_TEST_VERBOSE=1;
// results/h100/logs/tests-issues-25-26/no_master_weights.txt).
#define TOL_NO_MASTER_LOSS_BF16 2e-3
// ANCHOR_END: no_master_tolerance

// --check-state in the bf16 build: our bf16 GPT-2 against PyTorch's fp32
// (TF32 off) on the same weights and batch, 124M at B=4, T=1024: logits
// 1.19e-2 of their scale, the loss 1.1e-5 relative, every gradient's cosine
// at least 0.99962 (lnfb; their largest differences are 1.2e-2 to 3.2e-2 of
// their scale). The same limits as the tiny model's: 2.5x, 180x and 2.6x
// (in 1 - cosine) the measured.
#define TOL_CHECK_LOGITS_BF16 3e-2
#define TOL_CHECK_LOSS_BF16 2e-3
#define TOL_CHECK_GRAD_COSINE_BF16 0.999

// ---- appendix E's GEMM -------------------------------------------------------
// gemm_step against the CPU's fp32 matmul, from bf16-exact operands. A
// product of two bf16 values (8 significant bits each) is exact in fp32, and
// the sums are fp32, in another order than the CPU's: an error of a few
// units of fp32's last place of the terms' scale, below 1e-5 of the output's
// at these sums of up to 3072 terms. What remains is the one rounding of
// each output to bf16 when stored: at most bf16's unit roundoff, 2^-8 =
// 3.9e-3 of the value (8 significant bits), so of max |C|; the H100 showed
// up to 3.15e-3 (2026-11-26, tests/gpu/test_kernels_gemm_steps_bf16.c with
// GPU_TEST_VERBOSE=1). 4e-3 is that bound and the sums' 1e-5; a lost slice of
// K, a wrong index or a misplaced fragment moves outputs by 1e-1 of the
// scale and more.
#define TOL_GEMM_BF16 4e-3

// ---- flash attention (chapter 05) --------------------------------------------
// attention_forward_v2 against the fp32 CPU reference, from bf16-exact
// inputs. The scores and the running softmax statistics are fp32; what is
// rounded to bf16 is P, once, as the A operand of P V, and the output, once,
// when stored: two roundings of at most 2^-9 each, where the eager version
// (chapters 02-04) rounds the scores, the probabilities and att @ v, and
// allows 3e-2. Measured at most 2.7e-3 over the kernel tests' shapes (H100,
// 2026-11-25, GPU_TEST_VERBOSE=1; v2 and v3 alike, their outputs being
// bit-identical): 1e-2 is 3.7x that, and a wrong mask or a lost tile moves
// the output by 1e-1 of its scale and more.
#define TOL_FLASH_OUT_BF16 1e-2

// Its log-sum-exp per row, fp32 throughout (fp32 products of bf16 inputs
// added in fp32, an fp32 running max and sum), against the CPU's in double,
// relative to the largest |lse|: the error of a few fp32 sums. Measured at
// most 1.3e-7.
#define TOL_FLASH_LSE 1e-5

// attention_backward_v2's dq, dk and dv against the CPU: P and dS are rounded
// to bf16 as operands of the gradient GEMMs, and each gradient once when
// stored; dP and D are fp32. Three roundings deep, as the output is two.
// Measured at most 4.4e-3 of each tensor's scale, with cosines of at least
// 0.999996 and norms within 2e-4 of the CPU's; against the eager bf16
// attention at most 9.0e-3 (it rounds more), where the bf16 model
// tolerance, 3e-2, applies.
#define TOL_FLASH_GRADS_BF16 2e-2

// ---- the 8-bit optimizer (chapter 10) ------------------------------------------
// ANCHOR: adamw8bit_tolerance
// AdamW with m and v stored in 8 bits (common/optim/quantize8.h) against fp32
// AdamW (common/optim/optimizer.c): the weights' change over several steps, by
// direction and by size. The two compute the same update from the same
// moments; what differs is that the 8-bit one rounds its moments to their
// maps after every step. One step from the same dequantized state is bit
// for bit fp32 AdamW's (tested), so the whole difference is that rounding,
// carried into the later steps.
// The direction: a block's values mostly lie in the top decade of its map,
// [0.1, 1] x absmax, where neighbouring values are 0.9/64 x absmax apart
// for m and 0.9/128 x absmax for v; rounding to nearest leaves an error of
// RMS gap / sqrt(12): 0.4% of absmax for m, 0.2% for v. For normally
// distributed gradients absmax is about 2.8 times a block's RMS, so m keeps
// an RMS error of about 1.1% of its own RMS, and v about 0.9% (g^2 is more
// spread out), of which the update m / sqrt(v) takes half: the update is
// off by r = sqrt(1.1^2 + 0.45^2) = 1.2% RMS per value. Errors of random
// sign tilt the weights' change by an angle of about r: 1 - cosine =
// r^2 / 2 = 7e-5. Measured: 7.9e-5 over 10 steps from a fresh state
// (tests/cpu/test_quantize8.c, Q8_TEST_VERBOSE=1), at most 1.7e-4 over 4
// steps from a random quantized state (the GPU test's setting, computed on
// the CPU over 8 seeds). 0.999 allows 6x the larger.
// The size: rounding to nearest is unbiased for m and v themselves, but
// not for the update, which divides by sqrt(v): 1/sqrt is convex, so an
// error of either sign in v raises 1/sqrt(v) on average (by about
// 3/8 (error/v)^2), and the 8-bit steps come out slightly longer. Measured:
// norms within 1.2e-4 of fp32's from a fresh state, and up to 1.8e-3 from a
// random quantized state with small gradients (the GPU test's setting,
// where v's rounding dominates). 1e-2, DESIGN.md's 1% for norms, is 5.5x
// that. Against mistakes, the cosine is the sharper check: every index read
// one too high, for one, gives 1 - cosine 5.6e-3 (and norms 1.4 to 1.7%
// short).
// Not element by element: a moment 100 times smaller than its block's
// largest keeps two significant digits, so single weights move differently
// by up to a few per cent of the largest step, in directions that average
// out. And the range is finite: a v more than about 6 million times below
// its block's largest (the square of a gradient 2500 times smaller than the
// block's largest) rounds to 0, so that value's v restarts from
// (1 - beta2) g^2 at every step and its step can grow far past lr (measured:
// 100 lr, with gradients whose sizes spread over 3 decades within a block).
#define TOL_ADAMW8BIT_COSINE 0.999
#define TOL_ADAMW8BIT_NORM_RATIO 1e-2
// ANCHOR_END: adamw8bit_tolerance

// ANCHOR: ranks_tolerance
// Chapter 15: N GPUs at B sequences each against one GPU at B with
// --grad-accum N (the same sequences a step), every step's loss and
// gradient norm, relative (tests/shell/test_gpu_multi.sh reads this line).
// The two take the same mean of N gradients, in other orders of rounding:
// the ranks' bf16 gradients averaged by NCCL's all-reduce, against the
// micro-batches' gradients summed in bf16 and scaled: bf16's rounding of a
// sum, 2^-9 relative, on every gradient, and through the steps after the
// first on the weights too. 1e-2, DESIGN.md's 1% for bf16 values.
#define TOL_RANKS_VS_MICRO_BATCHES 1e-2
// ANCHOR_END: ranks_tolerance

#endif
