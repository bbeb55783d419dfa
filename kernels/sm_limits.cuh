// sm_limits.cuh: what one streaming multiprocessor holds, for the GPU the
// code is being compiled for (__CUDA_ARCH__), where a kernel's launch
// bounds depend on it. For the .cu files only.
//
// Threads per SM: 2048 on the A100 (8.0), the H100 and H200 (9.0) and the
// B200 (10.0); 1536 on the GPUs of 8.6, 8.9 and 12.0 (RTX 30, L4 and RTX
// 40, RTX 50). A kernel that asks for two blocks of 1024 threads per SM
// cannot have them there, and ptxas refuses the launch bound.
#ifndef SM_LIMITS_CUH
#define SM_LIMITS_CUH

#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ == 860 || __CUDA_ARCH__ == 870 || \
                               __CUDA_ARCH__ == 890 || __CUDA_ARCH__ >= 1200)
#define SM_MAX_THREADS 1536
#else
#define SM_MAX_THREADS 2048
#endif

#endif
