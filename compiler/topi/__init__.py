"""Operator library: packed (grouped) conv2d, depthwise conv2d (on dwmac) and dense with the requant epilogue and
tunable schedules."""
from compiler.topi.conv2d import ConvKernel, ConvShape, conv2d_compute, conv2d_kernel, schedule_conv2d
from compiler.topi.depthwise import DwKnobs, DwShape, depthwise_kernel, dwmac_supported, pack_dw_weight
from compiler.topi.dense import dense_shape
from compiler.topi.knobs import ConvKnobs, choose_conv_knobs, estimate_conv
from compiler.topi.pad import pad_spatial
from compiler.topi.requant import Epilogue, requant_stages

__all__ = ["ConvKernel", "ConvShape", "conv2d_compute", "conv2d_kernel", "schedule_conv2d", "dense_shape",
           "ConvKnobs", "choose_conv_knobs", "estimate_conv", "pad_spatial", "Epilogue", "requant_stages",
           "DwKnobs", "DwShape", "depthwise_kernel", "dwmac_supported", "pack_dw_weight"]
