"""Graph IR, graph passes, the accelerator interface and its numpy reference backend."""
from compiler.graph.accel_interface import (AccelBackend, BlockConfig, pack_activation, pack_weight, unpack_activation,
                                            unpack_weight)
from compiler.graph.ir import Graph, Node, TensorInfo
from compiler.graph.ref_backend import RefAccelBackend

__all__ = ["AccelBackend", "BlockConfig", "Graph", "Node", "TensorInfo", "RefAccelBackend", "pack_activation",
           "unpack_activation", "pack_weight", "unpack_weight"]
