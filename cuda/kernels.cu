/* The one translation unit nvcc compiles into flashcl's fatbinary (cmake/cuda.cmake): every
 * kernel of the CUDA backend, with extern "C" names that src/cuda/kernels.c looks up. Kept to one
 * unit so the library embeds and loads a single module. */
#include "softmax.cuh"
#include "attention_kernels.cuh"
