/* Calls a GEMM kernel compiled by tilec through its C ABI
 * (docs/codegen.md): gemm_k0(A, B, C, lo, hi) over the parallel range
 * [0, TRIP), split in two halves as two threads would, and compares C with
 * a naive triple loop. Built by lit-tests/codegen/c-abi.tile. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define M 256
#define K 64
#define N 256

void gemm_k0(float *A, float *B, float *C, int64_t lo, int64_t hi);

int main(int argc, char **argv) {
  long trip = argc > 1 ? atol(argv[1]) : 1;
  float *A = malloc(sizeof(float) * M * K), *B = malloc(sizeof(float) * K * N);
  float *C = malloc(sizeof(float) * M * N);
  for (int i = 0; i < M * K; i++) A[i] = (float)((i * 7) % 13) / 13.0f - 0.5f;
  for (int i = 0; i < K * N; i++) B[i] = (float)((i * 5) % 11) / 11.0f - 0.5f;
  gemm_k0(A, B, C, 0, trip / 2);
  gemm_k0(A, B, C, trip / 2, trip);
  double worst = 0;
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      double want = 0;
      for (int k = 0; k < K; k++) want += (double)A[i * K + k] * B[k * N + j];
      double err = fabs(C[i * N + j] - want);
      if (err > worst) worst = err;
    }
  printf("max abs error %s\n", worst < 1e-4 ? "below 1e-4" : "TOO LARGE");
  printf("C[0][0] = %.4f, C[255][255] = %.4f\n", C[0], C[M * N - 1]);
  return worst < 1e-4 ? 0 : 1;
}
