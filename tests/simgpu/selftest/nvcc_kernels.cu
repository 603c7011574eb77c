// nvcc_kernels: a real nvcc-built program (CUDA 13, -cudart shared) run against the mock runtime.
#include <cstdio>
#include <cuda_runtime.h>

__global__ void scale_elementwise(float *x, float a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}
template <typename T> __global__ void tiled_gemm(const T *a, const T *b, T *c, int n)
{
    (void)a, (void)b, (void)c, (void)n;
}

int main()
{
    int n = 1 << 16;
    float *d = nullptr;
    if (cudaMalloc(&d, n * sizeof(float)) != cudaSuccess) return 2;
    cudaStream_t s;
    cudaStreamCreate(&s);
    for (int i = 0; i < 10; i++) {
        scale_elementwise<<<n / 256, 256, 0, s>>>(d, 2.0f, n);
        tiled_gemm<float><<<dim3(16, 16), dim3(16, 16), 0, s>>>(d, d, d, 256);
    }
    cudaError_t e = cudaStreamSynchronize(s);
    cudaFree(d);
    printf("nvcc_kernels: launched=20 status=%s\n", cudaGetErrorName(e));
    return e == cudaSuccess ? 0 : 1;
}
