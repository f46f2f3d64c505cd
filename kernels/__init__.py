"""GPU and reference kernels (token-mask application). Filled in by the GPU-path layer; importing
this package never requires triton or flashinfer."""
