"""The device layer on a GPU: Numba CUDA kernels on torch's CUDA tensors.

Loaded only when a model moves to a GPU (or by the simulator tests), never by `import aimc.devices`: without
the `aimc[gpu]` extra (numba-cuda) and a GPU everything runs on the CPU. Each kernel here is the
GPU twin of a CPU kernel in aimc.devices and calls the same per-element functions (the response families'
steps, the random streams, the pulse trains), which Numba compiles for the GPU target when a kernel calls
them: a device family is written once. docs/gpu.md describes the path and where its results may differ from
the CPU's.
"""
