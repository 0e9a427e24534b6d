"""The LLVM target (llvmlite): code generation from the loop IR, the JIT, the CPU runtime's thread pool, the
target CPU, and the hand-written host-op kernels (numpy's summation order) of the CPU backend."""
